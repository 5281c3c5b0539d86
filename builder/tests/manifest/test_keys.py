"""The schema is derived from the model: one declaration per field, nothing else lists keys.

That the derived schema is the ecosystem's is checked against its facts in
test_ecosystem_schema.py.
"""

from __future__ import annotations

from dataclasses import dataclass

from kernelhub_builder.manifest import KernelManifest, Project
from kernelhub_builder.manifest.keys import renames, table_keys, toml
from kernelhub_builder.manifest.model import CPP_KINDS, RUST_KINDS


def keys(table: str, edition: int | None, model: type = KernelManifest) -> set[str]:
    return set(table_keys(model, table, edition))


def test_kernels_toml_keys() -> None:
    assert keys("", None, Project) == {"kernels", "hub", "matrix", "toolchain", "build-dir",
                                       "releases"}
    assert keys("matrix", None, Project) == {"torch", "backends", "systems", "cuda", "rocm",
                                             "xpu"}
    assert keys("hub", None, Project) == {"org", "target", "variant-names"}


def test_renames_come_from_the_model() -> None:
    assert dict(renames(KernelManifest)) == {
        "general.cuda-minver": "general.cuda.minver",
        "general.cuda-maxver": "general.cuda.maxver",
        "torch-noarch.cuda-capabilities": "torch-noarch.cuda_capabilities",
        "torch-noarch.rocm-archs": "torch-noarch.rocm_archs",
    }


def test_a_declared_field_is_a_schema_key() -> None:
    """One declaration is all it takes: the schema follows the model."""

    @dataclass(frozen=True)
    class Settings:
        plain: int = toml("section.plain", default=0)
        newer: int = toml("section.newer", editions=frozenset({6}), default=0)
        renamed: int = toml("section.renamed", old=("section.old-name",), default=0)

    assert table_keys(Settings, "", 6) == ("section",)
    assert table_keys(Settings, "section", 6) == ("plain", "newer", "renamed")
    assert table_keys(Settings, "section", 5) == ("plain", "renamed", "old-name")
    assert list(renames(Settings)) == [("section.old-name", "section.renamed")]


def test_rust_kinds_are_known_and_distinct_from_cpp() -> None:
    assert not CPP_KINDS & RUST_KINDS
