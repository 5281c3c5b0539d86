"""Commit ids of both hash functions: SHA-1 (40 hex) and SHA-256 (64 hex, repositories in
git's SHA-256 object format) are accepted wherever a commit is — version specs, the
cache, lock files — and a kernel loads from a SHA-256 repository on a LocalHub."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from kernelhub.api import get_kernel, resolve_kernel
from kernelhub.cache import KernelCache
from kernelhub.errors import KernelHubError, VersionSpecError
from kernelhub.hub import LocalHub
from kernelhub.system import detect_system
from kernelhub.versions import is_commit_id, parse_revision, parse_version
from kh_doubles import make_variant

HOST = "torch{}{}-cxx11-cpu-x86_64-linux".format(*detect_system("cpu").torch)
SHA1, SHA256 = "a" * 40, "b" * 64


def test_both_lengths_are_commit_ids_and_nothing_in_between() -> None:
    assert is_commit_id(SHA1) and is_commit_id(SHA256)
    for not_one in ("a" * 39, "a" * 41, "a" * 63, "a" * 65, "A" * 64, "g" * 64, SHA1[:12]):
        assert not is_commit_id(not_one)
    assert parse_revision(SHA256).commit == SHA256
    assert parse_version(SHA256).commit == SHA256
    with pytest.raises(VersionSpecError):
        parse_revision("")
    cache = KernelCache(Path("/nonexistent"))
    assert cache.commit_dir("h", "o/n", SHA256).name == SHA256
    with pytest.raises(KernelHubError, match=r"40 or 64 hex"):
        cache.commit_dir("h", "o/n", "b" * 50)


def _git(*args: str, cwd: Path) -> str:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
                          cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def test_a_kernel_loads_from_a_sha256_repository(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    _git("init", "-q", "--object-format=sha256", "-b", "v1", cwd=work)
    make_variant(work / "build" / HOST, name="sha", init="VALUE = 256\n")
    _git("add", "-A", cwd=work)
    _git("commit", "-q", "-m", "release", cwd=work)
    _git("tag", "v1.0.0", cwd=work)
    hub = LocalHub(tmp_path / "hub")
    bare = hub.repo_path("kernels-community/sha")
    bare.parent.mkdir(parents=True)
    _git("clone", "-q", "--bare", str(work), str(bare), cwd=tmp_path)
    head = _git("rev-parse", "HEAD", cwd=work)
    assert len(head) == 64

    resolution = resolve_kernel("kernels-community/sha", 1, hub=hub)
    assert resolution.commit == head and resolution.variant == HOST
    assert get_kernel("kernels-community/sha", 1, hub=hub).VALUE == 256
    assert get_kernel("kernels-community/sha", revision=head, hub=hub).VALUE == 256
    assert get_kernel("kernels-community/sha", "v1.0.0", hub=hub).VALUE == 256
