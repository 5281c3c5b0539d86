"""What the kernel cache holds: repositories, the commits fetched from them, their variants.

Read from the cache's layout (:mod:`kernelhub.cache`) without loading anything: the
last refs seen tell which version (``v<N>`` branch) and tags a cached commit was reached
through. ``kernelhub cache ls`` prints it; its ``--json`` keys follow the ecosystem's
``kernels cache ls`` (``repos[].repo_id``, ``size_on_disk``, ``last_accessed``,
``versions[].version``, ``variants``) with kernelhub's ``hub``, ``commit`` and ``refs``.
"""

from __future__ import annotations

# PEP 810: imported when first used (inert before Python 3.15)
__lazy_modules__ = {
    "kernelhub.cache", "kernelhub.errors", "kernelhub.formats.variants",
    "kernelhub.versions",
}

import os
from pathlib import Path
from typing import Any

from ..errors import KernelHubError
from ..formats.variants import is_variant_name
from ..value_types import Record
from ..versions import branch_major, is_commit_id
from . import KernelCache


class CachedCommit(Record, frozen=True):
    commit: str
    refs: tuple[str, ...]
    """Branches and tags that pointed at this commit when it was last resolved."""
    variants: tuple[str, ...]
    size_on_disk: int
    last_accessed: float

    @property
    def version(self) -> str | None:
        """The ``v<N>`` branch this commit was reached through, if one pointed at it."""
        majors = [ref for ref in self.refs if branch_major(ref) is not None]
        return max(majors, key=lambda ref: branch_major(ref) or 0) if majors else None


class CachedRepo(Record, frozen=True):
    hub: str
    repo_id: str
    commits: tuple[CachedCommit, ...]

    @property
    def size_on_disk(self) -> int:
        return sum(c.size_on_disk for c in self.commits)

    @property
    def last_accessed(self) -> float:
        return max((c.last_accessed for c in self.commits), default=0.0)

    def to_json(self) -> dict[str, Any]:
        return {"hub": self.hub, "repo_id": self.repo_id, "size_on_disk": self.size_on_disk,
                "last_accessed": self.last_accessed,
                "versions": [{"version": c.version, "commit": c.commit, "refs": list(c.refs),
                              "size_on_disk": c.size_on_disk, "last_accessed": c.last_accessed,
                              "variants": list(c.variants)} for c in self.commits]}


def _dirs(path: Path) -> list[Path]:
    try:
        return sorted(p for p in path.iterdir()
                      if p.is_dir() and not p.is_symlink() and not p.name.startswith("."))
    except OSError:
        return []


def _usage(path: Path) -> tuple[int, float]:
    """(bytes, newest access time) of the files under ``path``."""
    size, accessed = 0, 0.0
    for root, _, files in os.walk(path):
        for name in files:
            try:
                stat = os.lstat(os.path.join(root, name))
            except OSError:
                continue
            size += stat.st_size
            accessed = max(accessed, stat.st_atime)
    return size, accessed


def cached_kernels(cache: KernelCache | None = None) -> list[CachedRepo]:
    """Every repository with at least one cached variant, sorted by hub and repo id."""
    cache = cache or KernelCache()
    repos = []
    for hub_dir in _dirs(cache.root):
        for org_dir in _dirs(hub_dir):
            for repo_dir in _dirs(org_dir):
                repo_id = f"{org_dir.name}/{repo_dir.name}"
                try:
                    refs = cache.read_refs(hub_dir.name, repo_id)
                except KernelHubError:
                    refs = None
                pointing: dict[str, list[str]] = {}
                if refs is not None:
                    for ref, commit in sorted({**refs.branches, **refs.tags}.items()):
                        pointing.setdefault(commit, []).append(ref)
                commits = []
                for commit_dir in _dirs(repo_dir):
                    variants = tuple(p.name for p in _dirs(commit_dir) if is_variant_name(p.name))
                    if not is_commit_id(commit_dir.name) or not variants:
                        continue
                    size, accessed = _usage(commit_dir)
                    commits.append(CachedCommit(commit_dir.name,
                                                tuple(pointing.get(commit_dir.name, ())),
                                                variants, size, accessed))
                if commits:
                    repos.append(CachedRepo(hub_dir.name, repo_id, tuple(commits)))
    return repos
