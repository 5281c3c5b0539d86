"""`kernelhub init NAME` makes a kernel repository that builds and tests on the first try."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from e2e import BIN, run


@pytest.mark.slow
def test_init_then_build_then_test(tmp_path: Path):
    env = dict(os.environ)
    run([str(BIN / "kernelhub"), "init", "my-kernel"], env=env, cwd=tmp_path)
    repo = tmp_path / "my-kernel"
    assert (repo / "build.toml").is_file() and (repo / "tests/test_my_kernel.py").is_file()
    built = run([str(BIN / "builder"), "build"], env=env, cwd=repo)
    assert "compiled" in built.stdout
    tested = run([str(BIN / "builder"), "test"], env=env, cwd=repo)
    assert "PASS" in tested.stdout and "FAIL" not in tested.stdout

    again = run([str(BIN / "kernelhub"), "init", "my-kernel"], env=env, cwd=tmp_path,
                check=False)
    assert again.returncode == 1 and "not an empty directory" in (again.stdout + again.stderr)
