"""Lock files of the ecosystem's current shape (``KernelLocks``, kernels 0.17 and 0.19):
read as pins without hashes, next to kernelhub's own entries."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from kernelhub.errors import LockFileError
from kernelhub.lock import lock_entry, parse_lock

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
