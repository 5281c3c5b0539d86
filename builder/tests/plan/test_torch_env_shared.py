"""One torch env per minor, shared by every checkout and standalone kernel build.

The reported break (issue 33, item 6): a standalone kernel build (a repository without
kernels.toml asks for any ``torch==2.13.*``) rewrote the shared env's marker, made for
the monorepo's pin ``torch==2.13.0``; every Nix build of the monorepo, which may only
read envs, then found "no ready torch 2.13 environment". An env is now ready for every
requirement its torch satisfies, whoever made it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from kernelhub_builder.errors import TorchEnvError
from kernelhub_builder.plan import torch_env
from kernelhub_builder.plan.torch_env import (
    MARKER_FILE,
    READ_ONLY_ENV,
    ensure_torch_env,
    env_dir,
    loader_dependencies_digest,
    loader_requirement,
    peek_torch_env,
)


def _ready_env(home: Path, made_for: str, installed: str = "2.13.0+cpu") -> Path:
    """A torch 2.13 env as a build made it: its Python, and the marker it wrote."""
    root = home / "envs" / "torch-2.13"
    (root / "bin").mkdir(parents=True)
    (root / "bin" / "python").symlink_to(sys.executable)
    marker = {"format": 1, "minor": "2.13", "requirement": made_for,
              "torch": {"torch_version": installed, "cuda": None, "cxx11_abi": True,
                        "include_dirs": [], "library_dir": str(root / "lib"),
                        "python_include_dir": str(root / "include")},
              "loader": loader_requirement(), "loader-deps": loader_dependencies_digest()}
    (root / MARKER_FILE).write_text(json.dumps(marker))
    return root


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("KERNELHUB_BUILDER_HOME", str(tmp_path / "builder-home"))
    monkeypatch.delenv(READ_ONLY_ENV, raising=False)
    return tmp_path / "builder-home"


@pytest.mark.parametrize(("made_for", "asked"), [
    ("torch==2.13.*", "torch==2.13.0"),  # a standalone build made it; the monorepo reads
    ("torch==2.13.0", None),             # the monorepo made it; a standalone build reads
])
def test_an_env_serves_every_requirement_its_torch_satisfies(
        home: Path, monkeypatch: pytest.MonkeyPatch, made_for: str, asked: str | None) -> None:
    root = _ready_env(home, made_for)
    before = (root / MARKER_FILE).read_bytes()

    def no_prepare(*_: object) -> None:
        raise AssertionError("a ready env was made again")

    monkeypatch.setattr(torch_env, "_prepare", no_prepare)
    env = peek_torch_env("2.13", asked)
    assert env is not None and env.root == root and env.torch_release == "2.13.0"
    assert ensure_torch_env("2.13", asked).root == root
    monkeypatch.setenv(READ_ONLY_ENV, "1")  # as in a Nix build
    assert ensure_torch_env("2.13", asked).root == root
    assert (root / MARKER_FILE).read_bytes() == before  # nobody rewrote it


def test_a_standalone_build_leaves_the_monorepo_s_nix_builds_working(
        home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The probe's order: the monorepo's set-up, a standalone build, a Nix build."""
    root = _ready_env(home, "torch==2.13.0")
    monkeypatch.setattr(torch_env, "_prepare", lambda *a: pytest.fail("env made again"))
    ensure_torch_env("2.13", None)  # the standalone build
    monkeypatch.setenv(READ_ONLY_ENV, "1")
    assert ensure_torch_env("2.13", "torch==2.13.0").root == root == env_dir("2.13")


def test_an_env_whose_torch_misses_the_pin_is_still_not_ready(
        home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _ready_env(home, "torch==2.13.*", installed="2.13.1+cpu")
    assert peek_torch_env("2.13", "torch==2.13.0") is None
    assert peek_torch_env("2.13", None) is not None
    monkeypatch.setenv(READ_ONLY_ENV, "1")
    with pytest.raises(TorchEnvError, match=r"no ready torch 2\.13 environment"):
        ensure_torch_env("2.13", "torch==2.13.0")
