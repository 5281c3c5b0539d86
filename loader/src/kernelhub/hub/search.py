"""A search path of hubs: each repository is served by the first hub in it that has it.

Where users' kernels live is not ours to choose: the main job's kernels are in the
embedded LocalHub, a Transformers user's on the Hugging Face Hub or a team server. The
model is pip's index order, read strictly as "first index that has the project wins"
(uv's ``first-index``, not pip's merge of every index): a repository is never assembled
from two hubs, and a later hub can never shadow an earlier one by publishing a higher
version under the same name (the dependency-confusion attack a merge invites).

A hub that does not have the repository is passed over; a hub that fails (unreachable,
a server error) ends the search with that failure, because the next hub's repository
of the same name may be someone else's code (docs/decisions.md, "A search path of
hubs"). The cache-aware choice (a warm load asks no hub) is
:func:`kernelhub.load.resolve.serving_hub`; this module is the path and the plain
online choice, for callers that hold a hub and ask it directly.
"""

from __future__ import annotations

__lazy_modules__ = {"kernelhub.errors", "kernelhub.hub.base", "kernelhub.hub.calls"}  # PEP 810: imported when first used

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import RepoNotFoundError
from .base import Hub
from .calls import GuardedHub, guard, hub_name

if TYPE_CHECKING:
    from ..formats.release_manifest import ReleaseFiles
    from ..versions import Refs


class SearchPath:
    """Hubs in order; a repository is read from the first that has it (module docstring).

    Implements the reading protocol by delegating each call to the hub that serves the
    repository, chosen once per repository for this object's life (one load).
    """

    remote = False
    """Never answered from the refs cache as a whole: each hub in it is, on its own terms."""

    def __init__(self, hubs: Sequence[Hub]) -> None:
        if not hubs:
            raise ValueError("a search path needs at least one hub")
        self.hubs: tuple[Hub, ...] = tuple(guard(h) for h in hubs)
        self._chosen: dict[str, Hub] = {}

    def __repr__(self) -> str:
        return f"SearchPath({', '.join(repr(h) for h in self.hubs)})"

    @property
    def key(self) -> str:
        """Identity for in-process memo keys only: the cache is always keyed by the hub
        that served a load (:attr:`Resolution.hub`), so a variant fetched through a
        search path is the same cache entry as one fetched from that hub by name."""
        joined = "\n".join(h.key for h in self.hubs)
        return f"path-{hashlib.sha256(joined.encode()).hexdigest()[:12]}"

    def describe(self) -> str:
        """The hubs in order, as messages name them."""
        return ", then ".join(hub_name(h) for h in self.hubs)

    # -- choosing ----------------------------------------------------------------------

    def chosen(self, repo_id: str) -> Hub | None:
        """The hub already chosen for ``repo_id`` by this path, if any."""
        return self._chosen.get(repo_id)

    def settle(self, repo_id: str, hub: Hub) -> Hub:
        """Record ``hub`` (one of :attr:`hubs`) as the one serving ``repo_id``."""
        self._chosen[repo_id] = hub
        return hub

    def hub_for(self, repo_id: str) -> Hub:
        """The first hub that has ``repo_id``, asking each in turn (no cache): what a
        direct caller of the protocol gets. RepoNotFoundError names every hub tried."""
        if (known := self._chosen.get(repo_id)) is not None:
            return known
        misses: list[str] = []
        for hub in self.hubs:
            try:
                hub.list_refs(repo_id)
            except RepoNotFoundError:
                misses.append(f"{hub_name(hub)} (no such repository)")
                continue
            return self.settle(repo_id, hub)
        raise not_found(repo_id, misses)

    # -- the reading protocol, delegated -----------------------------------------------

    def list_refs(self, repo_id: str) -> Refs:
        return self.hub_for(repo_id).list_refs(repo_id)

    def list_variants(self, repo_id: str, commit: str) -> list[str]:
        return self.hub_for(repo_id).list_variants(repo_id, commit)

    def fetch_variant(self, repo_id: str, commit: str, variant: str, dest: Path) -> None:
        self.hub_for(repo_id).fetch_variant(repo_id, commit, variant, dest)

    def fetch_release(self, repo_id: str, commit: str) -> ReleaseFiles:
        return self.hub_for(repo_id).fetch_release(repo_id, commit)

    def trusted_orgs(self) -> frozenset[str]:
        """A path as a whole vouches for nothing: the trust a hub's operator declares
        applies to what that hub serves, checked once the serving hub is known
        (:class:`kernelhub.load.validators.TrustValidator`)."""
        return frozenset()


def not_found(repo_id: str, misses: Sequence[str]) -> RepoNotFoundError:
    """One error naming every hub of the path that was asked (each said it has no such
    repository; its own longer message is left out to keep this one line short)."""
    tried = "; ".join(" ".join(m.split()) for m in misses)
    return RepoNotFoundError(
        f"no hub on the search path has {repo_id} (tried, in order: {tried}); check the "
        "name, set HF_TOKEN for a private repository, or add its hub to KERNELHUB_HUB"
    )


def is_search_path(hub: object) -> bool:
    """Whether ``hub`` (guarded or not) is a :class:`SearchPath`."""
    return isinstance(_unguarded(hub), SearchPath)


def as_search_path(hub: object) -> SearchPath | None:
    """``hub`` as the SearchPath it is (guarded or not), else None."""
    inner = _unguarded(hub)
    return inner if isinstance(inner, SearchPath) else None


def _unguarded(hub: object) -> object:
    return hub.inner if isinstance(hub, GuardedHub) else hub
