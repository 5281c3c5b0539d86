"""Step 2, fetch: a :class:`Resolution`'s chosen variant, present in the cache.

A variant in the cache is only ever a place to read from: what is imported is decided
by the next step, which reads it once. Offline mode allows no fetch.
"""

from __future__ import annotations

__lazy_modules__ = {"kernelhub.cache", "kernelhub.errors", "kernelhub.load.resolve"}  # PEP 810: imported when first used

from pathlib import Path

from .. import settings
from ..cache import KernelCache
from ..errors import OfflineError
from ..value_types import Record
from .resolve import Resolution


class Fetched(Record, frozen=True):
    """A resolved variant, present in the cache at ``path`` (not yet read)."""

    resolution: Resolution
    variant: str
    path: Path
    fresh: bool
    """Whether this call fetched it (False: it was cached already)."""


def fetch(resolution: Resolution, variant: str | None = None) -> Fetched:
    """Make ``variant`` (default: the chosen one) present in the cache."""
    variant = variant or resolution.variant
    cache = KernelCache()
    hub, repo_id, commit = resolution.hub, resolution.repo_id, resolution.commit
    if (path := cache.installed(hub.key, repo_id, commit, variant)) is not None:
        return Fetched(resolution, variant, path, False)
    if settings.offline():
        raise OfflineError(f"{variant} of {repo_id} at {commit[:12]}")
    return Fetched(resolution, variant, cache.install(hub, repo_id, commit, variant), True)
