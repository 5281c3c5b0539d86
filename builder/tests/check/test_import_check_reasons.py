"""The import check says why a variant did not import, and a dependency that did not load
is said as that — not as "does not import without a GPU" (issue 33)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from kernelhub.formats.metadata import read_metadata
from kernelhub_builder.check.imports import check_import
from kernelhub_builder.check.violation import RULE_IMPORT_CHECK
from kh_doubles import make_variant


@pytest.fixture(autouse=True)
def empty_hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The import check's child loads dependencies from the hub its environment names."""
    for var in ("KERNELHUB_TRUSTED_ORGS", "PYTHONPATH"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("KERNELHUB_HUB", str(tmp_path / "hub"))
    monkeypatch.setenv("KERNELHUB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("KERNELHUB_CONFIG", str(tmp_path / "config.toml"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    (tmp_path / "hub").mkdir()


def test_a_dependency_from_an_untrusted_org_is_the_reason_given(tmp_path: Path) -> None:
    variant = tmp_path / "torch-cpu"
    make_variant(variant, name="needs_dep",
                 kernel_depends=[{"repo-id": "evil-org/dep", "version": 1}])
    result = check_import(Path(sys.executable), variant, read_metadata(variant))
    [violation] = result.violations
    assert violation.rule == RULE_IMPORT_CHECK
    assert "without a GPU" not in violation.message
    assert "kernel-depends" in violation.message and "was not imported" in violation.message
    assert "TrustError: refusing to load evil-org/dep" in violation.message
    assert "'evil-org' is not trusted" in violation.message


def test_a_variant_that_fails_to_import_still_says_so(tmp_path: Path) -> None:
    variant = tmp_path / "torch-cpu"
    make_variant(variant, name="broken", init="raise ImportError('no such thing')\n")
    [violation] = check_import(Path(sys.executable), variant, read_metadata(variant)).violations
    assert violation.message.startswith("the variant does not import without a GPU: ")
    assert violation.message.endswith("failed: ImportError: no such thing")
