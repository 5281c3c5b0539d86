"""Step 1, resolve: a :class:`KernelRequest` becomes a :class:`Resolution` — the commit its
spec names, the variants at that commit, and the one this system loads.

The hub is asked only what the cache cannot answer: a pinned commit's variant list is
cached (a commit never changes), so a warm pinned load asks nothing; refs are asked when a
branch or tag is named, unless offline mode answers from the last refs seen, or a remote
hub's refs were seen within ``KERNELHUB_REFS_TTL`` seconds (:func:`resolve_ref`).
"""

from __future__ import annotations

# PEP 810: imported when first used (inert before Python 3.15)
__lazy_modules__ = {
    "kernelhub.cache", "kernelhub.errors", "kernelhub.hub.base", "kernelhub.hub.calls",
    "kernelhub.hub.search", "kernelhub.load.request", "kernelhub.selection",
    "kernelhub.system", "kernelhub.versions",
}

import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from .. import settings
from ..cache import KernelCache
from ..errors import (
    HubError,
    NoCompatibleVariantError,
    OfflineError,
    RepoNotFoundError,
    VersionSpecError,
)
from ..hub.base import Hub, RemoteHub
from ..hub.calls import hub_name
from ..hub.search import as_search_path, not_found
from ..selection import Selection, select_variant
from ..system import SystemInfo, detect_system
from ..value_types import Record
from ..versions import Refs, VersionSpec, branch_major, resolve
from .request import KernelRequest

if TYPE_CHECKING:  # read only where a signing policy applies
    from ..formats.release_manifest import ReleaseFiles

T = TypeVar("T")


class ReleaseVerdict(Record, frozen=True):
    """What the org's signing policy found in the release files of a commit."""

    metadata_sha256: str | None
    """The sha256 the signed manifest records for the variant's metadata.json; None where
    the policy allows the release unsigned."""


class Resolution(Record, frozen=True):
    """Where a repository spec led: the commit, its variants and the pick for this system."""

    repo_id: str
    hub: Hub
    ref: str
    commit: str
    variants: list[str]
    system: SystemInfo
    selection: Selection
    release: ReleaseVerdict | None = None
    """The release signature's verdict, added by the signing check
    (:class:`kernelhub.load.validators.SignatureValidator`); None: not checked."""

    @property
    def where(self) -> str:
        """The resolved release in messages: ``org/name at <ref> (<commit>)``."""
        return f"{self.repo_id} at {self.ref} ({self.commit[:12]})"

    @property
    def variant(self) -> str:
        """The chosen variant; raises NoCompatibleVariantError listing every rejection."""
        if self.selection.chosen is not None:
            return self.selection.chosen
        if not self.variants:
            raise NoCompatibleVariantError(f"{self.where} has no builds (nothing under build/)")
        lines = "\n".join(f"  {n}: {why}" for n, why in sorted(self.selection.rejected.items()))
        raise NoCompatibleVariantError(
            f"{self.where} has no build this system can load ({self.system.describe()}):\n"
            f"{lines}\nAsk the kernel's maintainers for a build for this system, or pass "
            "backend= to load builds for another backend."
        )


def default_spec(refs: Refs, repo_id: str) -> VersionSpec:
    """With no version or revision: the highest ``v<N>`` branch, else ``main``."""
    majors = [m for b in refs.branches if (m := branch_major(b)) is not None]
    if majors:
        return VersionSpec(major=max(majors))
    if "main" in refs.branches:
        return VersionSpec(ref="main")
    raise VersionSpecError(
        f"{repo_id} has no v<N> branch and no main branch to load by default; "
        f"{refs.describe()}. Pass version= or revision=."
    )


def refs_of(repo_id: str, hub: Hub, cache: KernelCache) -> Refs:
    """The repository's refs from the hub, or from the cache in offline mode."""
    if settings.offline():
        refs = cache.read_refs(hub.key, repo_id)
        if refs is None:
            raise OfflineError(f"the list of versions of {repo_id}")
        return refs
    refs = hub.list_refs(repo_id)
    cache.write_refs(hub.key, repo_id, refs)
    return refs


def recent_refs(repo_id: str, hub: Hub, cache: KernelCache) -> Refs | None:
    """The refs a remote hub sent at most ``KERNELHUB_REFS_TTL`` seconds ago, if cached.

    Only a hub across a network (``remote``) is answered from the cache: a LocalHub's refs
    cost one local git call, and a publish to it is seen by the next load."""
    if not (isinstance(hub, RemoteHub) and hub.remote) or settings.offline():
        return None
    ttl = settings.refs_ttl()
    return cache.read_refs(hub.key, repo_id, max_age=ttl) if ttl > 0 else None


def resolve_ref(repo_id: str, spec: VersionSpec | None, hub: Hub,
                cache: KernelCache) -> tuple[str, str]:
    """The ref and commit ``spec`` names (None: the default). Refs seen within the TTL
    answer if they can; a spec they cannot answer (a branch or release newer than them)
    is asked of the hub, so the cache only ever makes a load see an older state of a
    branch or tag, never fail."""
    if (recent := recent_refs(repo_id, hub, cache)) is not None:
        with contextlib.suppress(VersionSpecError):
            return resolve(spec or default_spec(recent, repo_id), recent, repo_id)
    refs = refs_of(repo_id, hub, cache)
    return resolve(spec or default_spec(refs, repo_id), refs, repo_id)


def per_commit(
    hub: Hub, repo_id: str, commit: str, *,
    read: Callable[[str, str, str], T | None],
    ask: Callable[[str, str], T],
    write: Callable[[str, str, str, T], None],
    what: str,
) -> T:
    """What ``commit`` holds: ``read`` from the cache when there (a commit never changes),
    else ``ask``-ed of the hub and ``write``-n to the cache. Offline mode forbids asking:
    ``what`` is then missing."""
    if (cached := read(hub.key, repo_id, commit)) is not None:
        return cached
    if settings.offline():
        raise OfflineError(what)
    value = ask(repo_id, commit)
    write(hub.key, repo_id, commit, value)
    return value


def serving_hub(hub: Hub, repo_id: str, commit: str | None, cache: KernelCache) -> Hub:
    """The hub that serves ``repo_id``: ``hub`` itself, or for a search path
    (:mod:`kernelhub.hub.search`) the first of its hubs that has the repository, asking
    none where the cache can answer:

    * a pinned ``commit`` whose variant list a hub's cache holds → that hub (first such);
    * offline → the first hub whose cache holds the repository's refs, else one
      OfflineError naming the hubs whose caches were searched;
    * a remote hub whose refs were seen within ``KERNELHUB_REFS_TTL`` → it, unasked;
    * else each hub in turn is asked for the refs (written to the cache): the first that
      has the repository serves it; a hub that fails ends the search (never fall through
      to a same-named repository elsewhere), and the error names the hubs tried.
    """
    path = as_search_path(hub)
    if path is None:
        return hub
    if (known := path.chosen(repo_id)) is not None:
        return known
    if commit is not None:
        for each in path.hubs:
            if cache.read_variants(each.key, repo_id, commit) is not None:
                return path.settle(repo_id, each)
    if settings.offline():
        for each in path.hubs:
            if cache.read_refs(each.key, repo_id) is not None:
                return path.settle(repo_id, each)
        raise OfflineError(f"{repo_id} (searched the cache of every hub on the search path: "
                           f"{path.describe()})")
    misses: list[str] = []
    for each in path.hubs:
        if recent_refs(repo_id, each, cache) is not None:
            return path.settle(repo_id, each)
        try:
            refs = each.list_refs(repo_id)
        except RepoNotFoundError:
            misses.append(f"{hub_name(each)} (no such repository)")
            continue
        except HubError as e:
            if not misses:
                raise
            raise HubError(f"{' '.join(str(e).split())} (the search for {repo_id} stopped "
                           f"there; before it: {'; '.join(misses)})") from e
        cache.write_refs(each.key, repo_id, refs)
        return path.settle(repo_id, each)
    raise not_found(repo_id, misses)


def resolve_request(request: KernelRequest) -> Resolution:
    """The commit ``request`` names, its variants, and the one this system loads; for a
    search path of hubs, the hub that serves the repository (:func:`serving_hub`) is the
    resolution's ``hub``, so caches and messages name the hub a load came from."""
    repo_id, spec = request.repo_id, request.spec
    cache = KernelCache()
    pinned = spec.commit if spec is not None else None
    hub = serving_hub(request.hub, repo_id, pinned, cache)
    if spec is not None and spec.commit is not None:
        ref, commit = spec.commit, spec.commit
    else:
        ref, commit = resolve_ref(repo_id, spec, hub, cache)
    variants = per_commit(hub, repo_id, commit, read=cache.read_variants,
                          ask=hub.list_variants, write=cache.write_variants,
                          what=f"{repo_id} at {commit[:12]}")
    system = detect_system(request.backend)
    return Resolution(repo_id, hub, ref, commit, variants, system,
                      select_variant(variants, system))


def release_files(resolution: Resolution) -> ReleaseFiles:
    """The signed-release files at the resolved commit (cached per commit, like variants)."""
    hub, repo_id, commit = resolution.hub, resolution.repo_id, resolution.commit
    cache = KernelCache()
    return per_commit(hub, repo_id, commit, read=cache.read_release, ask=hub.fetch_release,
                      write=cache.write_release,
                      what=f"the release signature of {repo_id} at {commit[:12]}")
