"""Our schema is the ecosystem's, and our build.toml files are valid for it.

The key sets below are facts carried from the ecosystem's own parsers — kernels 0.19.1's
``Build.open`` (edition 6; it names the allowed keys of a table when it refuses one) and
kernels-data's ``config/v5.rs`` (edition 5) — written out here, independently of the
model, so the two can be compared: the keys the model declares (:mod:`.keys`) must be
exactly them for edition 6, and them plus kernelhub's own older keys for edition 5. Every
edition-6 table denies unknown keys and needs ``depends`` and ``src`` in every cpp part;
``general.release`` is not among the keys, so our releases live in kernels.toml's
``[releases]``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import tomllib
from kernelhub_builder.manifest import KernelManifest, ManifestError, load_kernel, load_project
from kernelhub_builder.manifest.keys import table_keys
from kernelhub_builder.manifest.model import CPP_KINDS, RUST_KINDS, KernelPart

REPO = Path(__file__).resolve().parents[3]

GENERAL_6 = {"name", "version", "edition", "license", "upstream", "source", "backends",
             "build-layout", "cuda", "hub", "kernel-depends", "neuron", "python-depends",
             "tpu", "xpu"}
GENERAL_5 = GENERAL_6 - {"build-layout"}
KERNELHUB_GENERAL_5 = {"release", "universal", "cuda-minver", "cuda-maxver"}
"""kernelhub's own older keys, read before edition 6 (migrate moves or refuses them)."""
SUBTABLES = {"hub": {"repo-id", "branch"},
             "cuda": {"minver", "maxver", "kernel-depends", "python-depends"},
             "xpu": {"kernel-depends", "python-depends"},
             "neuron": {"kernel-depends", "python-depends"},
             "tpu": {"python-depends"}}
FRAMEWORKS_6 = {"torch": {"include", "minver", "maxver", "pyext", "src", "stable-abi", "cxx-flags"},
                "torch-noarch": {"pyext", "cuda_capabilities", "rocm_archs"},
                "tvm-ffi": {"include", "pyext", "src", "cxx-flags"},
                "mlx-noarch": {"pyext"}}
_CPP = {"cxx-flags", "depends", "include", "src"}
PARTS_6 = {"cpp-cpu": _CPP, "cpp-metal": _CPP,
           "cpp-cuda": _CPP | {"cuda-capabilities", "cuda-flags", "cuda-minver"},
           "cpp-rocm": _CPP | {"rocm-archs", "hip-flags"},
           "cpp-xpu": _CPP | {"sycl-flags"},
           "rust-cpu": {"cargo-manifest", "src"},
           "rust-cuda-oxide": {"cargo-manifest", "cuda-capabilities", "src"},
           "rust-cutile": {"cargo-manifest", "src", "tileiras-minver"}}


def keys(table: str, edition: int | None, model: type = KernelManifest,
         kind: str | None = None) -> set[str]:
    return set(table_keys(model, table, edition, kind))


def test_edition_6_top_level_and_general_are_the_ecosystems() -> None:
    assert keys("", 6) == {"general", "kernel", *FRAMEWORKS_6}
    assert keys("general", 6) == GENERAL_6


def test_edition_5_is_the_ecosystems_plus_kernelhubs_older_keys() -> None:
    assert keys("", 5) == {"general", "kernel", "torch", "torch-noarch", "tvm-ffi"}
    assert keys("general", 5) == GENERAL_5 | KERNELHUB_GENERAL_5


@pytest.mark.parametrize("edition", [5, 6])
@pytest.mark.parametrize("table", sorted(SUBTABLES))
def test_general_subtables(table: str, edition: int) -> None:
    assert keys(f"general.{table}", edition) == SUBTABLES[table]


@pytest.mark.parametrize("framework", sorted(FRAMEWORKS_6))
def test_edition_6_frameworks(framework: str) -> None:
    assert keys(framework, 6) == FRAMEWORKS_6[framework]


def test_edition_5_spells_noarch_archs_both_ways_and_torch_universal() -> None:
    """kernelhub read ``cuda-capabilities`` before the ecosystem's underscore spelling."""
    assert keys("torch-noarch", 5) == {"pyext", "cuda_capabilities", "rocm_archs",
                                       "cuda-capabilities", "rocm-archs"}
    assert keys("torch", 5) == FRAMEWORKS_6["torch"] | {"universal"}


@pytest.mark.parametrize("kind", sorted(PARTS_6))
def test_edition_6_part_kinds(kind: str) -> None:
    assert keys("", 6, KernelPart, kind) == PARTS_6[kind] | {"language"}


@pytest.mark.parametrize("kind", sorted(CPP_KINDS))
def test_edition_5_parts_name_their_backend(kind: str) -> None:
    """Edition 5 tags a part with ``backend``; ``cuda-maxver`` is kernelhub's own."""
    own = {"cuda-maxver"} if kind == "cpp-cuda" else set()
    assert keys("", 5, KernelPart, kind) == PARTS_6[kind] | {"backend"} | own


def test_the_oldest_part_shape() -> None:
    assert keys("", None, KernelPart, "v1") == {"backend", "language", "src", "depends",
                                                "include", "cuda-capabilities", "rocm-archs"}


def test_rust_and_cpp_kinds_are_the_ecosystems() -> None:
    assert set(PARTS_6) == CPP_KINDS | RUST_KINDS


def edition6_problems(data: dict[str, Any]) -> list[str]:
    """What the ecosystem's edition-6 parser would refuse in ``data``, by the facts."""
    problems = [f"unknown table [{k}]" for k in data if k not in {"general", "kernel", *FRAMEWORKS_6}]
    general = data.get("general", {})
    problems += [f"general.{k}" for k in general if k not in GENERAL_6]
    if general.get("edition") != 6:
        problems.append("general.edition must be 6")
    for table, allowed in SUBTABLES.items():
        problems += [f"general.{table}.{k}" for k in general.get(table, {}) if k not in allowed]
    for framework, allowed in FRAMEWORKS_6.items():
        problems += [f"{framework}.{k}" for k in data.get(framework, {}) if k not in allowed]
    for name, part in data.get("kernel", {}).items():
        allowed = PARTS_6.get(part.get("language"), set()) | {"language"}
        problems += [f"kernel.{name}.{k}" for k in part if k not in allowed]
        if part.get("language") in CPP_KINDS:
            problems += [f"kernel.{name} lacks {k}" for k in ("depends", "src") if k not in part]
    return problems


@pytest.mark.parametrize("tree", sorted(p.parent.name for p in REPO.glob("kernels-src/*/build.toml")))
def test_our_build_toml_is_valid_edition_6(tree: str) -> None:
    data = tomllib.loads((REPO / "kernels-src" / tree / "build.toml").read_text())
    assert edition6_problems(data) == []


def test_schema_check_catches_what_the_ecosystem_refuses() -> None:
    assert edition6_problems({"general": {"name": "x", "release": "1.0.0", "edition": 5},
                              "kernel": {"a": {"backend": "cpu", "language": "cpp-cpu"}}}) == [
        "general.release", "general.edition must be 6", "kernel.a.backend",
        "kernel.a lacks depends", "kernel.a lacks src"]


def test_release_comes_from_kernels_toml() -> None:
    project = load_project(REPO)
    manifest = load_kernel(project.kernel_dir("activation"), project)
    assert manifest.release == project.releases["activation"]


def test_release_in_kernels_toml_must_be_semver(tmp_path: Path) -> None:
    (tmp_path / "kernels.toml").write_text('kernels = []\n[releases]\nx = "one"\n')
    with pytest.raises(ManifestError, match="releases"):
        load_project(tmp_path)
