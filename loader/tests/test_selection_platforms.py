"""Variant selection per platform, on synthetic system descriptions.

CUDA (toolkit major/minor rules, device capability against the build's compiled archs),
ROCm (which torch reports as cuda: the system says rocm), Apple MPS (macOS minimum) and
Intel XPU (toolkit versions). SystemInfo is plain data, so every platform is described
here without its hardware; the loading tests swap ``detect_system`` for such a value.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from kernelhub import api
from kernelhub.errors import NoCompatibleVariantError
from kernelhub.formats.metadata import read_metadata, write_metadata
from kernelhub.load import resolve
from kernelhub.selection import (
    METAL_MIN_MACOS,
    arch_rank,
    check_archs,
    select_variant,
)
from kernelhub.system import SystemInfo
from kernelhub_builder.ship import LocalPublisher
from kh_doubles import make_variant

CU130 = "torch214-cxx11-cu130-x86_64-linux"
CU132 = "torch214-cxx11-cu132-x86_64-linux"
CU128 = "torch214-cxx11-cu128-x86_64-linux"
STABLE_CU130 = "torch-stable-abi213-cu130-x86_64-linux"
ROCM70 = "torch214-cxx11-rocm70-x86_64-linux"
ROCM64 = "torch214-cxx11-rocm64-x86_64-linux"
XPU20252 = "torch214-cxx11-xpu20252-x86_64-linux"
XPU20251 = "torch214-cxx11-xpu20251-x86_64-linux"
METAL = "torch214-metal-aarch64-darwin"
CPU = "torch214-cxx11-cpu-x86_64-linux"


def cuda_system(cuda: tuple[int, int] = (13, 0),
                capability: tuple[int, int] | None = (9, 0)) -> SystemInfo:
    return SystemInfo(torch=(2, 14), os="linux", arch="x86_64", backend="cuda", cuda=cuda,
                      capability=capability)


# ------------------------------------------------------------------ CUDA toolkit


def test_cuda_variant_needs_the_same_major_and_no_newer_minor() -> None:
    names = [CU128, CU130, CU132]
    on_131 = select_variant(names, cuda_system(cuda=(13, 1)))
    assert on_131.chosen == CU130
    assert "needs a 13.x build" in on_131.rejected[CU128]
    assert "newer than runtime CUDA 13.1" in on_131.rejected[CU132]
    assert select_variant(names, cuda_system(cuda=(13, 2))).ranked == [CU132, CU130]
    assert select_variant(names, cuda_system(cuda=(12, 9))).chosen == CU128


# ------------------------------------------------------------------ CUDA archs


@pytest.mark.parametrize(
    ("archs", "capability", "rank"),
    [
        (["8.0", "9.0+PTX"], (9, 0), 0),  # exact SASS
        (["8.0", "9.0+PTX"], (8, 6), 1),  # 8.0 SASS runs on 8.6 (same major, newer minor)
        (["8.0", "9.0+PTX"], (12, 0), 2),  # only by JIT from 9.0 PTX
        (["8.0", "9.0+PTX"], (7, 5), None),  # older than everything compiled
        (["8.0", "9.0"], (10, 0), None),  # SASS never crosses a major, no PTX
        (["9.0a"], (9, 0), 0),
        (["9.0a"], (9, 1), None),  # arch-specific SASS runs only on exactly 9.0
        (["10.0f"], (10, 3), 1),  # family-specific: the 10.x family
        (["12.0+PTX"], (9, 0), None),  # PTX never runs on an older device
        ([], (9, 0), 3),  # nothing recorded (pure Python): unknown, not refused
    ],
)
def test_arch_rank(archs: list[str], capability: tuple[int, int], rank: int | None) -> None:
    assert arch_rank(archs, capability) == rank


def test_build_without_code_for_the_device_is_rejected_with_both_sides_named() -> None:
    selection = select_variant([CU130], cuda_system(capability=(7, 5)), {CU130: ["8.0", "9.0"]})
    assert selection.chosen is None
    reason = selection.rejected[CU130]
    assert "capability 7.5" in reason and "8.0, 9.0" in reason


def test_build_with_native_code_is_preferred_over_a_newer_toolkit_with_ptx_only() -> None:
    archs = {CU132: ["8.0+PTX"], CU130: ["8.0", "9.0"]}
    selection = select_variant([CU130, CU132], cuda_system(cuda=(13, 2)), archs)
    assert selection.ranked == [CU130, CU132]
    # Without archs the newest compatible toolkit wins, as before.
    assert select_variant([CU130, CU132], cuda_system(cuda=(13, 2))).chosen == CU132


def test_tier_still_comes_first_so_a_stable_abi_build_is_chosen_only_when_needed() -> None:
    archs = {CU130: ["9.0"], STABLE_CU130: ["8.0", "8.6"]}
    on_90 = select_variant([CU130, STABLE_CU130], cuda_system(capability=(9, 0)), archs)
    assert on_90.chosen == CU130
    on_86 = select_variant([CU130, STABLE_CU130], cuda_system(capability=(8, 6)), archs)
    assert on_86.chosen == STABLE_CU130 and CU130 in on_86.rejected


def test_without_a_device_capability_archs_are_not_held_against_a_build() -> None:
    system = cuda_system(capability=None)
    assert select_variant([CU130], system, {CU130: ["12.0"]}).chosen == CU130
    check_archs(CU130, ["12.0"], system)  # nothing to compare against: no error


def test_check_archs_says_what_the_device_has_and_what_to_do() -> None:
    with pytest.raises(NoCompatibleVariantError) as info:
        check_archs(CU130, ["8.0", "9.0"], cuda_system(capability=(12, 0)))
    message = str(info.value)
    assert CU130 in message and "capability 12.0" in message and "8.0, 9.0" in message
    assert "newer version" in message
    check_archs(CU130, ["8.0", "9.0+PTX"], cuda_system(capability=(12, 0)))


# ------------------------------------------------------------------ ROCm, XPU, Metal


def test_rocm_system_loads_rocm_builds_of_its_version_never_cuda_ones() -> None:
    # torch on ROCm answers torch.cuda.is_available(); detect_system turns that into
    # backend "rocm" with the HIP version (test_system.py), which selection then uses.
    rocm = SystemInfo(torch=(2, 14), os="linux", arch="x86_64", backend="rocm", rocm=(7, 0))
    selection = select_variant([CU130, ROCM70, ROCM64, CPU], rocm)
    assert selection.chosen == ROCM70
    assert "for cuda" in selection.rejected[CU130]
    assert "ROCm 6.4 build, runtime ROCm 7.0 needs an exact match" in selection.rejected[ROCM64]


def test_xpu_system_needs_the_same_oneapi_release() -> None:
    xpu = SystemInfo(torch=(2, 14), os="linux", arch="x86_64", backend="xpu", xpu=(2025, 2))
    selection = select_variant([XPU20251, XPU20252, CU130], xpu)
    assert selection.chosen == XPU20252
    assert "XPU 2025.1 build" in selection.rejected[XPU20251]
    older = SystemInfo(torch=(2, 14), os="linux", arch="x86_64", backend="xpu", xpu=(2025, 1))
    assert select_variant([XPU20252], older).chosen is None


@pytest.mark.parametrize(("macos", "loads"), [((15, 3), True), ((14, 0), True),
                                              ((13, 6), False)])
def test_metal_builds_need_a_recent_macos(macos: tuple[int, int], loads: bool) -> None:
    mac = SystemInfo(torch=(2, 14), os="darwin", arch="aarch64", backend="metal", macos=macos)
    selection = select_variant([METAL, "torch-universal"], mac)
    assert (selection.chosen == METAL) is loads
    if not loads:
        assert selection.chosen == "torch-universal"
        assert f"macOS {METAL_MIN_MACOS[0]}.{METAL_MIN_MACOS[1]} or newer" in (
            selection.rejected[METAL])


# ------------------------------------------------------------------ loading


def _cuda_variant(dest: Path, archs: list[str]) -> Path:
    make_variant(dest, name="gpukern", backend="cuda")
    metadata = read_metadata(dest)
    metadata.backend.archs = archs
    write_metadata(dest, metadata)  # metadata.json is not part of the digests
    return dest


def test_get_kernel_refuses_a_build_without_code_for_the_gpu(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hub = LocalPublisher(tmp_path / "hub")
    staged = _cuda_variant(tmp_path / "staged" / CU130, ["8.0", "9.0"])
    hub.publish("someorg/gpukern", "v1", {CU130: staged}, tag="v1.0.0", message="release")
    monkeypatch.setattr(resolve, "detect_system", lambda backend=None: cuda_system(capability=(7, 5)))
    with pytest.raises(NoCompatibleVariantError, match=r"8\.0, 9\.0; this GPU has capability 7\.5"):
        api.get_kernel("someorg/gpukern", 1, hub=hub, trust_remote_code=True)
    monkeypatch.setattr(resolve, "detect_system", lambda backend=None: cuda_system(capability=(8, 9)))
    module = api.get_kernel("someorg/gpukern", 1, hub=hub, trust_remote_code=True)
    assert module.VALUE == 42


def test_local_builds_are_chosen_by_their_archs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    build = tmp_path / "build"
    _cuda_variant(build / CU130, ["9.0"])
    _cuda_variant(build / STABLE_CU130, ["8.0", "8.6"])
    monkeypatch.setattr(api, "detect_system", lambda backend=None: cuda_system(capability=(8, 6)))
    assert api.find_local_variant(build) == (build / STABLE_CU130).resolve()
    monkeypatch.setattr(api, "detect_system", lambda backend=None: cuda_system(capability=(7, 5)))
    with pytest.raises(NoCompatibleVariantError, match=r"capability 7\.5"):
        api.find_local_variant(build)
