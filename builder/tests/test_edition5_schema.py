"""Our build.toml files are valid for the ecosystem's edition-5 schema.

That schema (kernels-data, ``config/v5.rs``) denies unknown keys in every table, needs
``general.edition = 5``, and needs ``depends`` and ``src`` in every ``[kernel.*]`` part.
The key sets below are facts carried from it; ``general.release`` is not among them, so
our releases live in kernels.toml's ``[releases]``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import tomllib
from kernelhub_builder.manifest import ManifestError, load_kernel, load_project

REPO = Path(__file__).resolve().parents[2]

GENERAL = {"name", "version", "edition", "license", "upstream", "source", "backends", "cuda",
           "hub", "kernel-depends", "neuron", "python-depends", "tpu", "xpu"}
GENERAL_TABLES = {"hub": {"repo-id", "branch"},
                  "cuda": {"minver", "maxver", "kernel-depends", "python-depends"},
                  "xpu": {"kernel-depends", "python-depends"},
                  "neuron": {"kernel-depends", "python-depends"},
                  "tpu": {"python-depends"}}
FRAMEWORKS = {"torch": {"include", "minver", "maxver", "pyext", "src", "stable-abi", "cxx-flags"},
              "torch-noarch": {"pyext", "cuda_capabilities", "rocm_archs"},
              "tvm-ffi": {"include", "pyext", "src", "cxx-flags"}}
_PART = {"backend", "cxx-flags", "depends", "include", "src"}
PARTS = {"cpu": _PART, "metal": _PART,
         "cuda": _PART | {"cuda-capabilities", "cuda-flags", "cuda-minver"},
         "rocm": _PART | {"rocm-archs", "hip-flags"},
         "xpu": _PART | {"sycl-flags"}}


def edition5_problems(data: dict) -> list[str]:
    problems = [f"unknown table [{k}]" for k in data
                if k not in {"general", "kernel"} | set(FRAMEWORKS)]
    general = data.get("general", {})
    problems += [f"general.{k}" for k in general if k not in GENERAL]
    if general.get("edition") != 5:
        problems.append("general.edition must be 5")
    for table, keys in GENERAL_TABLES.items():
        problems += [f"general.{table}.{k}" for k in general.get(table, {}) if k not in keys]
    for framework, keys in FRAMEWORKS.items():
        problems += [f"{framework}.{k}" for k in data.get(framework, {}) if k not in keys]
    for name, part in data.get("kernel", {}).items():
        allowed = PARTS.get(part.get("backend"), set())
        problems += [f"kernel.{name}.{k}" for k in part if k not in allowed]
        problems += [f"kernel.{name} lacks {k}" for k in ("depends", "src") if k not in part]
    return problems


@pytest.mark.parametrize("tree", sorted(p.parent.name for p in REPO.glob("kernels-src/*/build.toml")))
def test_our_build_toml_is_valid_edition_5(tree):
    data = tomllib.loads((REPO / "kernels-src" / tree / "build.toml").read_text())
    assert edition5_problems(data) == []


def test_release_comes_from_kernels_toml():
    project = load_project(REPO)
    manifest = load_kernel(project.kernel_dir("activation"), project)
    assert manifest.release == project.releases["activation"]


def test_schema_check_catches_what_the_ecosystem_refuses():
    assert edition5_problems({"general": {"name": "x", "release": "1.0.0"}}) == [
        "general.release", "general.edition must be 5"]


def test_release_in_kernels_toml_must_be_semver(tmp_path):
    (tmp_path / "kernels.toml").write_text('kernels = []\n[releases]\nx = "one"\n')
    with pytest.raises(ManifestError, match="releases"):
        load_project(tmp_path)
