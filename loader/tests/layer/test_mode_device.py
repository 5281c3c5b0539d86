"""Modes, their fallback order, devices and capability ranges."""

from __future__ import annotations

import pytest
import torch
from kernelhub.layer import CUDAProperties, Device, Mode, ROCMProperties, runtime_device
from kernelhub.layer.mapping import (
    MODE_FALLBACK_ORDER,
    check_mapping_mode,
    describe_mode,
    order_device_entries,
)
from kernelhub.system import RuntimeDevice
from torch import nn

INF, T, C, F = Mode.INFERENCE, Mode.TRAINING, Mode.TORCH_COMPILE, Mode.FALLBACK


def test_fallback_order_tries_own_mode_then_stronger_modes_then_fallback() -> None:
    assert MODE_FALLBACK_ORDER[INF] == (INF, INF | C, T, T | C, F)
    assert MODE_FALLBACK_ORDER[INF | C] == (INF | C, T | C, F)
    assert MODE_FALLBACK_ORDER[T] == (T, T | C, F)
    assert MODE_FALLBACK_ORDER[T | C] == (T | C, F)
    for order in MODE_FALLBACK_ORDER.values():
        assert order[-1] is F


def test_describe_mode_is_stable() -> None:
    assert describe_mode(T | C) == "TRAINING|TORCH_COMPILE"
    assert repr(C | INF) == "Mode.INFERENCE|TORCH_COMPILE"


@pytest.mark.parametrize("bad", [C, INF | T, F | INF])
def test_mapping_modes_that_kernelize_never_looks_up_are_refused(bad: Mode) -> None:
    with pytest.raises(ValueError, match="is not a mapping mode"):
        check_mapping_mode(bad, "m")


def test_mapping_mode_must_be_a_mode() -> None:
    with pytest.raises(TypeError, match="Mode values"):
        check_mapping_mode("inference", "m")


def test_device_types_are_validated_and_metal_means_mps() -> None:
    assert Device("metal").type == "mps"
    assert Device("CUDA") == Device("cuda")
    with pytest.raises(ValueError, match=r"unknown device type 'ipu'.*cuda, rocm"):
        Device("ipu")


def test_properties_must_fit_the_device_type() -> None:
    Device("cuda", CUDAProperties(80, 90))
    Device("rocm", ROCMProperties(90, 94))
    with pytest.raises(TypeError, match="cannot take ROCMProperties"):
        Device("cuda", ROCMProperties(90, 94))
    with pytest.raises(TypeError, match="cannot take CUDAProperties"):
        Device("cpu", CUDAProperties(80, 90))


def test_capability_ranges_are_checked() -> None:
    with pytest.raises(ValueError, match="min_capability 90 is above max_capability 80"):
        CUDAProperties(90, 80)
    with pytest.raises(TypeError, match=r"non-negative int \(major \* 10 \+ minor"):
        CUDAProperties(8.0, 9)  # type: ignore[arg-type]


def test_narrowest_range_wins_and_generic_entry_comes_last() -> None:
    wide = Device("cuda", CUDAProperties(70, 120))
    narrow = Device("cuda", CUDAProperties(80, 89))
    other = Device("cuda", CUDAProperties(90, 90))
    generic = Device("cuda")
    assert order_device_entries([generic, wide, narrow, other], 86) == [narrow, wide, generic]
    assert order_device_entries([generic, wide, other], 90) == [other, wide, generic]
    assert order_device_entries([wide, narrow], 60) == []
    assert order_device_entries([wide, generic], None) == [generic], "unknown capability"


def test_equal_width_ties_break_by_range_not_by_object_identity() -> None:
    older = Device("cuda", CUDAProperties(75, 85))
    newer = Device("cuda", CUDAProperties(80, 90))
    for entries in ([older, newer], [newer, older]):
        assert order_device_entries(entries, 80)[0] == newer
        # Fresh, equal objects give the same answer: nothing depends on id().
        copies = [Device("cuda", CUDAProperties(d.properties.min_capability,
                                                d.properties.max_capability)) for d in entries]
        assert order_device_entries(copies, 82)[0] == newer


def test_runtime_device_follows_the_model_parameters_and_explicit_devices() -> None:
    assert runtime_device(nn.Linear(2, 2)) == RuntimeDevice("cpu")
    assert runtime_device(nn.ReLU()) == RuntimeDevice("cpu"), "no parameters: cpu"
    assert runtime_device(nn.Linear(2, 2), "cpu").type == "cpu"
    assert runtime_device(nn.Linear(2, 2), torch.device("mps")).type == "mps"
    with pytest.raises(ValueError, match="not a device torch knows"):
        runtime_device(nn.Linear(2, 2), "gpu0")


def test_rocm_routing_with_simulated_hip_runtime(monkeypatch: pytest.MonkeyPatch) -> None:
    """Routing logic only: torch.version.hip is set as a ROCm build of torch sets it.

    No GPU is used or pretended to run anything; the GPU tests are elsewhere.
    """
    monkeypatch.setattr(torch.version, "hip", "6.4.0", raising=False)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda index=None: (9, 4))
    assert runtime_device(nn.Linear(2, 2), "cuda") == RuntimeDevice("rocm", 94, None)
    assert runtime_device(nn.Linear(2, 2), "cuda:1") == RuntimeDevice("rocm", 94, 1)
    monkeypatch.setattr(torch.version, "hip", None, raising=False)
    assert runtime_device(nn.Linear(2, 2), "cuda").type == "cuda"


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
@pytest.mark.cuda
def test_runtime_capability_on_a_real_gpu() -> None:
    major, minor = torch.cuda.get_device_capability()
    device = runtime_device(nn.Linear(2, 2).cuda())
    assert device.capability == major * 10 + minor
    assert device.type == ("rocm" if torch.version.hip else "cuda")
