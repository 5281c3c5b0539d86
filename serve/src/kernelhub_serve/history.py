"""A repository's history as the pages show it: commits along a branch (a page at a time),
one commit's parents and message, and what changed between two commits.

Plain git plumbing on the bare repository (``git log``, ``git rev-list --count``,
``git diff-tree``), every argument a full commit id the caller already resolved, each
answer parsed from NUL-separated output so no path or message can forge a record.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone

from kernelhub.hub.git import GitRepo

PAGE_SIZE = 30
"""Commits per history page."""
_FORMAT = "--format=%H%x1f%P%x1f%ct%x1f%an%x1f%B"
"""Fixed-shape fields first: a unit separator in an author name or a message can only
spill into the message, never shift the id or the date."""
_STATUS = {"A": "added", "D": "removed", "M": "modified", "T": "type changed"}
NO_OID = "0" * 40


@dataclass(frozen=True)
class CommitInfo:
    id: str
    parents: tuple[str, ...]
    author: str
    date: str
    """UTC, to the minute (``2026-12-06 04:10 UTC``)."""
    title: str
    body: str
    """The message after its first line."""


@dataclass(frozen=True)
class Change:
    """One path that differs between two commits."""

    status: str
    """``added``, ``removed``, ``modified`` or ``type changed``."""
    path: str
    old_oid: str | None
    new_oid: str | None


def count(repo: GitRepo, commit: str) -> int:
    """How many commits ``commit``'s history holds (for the page count)."""
    return int(repo.out("rev-list", "--count", commit, "--"))


def log(repo: GitRepo, commit: str, skip: int = 0, limit: int = PAGE_SIZE) -> list[CommitInfo]:
    """``limit`` commits of ``commit``'s history, newest first, after the first ``skip``."""
    out = repo.run("log", "-z", f"--skip={skip}", f"--max-count={limit}", _FORMAT, commit,
                   "--").stdout.decode(errors="replace")
    return [_commit(record) for record in out.split("\0") if record]


def show(repo: GitRepo, commit: str) -> CommitInfo:
    return log(repo, commit, 0, 1)[0]


def changes(repo: GitRepo, old: str | None, new: str) -> list[Change]:
    """Paths that differ from ``old`` to ``new`` (every file of ``new`` when ``old`` is
    None: a root commit), sorted by path; renames are a removal plus an addition."""
    args = ["diff-tree", "-r", "-z", "--no-renames", "--no-commit-id"]
    args += ["--root", new] if old is None else [old, new]
    fields = repo.run(*args, "--").stdout.decode(errors="replace").split("\0")
    found = []
    for meta, path in zip(fields[0::2], fields[1::2], strict=False):
        if not meta.startswith(":"):
            continue
        _, _, old_oid, new_oid, status = meta[1:].split(" ")
        found.append(Change(_STATUS.get(status[:1], status), path,
                            None if old_oid == NO_OID else old_oid,
                            None if new_oid == NO_OID else new_oid))
    return sorted(found, key=lambda c: c.path)


def _commit(record: str) -> CommitInfo:
    oid, parents, stamp, author, message = record.lstrip("\n").split("\x1f", 4)
    title, _, body = message.strip().partition("\n")
    moment = datetime.fromtimestamp(int(stamp), tz=timezone.utc)
    return CommitInfo(oid, tuple(parents.split()), author, moment.strftime("%Y-%m-%d %H:%M UTC"),
                      title, body.strip())
