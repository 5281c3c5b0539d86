"""Session fixtures of the end-to-end tests: one build, one publish, shared by all."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from e2e import PUBLISHED, Workspace, builder
from reference_loader import KernelRepoProxy, olah_cli, served_hub

collect_ignore_glob = ["fixtures/*"]
"""Kernel trees used as test data; their own tests run under `builder test`, not here."""


@pytest.fixture(autouse=True)
def no_internet(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where a test names no hub server, 'hf' (on the default search path too) is a
    loopback port nothing listens on: refused at once, never the real Hub."""
    if not os.environ.get("HF_ENDPOINT"):
        monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")


@pytest.fixture(scope="session")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Workspace:
    given = os.environ.get(PUBLISHED)
    root = Path(given) if given else tmp_path_factory.mktemp("e2e")
    return Workspace(root=root, out=root / "build", hub=root / "hub")


@pytest.fixture(scope="session")
def built(workspace: Workspace) -> Workspace:
    """The repository's kernels built once for every variant this host can build."""
    if not os.environ.get(PUBLISHED):
        builder(workspace, "build")
    return workspace


@pytest.fixture(scope="session")
def published(built: Workspace) -> Workspace:
    if not os.environ.get(PUBLISHED):
        builder(built, "publish", "--hub", str(built.hub))
    return built


@pytest.fixture
def published_served(published: Workspace, tmp_path: Path) -> Iterator[KernelRepoProxy]:
    """The published hub behind olah, behind the counting kernel-repo-type proxy (what the
    ecosystem's loaders read our kernels through)."""
    if olah_cli() is None:
        pytest.skip("olah is not installed (pip install olah)")
    with served_hub(published.hub, tmp_path / "olah") as proxy:
        yield proxy


@pytest.fixture
def hub_api_client(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """This process as a fresh client of a loopback Hub-API server: its own cache, config
    and HF home, no token or policy from the environment, org ``acme`` trusted."""
    from kernelhub.hub import hf
    from kernelhub.load import pipeline
    from kernelhub.signing import policy as release_policy

    for var in ("HF_TOKEN", "HF_ENDPOINT", "KERNELHUB_OFFLINE", "HF_HUB_OFFLINE",
                "KERNELHUB_ALLOWED_SIGNERS", "KERNELHUB_REQUIRE_SIGNED",
                "KERNELHUB_ALLOW_UNSIGNED"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    monkeypatch.setenv("KERNELHUB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("KERNELHUB_CONFIG", str(tmp_path / "config.toml"))
    monkeypatch.setenv("KERNELHUB_TRUSTED_ORGS", "acme")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    monkeypatch.setattr(pipeline, "_memo", {})
    monkeypatch.setattr(release_policy, "_verified", {})
    monkeypatch.setattr(hf, "_found_types", {})
