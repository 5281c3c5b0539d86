"""Variant names of both generations: parsed, written back, converted, refused with reasons.

The names in the tables are the ecosystem's (kernels 0.17 writes the legacy ones, 0.19
both); ``tests/test_variant_names_ecosystem.py`` checks the same parser against the
ecosystem's own parsers.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kernelhub.errors import VariantNameError
from kernelhub.formats.variants import (
    LEGACY_PYTHON,
    Compute,
    Naming,
    PythonTag,
    Variant,
    VariantKind,
    is_variant_name,
    parse_variant,
)
from kernelhub.system import ARCHES

LEGACY = {
    "torch213-cxx11-cpu-x86_64-linux": (VariantKind.COMPILED, (2, 13), Compute("cpu")),
    "torch214-cxx11-cu130-x86_64-linux": (VariantKind.COMPILED, (2, 14), Compute("cuda", (13, 0))),
    "torch215-cxx11-cpu-x86_64-linux": (VariantKind.COMPILED, (2, 15), Compute("cpu")),
    "torch215-cxx11-cu132-x86_64-linux": (VariantKind.COMPILED, (2, 15), Compute("cuda", (13, 2))),
    "torch213-cxx11-rocm70-x86_64-linux": (VariantKind.COMPILED, (2, 13), Compute("rocm", (7, 0))),
    "torch213-cxx11-rocm714-x86_64-linux": (VariantKind.COMPILED, (2, 13),
                                            Compute("rocm", (7, 14))),
    "torch213-cxx11-xpu20252-x86_64-linux": (VariantKind.COMPILED, (2, 13),
                                             Compute("xpu", (2025, 2))),
    "torch213-cxx11-cann81-aarch64-linux": (VariantKind.COMPILED, (2, 13), Compute("cann", (8, 1))),
    "torch213-cxx11-neuron-x86_64-linux": (VariantKind.COMPILED, (2, 13), Compute("neuron")),
    "torch213-cxx11-tpu-x86_64-linux": (VariantKind.COMPILED, (2, 13), Compute("tpu")),
    "torch213-metal-aarch64-darwin": (VariantKind.COMPILED, (2, 13), Compute("metal")),
    "torch29-cxx98-cu126-x86_64-linux": (VariantKind.COMPILED, (2, 9), Compute("cuda", (12, 6))),
    "torch-stable-abi213-cpu-x86_64-linux": (VariantKind.STABLE_ABI, (2, 13), Compute("cpu")),
    "tvm-ffi01-cu128-x86_64-linux": (VariantKind.TVM_FFI, (0, 1), Compute("cuda", (12, 8))),
}

CURRENT = {
    "torch-2.15-cpu-cpython-3.9-abi3-x86_64-linux":
        (VariantKind.COMPILED, (2, 15), Compute("cpu"), PythonTag((3, 9))),
    "torch-2.13-cuda-13.0-cpython-3.12-abi3-x86_64-linux":
        (VariantKind.COMPILED, (2, 13), Compute("cuda", (13, 0)), PythonTag((3, 12))),
    "torch-stable-abi-2.13-cpu-cpython-3.10-abi3-x86_64-linux":
        (VariantKind.STABLE_ABI, (2, 13), Compute("cpu"), PythonTag((3, 10))),
    "torch-2.13-cpu-cpython-3.15-abi3t-aarch64-linux":
        (VariantKind.COMPILED, (2, 13), Compute("cpu"), PythonTag((3, 15), "abi3t")),
    "torch-2.13-metal-cpython-3.12-abi3-aarch64-darwin":
        (VariantKind.COMPILED, (2, 13), Compute("metal"), PythonTag((3, 12))),
    "torch-2.13-rocm-7.14-cpython-3.10-abi3-x86_64-linux":
        (VariantKind.COMPILED, (2, 13), Compute("rocm", (7, 14)), PythonTag((3, 10))),
    "torch-2.13-xpu-2025.2-cpython-3.10-abi3-x86_64-linux":
        (VariantKind.COMPILED, (2, 13), Compute("xpu", (2025, 2)), PythonTag((3, 10))),
    "torch-2.13-cann-8.1-cpython-3.10-abi3-aarch64-linux":
        (VariantKind.COMPILED, (2, 13), Compute("cann", (8, 1)), PythonTag((3, 10))),
    "torch-2.13-cxx11-cpu-cpython-3.10-abi3-x86_64-linux":
        (VariantKind.COMPILED, (2, 13), Compute("cpu"), PythonTag((3, 10))),
    "tvm-ffi-0.1-cuda-12.8-cpython-3.12-abi3-x86_64-linux":
        (VariantKind.TVM_FFI, (0, 1), Compute("cuda", (12, 8)), PythonTag((3, 12))),
    "torch-2.13-cuda-13.0-cpython-3.12-abi3-x86_64-windows":
        (VariantKind.COMPILED, (2, 13), Compute("cuda", (13, 0)), PythonTag((3, 12))),
}

PURE = {
    "torch-universal": (VariantKind.UNIVERSAL, None),
    "torch-cpu": (VariantKind.NOARCH, "cpu"),
    "torch-cuda": (VariantKind.NOARCH, "cuda"),
    "torch-xpu": (VariantKind.NOARCH, "xpu"),
    "torch-npu": (VariantKind.NOARCH, "cann"),
    "torch-cann": (VariantKind.NOARCH, "cann"),
    "torch-neuron": (VariantKind.NOARCH, "neuron"),
    "mlx-metal": (VariantKind.MLX, "metal"),
    "sdk": (VariantKind.SDK, None),
    "sdk-cuda": (VariantKind.SDK, "cuda"),
    "sdk-cpython-3.12-abi3-x86_64-linux": (VariantKind.SDK, None),
    "sdk-cuda-12.8-cpython-3.12-abi3-x86_64-linux": (VariantKind.SDK, "cuda"),
}


@pytest.mark.parametrize("name", sorted(LEGACY))
def test_legacy_names_parse_and_round_trip(name: str) -> None:
    kind, torch, compute = LEGACY[name]
    v = parse_variant(name)
    assert (v.kind, v.torch, v.compute, v.naming) == (kind, torch, compute, Naming.LEGACY)
    assert v.python == LEGACY_PYTHON  # a legacy name always means cpython-3.9-abi3
    assert v.name == name and str(v) == name and v.compiled


@pytest.mark.parametrize("name", sorted(CURRENT))
def test_current_names_parse_and_round_trip(name: str) -> None:
    kind, torch, compute, python = CURRENT[name]
    v = parse_variant(name)
    assert (v.kind, v.torch, v.compute, v.python, v.naming) == (
        kind, torch, compute, python, Naming.CURRENT)
    assert v.name == name and v.compiled


@pytest.mark.parametrize("name", sorted(PURE))
def test_pure_python_and_sdk_names(name: str) -> None:
    kind, backend = PURE[name]
    v = parse_variant(name)
    assert (v.kind, v.backend) == (kind, backend)
    assert v.name == name
    assert v.compiled == ("cpython" in name)


def test_the_ecosystems_cxx_abi_tag_is_kept_as_written() -> None:
    assert parse_variant("torch213-cxx11-cpu-x86_64-linux").cxx_abi == "cxx11"
    assert parse_variant("torch29-cxx98-cu126-x86_64-linux").cxx_abi == "cxx98"
    # Untagged legacy Linux names parse (the ecosystem's parser allows them) and stay so.
    assert parse_variant("torch213-cpu-x86_64-linux").cxx_abi is None
    assert parse_variant("torch-2.13-cpu-cpython-3.10-abi3-x86_64-linux").cxx_abi is None
    # What the builder constructs without saying gets each generation's own default.
    built = Variant(VariantKind.COMPILED, (2, 13), Compute("cpu"), "x86_64", "linux")
    assert built.name == "torch213-cxx11-cpu-x86_64-linux"
    current = Variant(VariantKind.COMPILED, (2, 13), Compute("cpu"), "x86_64", "linux",
                      PythonTag((3, 10)), Naming.CURRENT)
    assert current.name == "torch-2.13-cpu-cpython-3.10-abi3-x86_64-linux"


def test_one_build_under_both_generations_names() -> None:
    legacy = parse_variant("torch213-cxx11-cu130-x86_64-linux")
    current = legacy.with_naming(Naming.CURRENT, PythonTag((3, 10)))
    assert current.name == "torch-2.13-cuda-13.0-cpython-3.10-abi3-x86_64-linux"
    assert current.with_naming(Naming.LEGACY) == legacy
    stable = parse_variant("torch-stable-abi-2.13-cpu-cpython-3.10-abi3-x86_64-linux")
    assert stable.with_naming(Naming.LEGACY).name == "torch-stable-abi213-cpu-x86_64-linux"
    assert parse_variant("torch-npu").with_naming(Naming.CURRENT).name == "torch-cann"
    assert parse_variant("torch-cuda").with_naming(Naming.CURRENT).name == "torch-cuda"


@pytest.mark.parametrize(("name", "why"), [
    ("torch-2.13-cuda-13.0-x86_64-linux", "names no Python ABI"),
    ("torch-2.13-cuda-130-cpython-3.12-abi3-x86_64-linux", "unknown compute 'cuda-130'"),
    ("torch213-cxx11-cuda-13.0-x86_64-linux", "expected one compute tag"),
    ("torch-02.13-cpu-cpython-3.12-abi3-x86_64-linux", "not in canonical form"),
    ("torch2013-cxx11-cpu-x86_64-linux", "bad version"),
    ("torch-2.13-cpu-cpython-3.12-abi3t-x86_64-linux", "abi3t needs CPython 3.15"),
    ("torch-2.13-cpu-cpython-3.12-abi4-x86_64-linux", "expected cpython-<major>.<minor>"),
    ("torch213-cxx11-metal-aarch64-darwin", "macOS names carry no C++ ABI tag"),
    ("torch213-cu130-x86_64-darwin", "cuda builds do not exist on macOS"),
    ("torch213-cxx11-cann81-x86_64-windows", "cann builds exist only on Linux"),
    ("torch213-cxx11-cpu-riscv64-linux", "does not end in a system"),
    ("mlx-cuda", "MLX variants exist only for metal"),
    ("torch-quantum", "unknown backend 'quantum'"),
    ("sdk-cuda-12.8", "expected sdk or sdk-<backend>"),
    ("README.md", "not a build-variant name"),
])
def test_refusals_say_which_part_is_wrong(name: str, why: str) -> None:
    with pytest.raises(VariantNameError, match=re.escape(why)):
        parse_variant(name)
    assert not is_variant_name(name)


computes = st.one_of(
    st.sampled_from([Compute("cpu"), Compute("neuron"), Compute("tpu")]),
    st.builds(Compute, st.sampled_from(["cuda", "rocm", "cann"]),
              st.tuples(st.integers(1, 20), st.integers(0, 9))),
    st.builds(Compute, st.just("xpu"), st.tuples(st.integers(2024, 2030), st.integers(0, 9))),
)
pythons = st.one_of(
    st.builds(PythonTag, st.tuples(st.just(3), st.integers(9, 14)), st.just("abi3")),
    st.builds(PythonTag, st.tuples(st.just(3), st.integers(15, 20)),
              st.sampled_from(["abi3", "abi3t"])),
)


@st.composite
def compiled_variants(draw: st.DrawFn) -> Variant:
    kind = draw(st.sampled_from([VariantKind.COMPILED, VariantKind.STABLE_ABI,
                                 VariantKind.TVM_FFI]))
    version = draw(st.tuples(st.integers(0, 9), st.integers(0, 30)))
    naming = draw(st.sampled_from(list(Naming)))
    return Variant(kind, version, draw(computes), draw(st.sampled_from(ARCHES)), "linux",
                   draw(pythons) if naming is Naming.CURRENT else None, naming)


@given(compiled_variants())
def test_every_variant_the_formatter_writes_parses_back_to_itself(variant: Variant) -> None:
    assert parse_variant(variant.name) == variant
    other = (Naming.CURRENT if variant.naming is Naming.LEGACY else Naming.LEGACY)
    assert parse_variant(variant.with_naming(other, variant.python).name).with_naming(
        variant.naming, variant.python) == variant
