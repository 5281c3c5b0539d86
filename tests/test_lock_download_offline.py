"""A project locks its kernels, prefetches them, and then loads with no hub at all.

The story: pyproject.toml declares kernels in the ecosystem's table and in ours;
`kernelhub lock` writes kernels.lock in the ecosystem's format (pins) and our hashes in
kernelhub.lock beside it; `kernelhub download` fills a fresh cache; the hub then disappears and the
locked loads still work — and refuse a variant whose hash differs from the lock, before
importing anything. A lock written the ecosystem's way (no kernelhub key) loads too,
checked by its git_lfs_concat hash, which this test recomputes from git itself.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
from e2e import BIN, Workspace, run

PYPROJECT = """\
[project]
name = "my-model"
version = "0.1.0"

[tool.kernels.dependencies]
"kernels-community/activation" = 1

[tool.kernelhub.dependencies]
"kernels-community/rmsnorm" = ">=1.0,<2.0"
"""

LOAD = """
import json, sys
from kernelhub.ecosystem import load_kernel  # the ecosystem's API; `kernels` is its own package
import kernelhub
act = load_kernel("kernels-community/activation", lockfile=sys.argv[1])
norm = kernelhub.load_locked_kernel("kernels-community/rmsnorm", lockfile=sys.argv[1])
print(json.dumps({"act": act.__name__, "norm": norm.__name__}))
"""


def _git_lfs_concat_from_git(hub: Path, repo_id: str, commit: str, variant: str) -> str:
    """The ecosystem's variant hash, from `git ls-tree` blob ids (independent of kernelhub)."""
    tree = run(["git", "-C", str(hub / "models" / repo_id), "ls-tree", "-r", commit,
                f"build/{variant}/"]).stdout
    files = []
    for line in tree.splitlines():
        meta, path = line.split("\t", 1)
        rel = path.removeprefix(f"build/{variant}/")
        files.append((rel.encode(), bytes.fromhex(meta.split()[2])))
    m = hashlib.sha256()
    for name, blob in sorted(files):
        m.update(name)
        m.update(blob)
    return f"sha256-{m.hexdigest()}"


def _load(lock: Path, env: dict[str, str], check: bool = True):
    import sys

    return run([sys.executable, "-c", LOAD, str(lock)], env=env, check=check)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    return tmp_path


@pytest.mark.slow
def test_lock_download_then_load_offline(published: Workspace, project: Path, tmp_path: Path):
    env = published.env(cache="lock-cache")
    run([str(BIN / "kernelhub"), "lock", str(project)], env=env)
    lock_path = project / "kernels.lock"
    entries = {e["repo_id"]: e for e in json.loads((project / "kernelhub.lock").read_text())}
    assert set(entries) == {"kernels-community/activation", "kernels-community/rmsnorm"}
    assert json.loads(lock_path.read_text()) == [  # the pins, as kernels 0.17+ reads them
        {"dependency": {"repo-id": "kernels-community/activation", "version": 1},
         "lock": {"commit": entries["kernels-community/activation"]["sha"]}},
        {"dependency": {"repo-id": "kernels-community/rmsnorm",
                        "revision": entries["kernels-community/rmsnorm"]["sha"]},
         "lock": {"commit": entries["kernels-community/rmsnorm"]["sha"]}}]
    for repo_id, entry in entries.items():
        assert len(entry["sha"]) == 40 and entry["variants"]
        for variant, lock in entry["variants"].items():
            assert lock["hash_type"] == "git_lfs_concat"
            assert lock["hash"] == _git_lfs_concat_from_git(published.hub, repo_id,
                                                            entry["sha"], variant)
        assert set(entry["kernelhub"]["metadata-sha256"]) == set(entry["variants"])

    # A fresh cache, filled by `kernelhub download`; then the hub goes away.
    offline = published.env(cache="offline-cache", KERNELHUB_HUB=str(tmp_path / "hub"))
    shutil.copytree(published.hub, tmp_path / "hub", symlinks=True)
    run([str(BIN / "kernelhub"), "download", str(project)], env=offline)
    shutil.rmtree(tmp_path / "hub")
    loaded = json.loads(_load(lock_path, offline).stdout.splitlines()[-1])
    assert loaded["act"] and loaded["norm"]

    # A lock whose hash does not match the cached variant: refused before import.
    tampered = list(entries.values())
    for entry in tampered:
        entry["kernelhub"]["metadata-sha256"] = dict.fromkeys(
            entry["kernelhub"]["metadata-sha256"], "0" * 64)
    (tmp_path / "tampered").mkdir()
    bad = tmp_path / "tampered" / "kernels.lock"
    shutil.copy(lock_path, bad)
    (tmp_path / "tampered" / "kernelhub.lock").write_text(json.dumps(tampered))
    proc = _load(bad, offline, check=False)
    assert proc.returncode != 0 and "IntegrityError" in proc.stderr
    assert "refusing to load" in proc.stderr and "lock file records" in proc.stderr


@pytest.mark.slow
def test_lock_written_by_the_ecosystem_loads_and_is_checked(published: Workspace,
                                                             project: Path, tmp_path: Path):
    """No kernelhub key: the git_lfs_concat hash is what is checked."""
    env = published.env(cache="eco-cache")
    run([str(BIN / "kernelhub"), "lock", "--format", "kernelhub", str(project)], env=env)
    assert not (project / "kernelhub.lock").exists()
    entries = json.loads((project / "kernels.lock").read_text())
    for entry in entries:
        del entry["kernelhub"]
    eco = tmp_path / "ecosystem.lock"
    eco.write_text(json.dumps(entries, indent=2))
    loaded = json.loads(_load(eco, env).stdout.splitlines()[-1])
    assert loaded["act"] and loaded["norm"]

    for entry in entries:
        for lock in entry["variants"].values():
            lock["hash"] = "sha256-" + "0" * 64
    eco.write_text(json.dumps(entries))
    proc = _load(eco, env, check=False)
    assert proc.returncode != 0 and "hash (git_lfs_concat)" in proc.stderr


def test_lock_without_dependencies_says_what_to_add(tmp_path: Path):
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    proc = run([str(BIN / "kernelhub"), "lock", str(tmp_path)], check=False)
    assert proc.returncode == 1
    assert "[tool.kernels.dependencies]" in proc.stderr and "Traceback" not in proc.stderr

