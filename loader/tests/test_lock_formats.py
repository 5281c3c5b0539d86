"""Lock files of the ecosystem's current shape (``KernelLocks``, kernels 0.17 and 0.19):
read as pins without hashes, next to kernelhub's own entries; and written, with
kernelhub's hashes in ``kernelhub.lock`` beside them (the real ecosystem parsers read what
we write in tests/test_lock_interop.py)."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest
from kernelhub.deps import KernelDependency
from kernelhub.errors import LockFileError
from kernelhub.lock import HASHES_NAME, LockEntry, lock_entry, parse_lock, read_lock, write_lock

SHA, OTHER = "c" * 40, "d" * 64

# What kernels 0.19.1's KernelLocks.to_json writes (observed from its own extension).
ECOSYSTEM = [
    {"dependency": {"repo-id": "kernels-community/activation", "version": 1},
     "lock": {"commit": SHA}},
    {"dependency": {"repo-id": "acme/helpers", "revision": "v2.1.0"},
     "lock": {"commit": OTHER}},
]


def test_the_ecosystems_lock_list_reads_as_pins(tmp_path: Path) -> None:
    entries = parse_lock(json.dumps(ECOSYSTEM).encode(), "kernels.lock")
    assert {k: (e.sha, e.variant_hashes) for k, e in entries.items()} == {
        "kernels-community/activation": (SHA, {}), "acme/helpers": (OTHER, {})}
    path = tmp_path / "kernels.lock"
    path.write_text(json.dumps(ECOSYSTEM, indent=2))
    assert lock_entry("acme/helpers", path).sha == OTHER  # a SHA-256 commit is a pin too


def test_one_repository_locked_at_two_commits_is_refused() -> None:
    twice = [*ECOSYSTEM, {"dependency": {"repo-id": "acme/helpers", "version": 3},
                          "lock": {"commit": "e" * 40}}]
    with pytest.raises(LockFileError, match="pins acme/helpers to two commits"):
        parse_lock(json.dumps(twice).encode(), "kernels.lock")
    same = [*ECOSYSTEM, ECOSYSTEM[1]]  # the same pin reached twice (a dependency tree)
    assert parse_lock(json.dumps(same).encode(), "kernels.lock")["acme/helpers"].sha == OTHER


def test_malformed_ecosystem_entries() -> None:
    for entry in ({"dependency": {"repo_id": "a/b"}, "lock": {"commit": SHA}},
                  {"dependency": {"repo-id": "a/b"}, "lock": {"sha": SHA}}):
        with pytest.raises(LockFileError, match="malformed entry"):
            parse_lock(json.dumps([entry]).encode(), "kernels.lock")


HASHED = [LockEntry("kernels-community/activation", SHA, {"torch-universal": "sha256-" + "1" * 64},
                    {"torch-universal": "2" * 64}),
          LockEntry("acme/helpers", OTHER, {"torch-universal": "sha256-" + "3" * 64},
                    {"torch-universal": "4" * 64})]


def test_kernelhub_lock_writes_their_pins_and_our_hashes_beside_them(tmp_path: Path) -> None:
    path = tmp_path / "kernels.lock"
    written = write_lock(path, HASHED, versions={"kernels-community/activation": 1,
                                                 "acme/helpers": ">=2.1,<3"})
    assert written == [path, tmp_path / HASHES_NAME]
    assert json.loads(path.read_text()) == [
        {"dependency": {"repo-id": "kernels-community/activation", "version": 1},
         "lock": {"commit": SHA}},
        {"dependency": {"repo-id": "acme/helpers", "revision": OTHER},  # a spec they lack
         "lock": {"commit": OTHER}}]
    assert [e["repo_id"] for e in json.loads(written[1].read_text())] == [
        "kernels-community/activation", "acme/helpers"]
    assert read_lock(path) == {e.repo_id: e for e in HASHED}  # pins joined to their hashes
    assert lock_entry("acme/helpers", path).metadata_sha256 == {"torch-universal": "4" * 64}


def test_hashes_for_another_commit_than_the_pin_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "kernels.lock"
    write_lock(path, HASHED)
    moved = [{**e, "lock": {"commit": "e" * 40}} if e["dependency"]["repo-id"] == "acme/helpers"
             else e for e in json.loads(path.read_text())]
    path.write_text(json.dumps(moved))  # kernels.lock rewritten by another tool
    with pytest.raises(LockFileError, match=r"kernelhub.lock records hashes for acme/helpers at "
                                            r"dddddddddddd, but .* pins eeeeeeeeeeee"):
        read_lock(path)
    (tmp_path / HASHES_NAME).unlink()  # as the message says: pins alone
    assert read_lock(path)["acme/helpers"].variant_hashes == {}


def test_the_single_file_format_keeps_the_hashes_in_kernels_lock(tmp_path: Path) -> None:
    path = tmp_path / "kernels.lock"
    write_lock(path, HASHED)
    assert write_lock(path, HASHED, fmt="kernelhub") == [path]
    assert not (tmp_path / HASHES_NAME).exists()  # the earlier hashes would read as stale
    assert json.loads(path.read_text()) == [e.to_json() for e in HASHED]
    assert read_lock(path) == {e.repo_id: e for e in HASHED}
    with pytest.raises(LockFileError, match="unknown lock format 'toml'"):
        write_lock(path, HASHED, fmt="toml")


def test_each_declared_dependency_gets_its_own_pin(tmp_path: Path) -> None:
    """What a kernel's ``kernel-depends`` declares is pinned under the dependency as declared
    (the key the ecosystem's locked loads look up), each once, to its repository's commit."""
    path = tmp_path / "kernels.lock"
    declared = (KernelDependency("acme/helpers", 2), KernelDependency("acme/helpers", 2),
                KernelDependency("acme/helpers", revision="v2.1.0"))
    write_lock(path, HASHED, versions={"kernels-community/activation": 1},
               dependencies=declared)
    assert json.loads(path.read_text()) == [
        {"dependency": {"repo-id": "kernels-community/activation", "version": 1},
         "lock": {"commit": SHA}},
        {"dependency": {"repo-id": "acme/helpers", "version": 2}, "lock": {"commit": OTHER}},
        {"dependency": {"repo-id": "acme/helpers", "revision": "v2.1.0"},
         "lock": {"commit": OTHER}}]
    assert read_lock(path) == {e.repo_id: e for e in HASHED}  # one repository, one pin
    with pytest.raises(LockFileError, match="cannot pin the dependency acme/other@v1: no entry"):
        write_lock(path, HASHED, dependencies=[KernelDependency("acme/other", 1)])


def test_two_writers_at_once_do_not_move_each_other_s_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The race of concurrent ``kernelhub lock`` runs (issue 33: a raw FileNotFoundError),
    made deterministic: a second writer (another thread; another process alike) runs in
    full between the first one's write of its temporary file and the rename of it."""
    path = tmp_path / "kernels.lock"
    real_replace = os.replace
    interleaved: list[int] = []

    def replace_after_another_writer(src: str | os.PathLike[str], dst: str | os.PathLike[str]
                                     ) -> None:
        if not interleaved:
            interleaved.append(1)
            other = threading.Thread(target=write_lock, args=(path, HASHED[:1]),
                                     kwargs={"versions": {"kernels-community/activation": 1}})
            other.start()
            other.join()
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", replace_after_another_writer)
    written = write_lock(path, HASHED, versions={"kernels-community/activation": 1,
                                                 "acme/helpers": ">=2.1,<3"})
    assert interleaved
    assert read_lock(path) == {e.repo_id: e for e in HASHED}  # the last writer's, whole
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.name for p in written)
    assert oct(path.stat().st_mode & 0o777) == oct(0o666 & ~_umask())


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
