"""Shared fixtures: every test gets its own cache, config and hub, and no stray settings."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from kh_doubles import DirHub


NO_INTERNET = "http://127.0.0.1:9"
"""The discard port on loopback: nothing listens, a connection is refused at once. Where a
test names no hub server, the Hugging Face Hub is this."""

_SETTINGS_VARS = (
    "KERNELHUB_OFFLINE",
    "HF_HUB_OFFLINE",
    "KERNELHUB_TRUSTED_ORGS",
    "USE_HUB_KERNELS",
    "KERNELHUB_TEST_VARIANT",
    "KERNELHUB_ALLOWED_SIGNERS",
    "KERNELHUB_REQUIRE_SIGNED",
    "KERNELHUB_ALLOW_UNSIGNED",
)


@pytest.fixture(autouse=True)
def isolated_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point cache, config and default hub into tmp_path; forget memoized loads."""
    from kernelhub.load import pipeline
    from kernelhub.signing import policy as release_policy

    for var in _SETTINGS_VARS:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("KERNELHUB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("KERNELHUB_CONFIG", str(tmp_path / "config.toml"))
    monkeypatch.setenv("KERNELHUB_HUB", str(tmp_path / "default-hub"))
    if not os.environ.get("HF_ENDPOINT"):  # 'hf' on a search path: refused at once, never the internet
        monkeypatch.setenv("HF_ENDPOINT", NO_INTERNET)
    monkeypatch.setattr(pipeline, "_memo", {})
    monkeypatch.setattr(release_policy, "_verified", {})
    return tmp_path / "cache"


@pytest.fixture
def dirhub(tmp_path: Path) -> DirHub:
    from kh_doubles import DirHub

    return DirHub(tmp_path / "hub")
