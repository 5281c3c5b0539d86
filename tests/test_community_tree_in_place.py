"""A kernel author's own repository, shaped like the ecosystem's community trees, builds
and tests in place: one build.toml at its root and no kernels.toml, a part whose name
starts with ``_``, backends listed without a part of their own, an optional import
inside a ``try`` and one inside a function, and tests that load the build the
ecosystem's way (``from kernels import get_kernel`` with ``LOCAL_KERNELS``).

The fixture (tests/fixtures/community-scale) was written for these tests in that shape.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from e2e import BIN, REPO, Workspace, run

FIXTURE = REPO / "tests/fixtures/community-scale"
VARIANT = "torch-stable-abi213-cpu-x86_64-linux"


@pytest.fixture
def author_repo(tmp_path: Path) -> Path:
    repo = tmp_path / "scale"
    shutil.copytree(FIXTURE, repo)
    return repo


@pytest.mark.slow
def test_builds_and_tests_in_place(author_repo: Path, workspace: Workspace):
    env = workspace.env()
    builder = str(BIN / "builder")
    plan = run([builder, "list-variants", "--json"], env=env, cwd=author_repo).stdout
    planned = {v["variant"]: v["backend"] for v in json.loads(plan)["scale"]}
    assert VARIANT in planned
    assert {"cuda", "metal"} <= set(planned.values())  # listed without a part of their own

    run([builder, "build", "--variant", VARIANT], env=env, cwd=author_repo)
    variant = author_repo / "build" / "scale" / VARIANT
    metadata = json.loads((variant / "metadata.json").read_text())
    assert metadata["name"] == "scale" and metadata["python-depends"] == []

    tested = run([builder, "test"], env=env, cwd=author_repo)
    assert "PASS" in tested.stdout and "FAIL" not in tested.stdout
