"""Matching toolchains to variants: detected versions name variants, torch envs must agree.

Detection runs FAKE hipcc/icpx/nvcc scripts on PATH (these toolkits cannot be installed
here; the test names say so); torch envs are described with TorchEnv values, so the
cases hold on any machine.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from kernelhub.formats.variants import Compute, parse_variant
from kernelhub_builder.manifest import Matrix, Project, load_kernel
from kernelhub_builder.plan import toolchains as tc
from kernelhub_builder.plan.matrix import build_env_minor, found_compute, plan_variants
from kernelhub_builder.plan.toolchains import HostInfo, clear_toolchain_cache, detect_toolchains
from kernelhub_builder.plan.torch_env import TorchEnv

LINUX_X86 = HostInfo("linux", "x86_64")
BUILD_TOML = """\
[general]
name = "demo"
backends = ["cuda", "rocm", "xpu"]
[torch]
src = ["torch-ext/torch_binding.cpp"]
[kernel.demo_cuda]
backend = "cuda"
src = ["gpu/demo.cu"]
[kernel.demo_rocm]
backend = "rocm"
src = ["gpu/demo.cu"]
[kernel.demo_xpu]
backend = "xpu"
src = ["xpu/demo.cpp"]
"""


def fake_tool(bin_dir: Path, name: str, output: str) -> None:
    bin_dir.mkdir(parents=True, exist_ok=True)
    # Only shell builtins: PATH holds nothing but the fakes.
    (bin_dir / name).write_text(f"#!/bin/sh\necho '{output}'\n")
    (bin_dir / name).chmod(0o755)


@pytest.fixture(autouse=True)
def only_path_tools(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(tc, "NVCC_FALLBACKS", ())
    monkeypatch.setattr(tc, "ROCM_FALLBACKS", ())
    monkeypatch.setattr(tc, "ICPX_FALLBACKS", ())
    clear_toolchain_cache()
    yield
    clear_toolchain_cache()


@pytest.fixture
def project(tmp_path: Path) -> Project:
    root = tmp_path / "demo"
    for rel in ("torch-ext/torch_binding.cpp", "gpu/demo.cu", "xpu/demo.cpp",
                "torch-ext/demo/__init__.py"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("")
    (root / "build.toml").write_text(textwrap.dedent(BUILD_TOML))
    return Project(root=tmp_path, kernels=("demo",),
                   matrix=Matrix(torch=("2.13", "2.14"), systems=("x86_64-linux",)))


def test_detected_old_toolkits_name_the_variants_they_build_with_fake_toolchains(
    project: Project, tmp_path: Path
) -> None:
    bin_dir = tmp_path / "bin"
    fake_tool(bin_dir, "c++", "12.2.0")
    fake_tool(bin_dir, "hipcc", "HIP version: 6.4.43482-0")
    fake_tool(bin_dir, "icpx", "Intel(R) oneAPI DPC++/C++ Compiler 2025.1.0 (2025.1.0.2025)")
    fake_tool(bin_dir, "nvcc", "Cuda compilation tools, release 12.8, V12.8.93")
    found = detect_toolchains({"PATH": str(bin_dir)})
    assert found.hipcc is not None and found.icpx is not None and found.nvcc is not None
    assert found_compute(found.hipcc) == Compute("rocm", (6, 4))
    assert found_compute(found.icpx) == Compute("xpu", (2025, 1))
    assert found_compute(found.nvcc) == Compute("cuda", (12, 8))
    kernel = load_kernel(project.root / "demo", project)
    plan = {p.name: p for p in plan_variants(project, kernel, LINUX_X86, found)}
    rocm = plan["torch214-cxx11-rocm70-x86_64-linux"]
    assert not rocm.buildable and rocm.reason is not None
    assert "hipcc is ROCm 6.4 but the variant needs ROCm 7.0" in rocm.reason
    assert 'it builds rocm64 variants (add "6.4" to [matrix] rocm' in rocm.reason
    xpu = plan["torch214-cxx11-xpu20252-x86_64-linux"].reason
    assert xpu is not None and "it builds xpu20251 variants" in xpu
    cuda = plan["torch214-cxx11-cu130-x86_64-linux"].reason
    assert cuda is not None and "nvcc is CUDA 12.8" in cuda and "it builds cu128" in cuda


def _env(minor: str, torch_version: str, cuda: str | None, hip: str | None = None) -> TorchEnv:
    root = Path(f"/envs/torch-{minor}")
    return TorchEnv(version=minor, python=root / "bin/python", torch_version=torch_version,
                    cuda=cuda, cxx11_abi=True, include_dirs=(), library_dir=root / "lib",
                    python_include_dir=root / "include", root=root, hip=hip)


def test_cuda_variant_needs_a_torch_env_of_the_same_cuda(project: Project) -> None:
    envs = {"2.13": _env("2.13", "2.13.0+cpu", None),
            "2.14": _env("2.14", "2.14.1+cu126", "12.6")}
    found = tc.Toolchains(cxx=tc.Toolchain("cxx", Path("/usr/bin/c++"), "12.2.0"),
                          nvcc=tc.Toolchain("nvcc", Path("/cuda/bin/nvcc"), "13.0"))
    kernel = load_kernel(project.root / "demo", project)
    plan = {p.name: p for p in plan_variants(project, kernel, LINUX_X86, found,
                                             torch_envs=envs.get)}
    cpu_only = plan["torch213-cxx11-cu130-x86_64-linux"].reason
    assert cpu_only is not None
    assert "torch 2.13 environment holds torch 2.13.0+cpu, without CUDA" in cpu_only
    other = plan["torch214-cxx11-cu130-x86_64-linux"].reason
    assert other is not None and "built for CUDA 12.6" in other and "CUDA 13.0" in other



def test_an_env_not_made_yet_is_judged_by_what_it_will_hold(project: Project) -> None:
    """Issue 33: before the torch 2.13 env existed, its CUDA variants counted as buildable
    (18), after it was made CPU-only they did not (16). Only the newest torch of the
    matrix is pinned to a GPU build unless a pin names its build."""
    found = tc.Toolchains(cxx=tc.Toolchain("cxx", Path("/usr/bin/c++"), "12.2.0"),
                          nvcc=tc.Toolchain("nvcc", Path("/cuda/bin/nvcc"), "13.0"))
    kernel = load_kernel(project.root / "demo", project)
    made = {"2.13": _env("2.13", "2.13.0+cpu", None),
            "2.14": _env("2.14", "2.14.1+cu130", "13.0")}

    def buildable(envs: object) -> set[str]:
        return {p.name for p in plan_variants(project, kernel, LINUX_X86, found,
                                              torch_envs=envs.get)  # type: ignore[attr-defined]
                if p.buildable}

    assert buildable({}) == buildable(made) == {"torch214-cxx11-cu130-x86_64-linux"}
    fresh = {p.name: p for p in plan_variants(project, kernel, LINUX_X86, found,
                                              torch_envs=lambda minor: None)}
    reason = fresh["torch213-cxx11-cu130-x86_64-linux"].reason
    assert reason is not None and "no torch 2.13 environment yet" in reason
    assert "newest torch of the matrix (2.14)" in reason
    project.torch_pins["2.13"] = "torch==2.13.0+cu130"  # a pin that names its build
    assert "torch213-cxx11-cu130-x86_64-linux" in buildable({})
    project.torch_pins["2.13"] = "torch==2.13.0+cu126"
    said = {p.name: p for p in plan_variants(project, kernel, LINUX_X86, found,
                                             torch_envs=lambda minor: None)}
    wrong = said["torch213-cxx11-cu130-x86_64-linux"].reason
    assert wrong is not None and "is a cu126 build" in wrong


def test_rocm_variant_needs_a_rocm_torch_env(project: Project) -> None:
    found = tc.Toolchains(cxx=tc.Toolchain("cxx", Path("/usr/bin/c++"), "12.2.0"),
                          hipcc=tc.Toolchain("hipcc", Path("/opt/rocm/bin/hipcc"), "7.0.1"))
    envs = {"2.14": _env("2.14", "2.14.1+rocm7.0", None, hip="7.0.25314")}
    kernel = load_kernel(project.root / "demo", project)
    plan = {p.name: p for p in plan_variants(project, kernel, LINUX_X86, found,
                                             torch_envs=envs.get)}
    assert plan["torch214-cxx11-rocm70-x86_64-linux"].buildable


def test_gpu_stable_abi_builds_with_the_newest_torch_cpu_with_the_minimum(
    project: Project,
) -> None:
    assert build_env_minor(project, parse_variant("torch-stable-abi213-cu130-x86_64-linux")) \
        == "2.14"
    assert build_env_minor(project, parse_variant("torch-stable-abi213-cpu-x86_64-linux")) \
        == "2.13"
    assert build_env_minor(project, parse_variant("torch213-cxx11-cu130-x86_64-linux")) \
        == "2.13"
