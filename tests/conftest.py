"""Session fixtures of the end-to-end tests: one build, one publish, shared by all."""

from __future__ import annotations

import pytest
from e2e import Workspace, builder

collect_ignore_glob = ["fixtures/*"]
"""Kernel trees used as test data; their own tests run under `builder test`, not here."""


@pytest.fixture(scope="session")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Workspace:
    root = tmp_path_factory.mktemp("e2e")
    return Workspace(root=root, out=root / "build", hub=root / "hub")


@pytest.fixture(scope="session")
def built(workspace: Workspace) -> Workspace:
    """The repository's kernels built once for every variant this host can build."""
    builder(workspace, "build")
    return workspace


@pytest.fixture(scope="session")
def published(built: Workspace) -> Workspace:
    builder(built, "publish", "--hub", str(built.hub))
    return built
