"""detect_system on this machine (CPU torch) and hand-built SystemInfo."""

from __future__ import annotations

import platform

import pytest
import torch
from kernelhub.errors import KernelHubError
from kernelhub.system import SystemInfo, detect_system


def test_detects_this_torch_and_machine() -> None:
    info = detect_system()
    major, minor = (int(p) for p in torch.__version__.split(".")[:2])
    assert info.torch == (major, minor)
    assert info.os == "linux"
    assert info.arch == {"amd64": "x86_64", "arm64": "aarch64"}.get(
        platform.machine().lower(), platform.machine().lower()
    )
    expected_backend = "cuda" if torch.cuda.is_available() else "cpu"
    assert info.backend == expected_backend
    assert info.cxx11_abi is torch.compiled_with_cxx11_abi()


def test_explicit_cpu_backend_drops_gpu_facts() -> None:
    info = detect_system("cpu")
    assert info.backend == "cpu"
    assert info.cuda is None and info.capability is None


@pytest.mark.skipif(torch.version.cuda is not None, reason="this torch has CUDA")
def test_cuda_backend_on_a_cpu_torch_says_what_to_do() -> None:
    with pytest.raises(KernelHubError, match="built without CUDA"):
        detect_system("cuda")


def test_unknown_backend_is_refused() -> None:
    with pytest.raises(KernelHubError, match="unknown backend 'quantum'"):
        detect_system("quantum")
    with pytest.raises(KernelHubError, match="unknown backend"):
        SystemInfo(torch=(2, 13), os="linux", arch="x86_64", backend="quantum")


@pytest.mark.parametrize(("backend", "says"), [
    ("tpu", "torch_tpu is not loaded"),
    ("neuron", "torch_neuronx is not loaded"),
    ("cann", "torch_npu reports no CANN version"),
])
def test_a_foreign_backend_without_its_device_says_what_to_install(backend: str,
                                                                    says: str) -> None:
    # The ecosystem's other accelerators are known backends: asked for on a machine
    # without their torch plug-in, the error names the plug-in and the way out.
    with pytest.raises(KernelHubError, match=says):
        detect_system(backend)


def test_describe_names_everything_selection_depends_on() -> None:
    info = SystemInfo(
        torch=(2, 14), os="linux", arch="x86_64", backend="cuda", cuda=(13, 0), capability=(9, 0)
    )
    assert info.describe() == "torch 2.14, cuda 13.0 (capability 9.0), x86_64-linux"
    assert info.compute_version == (13, 0)
    mac = SystemInfo(torch=(2, 13), os="darwin", arch="aarch64", backend="metal", macos=(15, 1))
    assert mac.describe() == "torch 2.13, metal, aarch64-darwin (macOS 15.1)"


def test_rocm_torch_reporting_cuda_is_detected_as_rocm(monkeypatch: pytest.MonkeyPatch) -> None:
    # ROCm builds of torch answer torch.cuda.is_available() and set torch.version.hip.
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)
    monkeypatch.setattr(torch.version, "hip", "7.0.51831-a3e329ad8")
    info = detect_system()
    assert info.backend == "rocm"
    assert info.rocm == (7, 0)
    assert info.cuda is None
    assert detect_system("cuda").backend == "rocm"
