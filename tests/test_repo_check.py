"""`kernelhub check REPO`: every variant of a published repository, checked without
importing anything — a good repository passes, a tampered file is named."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from e2e import BIN, Workspace, run

BROKEN = "kernels-community/broken-activation"


def _tampered_copy(ws: Workspace, tmp: Path) -> None:
    """A copy of activation whose v1 head changes one file of one variant after the build."""
    bare = ws.hub / "models" / BROKEN
    shutil.rmtree(bare, ignore_errors=True)
    run(["git", "clone", "-q", "--mirror", str(ws.hub / "models/kernels-community/activation"),
         str(bare)])
    work = tmp / "work"
    run(["git", "clone", "-q", "-b", "v1", str(bare), str(work)])
    ops = next(work.glob("build/*/_ops.py"))
    ops.write_text(ops.read_text() + "\n# changed after the build\n")
    git = ["git", "-C", str(work), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    run([*git, "commit", "-qam", "tamper"])
    run([*git, "push", "-q", "origin", "v1"])


@pytest.mark.slow
def test_check_passes_a_good_repository_and_names_a_tampered_file(published: Workspace,
                                                                 tmp_path: Path):
    env = published.env(cache="check-cache")
    good = run([str(BIN / "kernelhub"), "check", "kernels-community/activation"], env=env)
    assert "variants pass" in good.stdout and "FAIL" not in good.stdout

    _tampered_copy(published, tmp_path)
    bad = run([str(BIN / "kernelhub"), "check", BROKEN, "--version", "1"], env=env, check=False)
    assert bad.returncode == 1 and "FAIL" in bad.stdout
    assert "_ops.py" in bad.stdout and "does not match" in bad.stdout
    assert "Traceback" not in bad.stderr
