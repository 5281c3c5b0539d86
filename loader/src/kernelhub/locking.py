"""Lock a project's kernels and prefetch what is locked (``kernelhub lock`` / ``download``).

``lock_project`` resolves each kernel dependency of ``pyproject.toml`` to a commit and
records, for every variant at that commit, the hashes a later load must match
(:mod:`kernelhub.lockfile` has the format). ``download_locked`` puts the locked
variants into the cache, checked against those hashes, so the project then loads with
no hub at all (``load_locked_kernel`` asks the hub nothing for a cached commit).
"""

from __future__ import annotations

from pathlib import Path

from .api import HubArg, open_hub_arg, resolve_kernel
from .cache import KernelCache
from .hub_hashes import cached_variant_hash
from .load.fetch import fetch
from .load.validators import LockValidator
from .load.verify import verify
from .lockfile import (
    LOCKFILE_NAME,
    LockEntry,
    project_dependencies,
    read_lock,
    write_lock,
)
from .metadata import read_metadata_bytes
from .release_manifest import metadata_sha256


def lock_project(project_dir: Path, *, hub: HubArg = None) -> tuple[Path, list[LockEntry]]:
    """Write ``<project_dir>/kernels.lock`` for the project's kernel dependencies.

    Every variant at the locked commit is fetched into the cache once to hash it, so the
    lock serves every platform, not only this one.
    """
    hub = open_hub_arg(hub)
    cache = KernelCache()
    entries = []
    for repo_id, version in sorted(project_dependencies(project_dir).items()):
        resolution = resolve_kernel(repo_id, version, hub=hub)
        hashes, metas = {}, {}
        for variant in resolution.variants:
            path = cache.install(hub, repo_id, resolution.commit, variant)
            hashes[variant] = cached_variant_hash(path)
            metas[variant] = metadata_sha256(read_metadata_bytes(path))
        entries.append(LockEntry(repo_id, resolution.commit, hashes, metas))
    path = Path(project_dir) / LOCKFILE_NAME
    write_lock(path, entries)
    return path, entries


def download_locked(project_dir: Path, *, all_variants: bool = False, hub: HubArg = None,
                    backend: str | None = None) -> list[Path]:
    """Fetch what ``<project_dir>/kernels.lock`` pins (this system's variant, or all of
    them) into the cache, each checked against the lock; return the variant dirs."""
    hub = open_hub_arg(hub)
    paths = []
    for repo_id, entry in sorted(read_lock(Path(project_dir) / LOCKFILE_NAME).items()):
        resolution = resolve_kernel(repo_id, revision=entry.sha, hub=hub, backend=backend)
        variants = resolution.variants if all_variants else [resolution.variant]
        for variant in variants:
            fetched = fetch(resolution, variant)
            verify(fetched.path, variant, [LockValidator(entry)], cached=True).discard()
            paths.append(fetched.path)
    return paths
