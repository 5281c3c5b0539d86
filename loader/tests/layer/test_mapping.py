"""Kernel mappings: normalisation, merging, scoping and the errors users see."""

from __future__ import annotations

import threading

import pytest
from kernelhub.layer import (
    CUDAProperties,
    Device,
    FuncRepository,
    LayerRepository,
    Mode,
    get_kernel_mapping,
    normalize_mapping,
    register_kernel_mapping,
    use_kernel_mapping,
)

A = LayerRepository("kernels-community/activation", layer_name="SiluAndMul", version=1)
B = LayerRepository("kernels-community/activation", layer_name="SiluAndMul", revision="v1.2.0")
F = FuncRepository("kernels-community/activation", func_name="silu_and_mul", version=1)


def test_loose_values_become_device_and_mode_dicts() -> None:
    ranged = Device("cuda", CUDAProperties(90, 90))
    mapping = normalize_mapping({"SiluAndMul": {
        "cuda": A, ranged: {Mode.TRAINING: B, Mode.INFERENCE | Mode.TORCH_COMPILE: F},
        "metal": A,
    }})
    assert mapping == {"SiluAndMul": {
        "cuda": {Device("cuda"): {Mode.FALLBACK: A},
                 ranged: {Mode.TRAINING: B, Mode.INFERENCE | Mode.TORCH_COMPILE: F}},
        "mps": {Device("mps"): {Mode.FALLBACK: A}},
    }}


@pytest.mark.parametrize("mapping,error,message", [
    ({"X": {"ipu": A}}, ValueError, r"mapping\['X'\]\['ipu'\]: unknown device type 'ipu'"),
    ({"X": {"cuda": "org/repo:Layer"}}, TypeError, r"expected a repository .* got str"),
    ({"X": {"cuda": {Mode.FALLBACK | Mode.TRAINING: A}}}, ValueError, "not a mapping mode"),
    ({"X": ["cuda"]}, TypeError, r"mapping\['X'\] must be a dict of device"),
    ({1: {"cuda": A}}, TypeError, "layer names"),
    ({"X": {3: A}}, TypeError, "device keys must be a str or a Device"),
])
def test_bad_mappings_fail_at_registration(mapping: dict, error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        register_kernel_mapping(mapping)
    assert get_kernel_mapping() == {}


def test_repositories_validate_their_arguments() -> None:
    with pytest.raises(ValueError, match="layer_name is required"):
        LayerRepository("kernels-community/activation")
    with pytest.raises(ValueError, match="'org/name'"):
        LayerRepository("activation", layer_name="X")
    with pytest.raises(Exception, match=r"version|revision"):
        LayerRepository("kernels-community/activation", layer_name="X", version=1,
                        revision="main")


def test_register_merges_per_layer_and_device_and_can_replace_everything() -> None:
    register_kernel_mapping({"SiluAndMul": {"cuda": A, "rocm": A}, "RMSNorm": {"cuda": A}})
    register_kernel_mapping({"SiluAndMul": {"cuda": B}})
    current = get_kernel_mapping()
    assert current["SiluAndMul"]["cuda"] == {Device("cuda"): {Mode.FALLBACK: B}}
    assert current["SiluAndMul"]["rocm"] == {Device("rocm"): {Mode.FALLBACK: A}}
    assert "RMSNorm" in current
    register_kernel_mapping({"RMSNorm": {"cpu": F}}, inherit_mapping=False)
    assert get_kernel_mapping() == {"RMSNorm": {"cpu": {Device("cpu"): {Mode.FALLBACK: F}}}}


def test_none_disables_an_inherited_layer() -> None:
    register_kernel_mapping({"SiluAndMul": {"cuda": A}, "RMSNorm": {"cuda": A}})
    with use_kernel_mapping({"SiluAndMul": None}):
        assert get_kernel_mapping()["SiluAndMul"] == {}
        assert get_kernel_mapping()["RMSNorm"]
    assert get_kernel_mapping()["SiluAndMul"]


def test_use_kernel_mapping_is_scoped_and_restored_on_error() -> None:
    register_kernel_mapping({"SiluAndMul": {"cuda": A}})
    with pytest.raises(RuntimeError), use_kernel_mapping({"RMSNorm": {"cpu": F}},
                                                         inherit_mapping=False):
        assert set(get_kernel_mapping()) == {"RMSNorm"}
        raise RuntimeError
    assert set(get_kernel_mapping()) == {"SiluAndMul"}


def test_get_kernel_mapping_returns_a_copy() -> None:
    register_kernel_mapping({"SiluAndMul": {"cuda": A}})
    get_kernel_mapping()["SiluAndMul"]["cuda"].clear()
    assert get_kernel_mapping()["SiluAndMul"]["cuda"]


def test_a_mapping_used_in_one_thread_is_invisible_to_another() -> None:
    seen: list[dict] = []
    with use_kernel_mapping({"SiluAndMul": {"cuda": A}}):
        thread = threading.Thread(target=lambda: seen.append(get_kernel_mapping()))
        thread.start()
        thread.join()
    assert seen == [{}]
