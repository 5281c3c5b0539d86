"""Every GitHub Actions workflow passes actionlint, and the release workflow takes its
matrix from ``builder ci-matrix`` rather than from a hand-written list."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from e2e import REPO

WORKFLOWS = sorted((REPO / ".github" / "workflows").glob("*.yml"))


def actionlint() -> str:
    """ci/setup installs it (ci/requirements-dev.txt); its absence is a set-up failure."""
    found = shutil.which("actionlint", path=str(Path(sys.executable).parent))
    if found is None:
        pytest.fail("actionlint is not installed in this venv; run bash ci/setup")
    return found


def test_there_are_workflows() -> None:
    assert any(p.name == "release.yml" for p in WORKFLOWS)


@pytest.mark.parametrize("workflow", WORKFLOWS, ids=[p.name for p in WORKFLOWS])
def test_workflow_passes_actionlint(workflow: Path) -> None:
    proc = subprocess.run([actionlint(), "-no-color", str(workflow)], cwd=REPO, text=True,
                          capture_output=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_actionlint_catches_a_broken_workflow(tmp_path: Path) -> None:
    """The check can fail: an output the plan job never defines is an error."""
    bad = tmp_path / "bad.yml"
    bad.write_text((REPO / ".github/workflows/release.yml").read_text()
                   .replace("needs.plan.outputs.matrix", "needs.plan.outputs.matrx", 1))
    proc = subprocess.run([actionlint(), "-no-color", str(bad)], text=True,
                          capture_output=True)
    assert proc.returncode == 1
    assert "matrx" in proc.stdout


def test_release_matrix_comes_from_the_builder() -> None:
    text = (REPO / ".github/workflows/release.yml").read_text()
    assert "fromJSON(needs.plan.outputs.matrix)" in text
    assert "bash ci/matrix" in text
    assert "bash ci/build-variant" in text and "bash ci/publish-artifacts" in text
