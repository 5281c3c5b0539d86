"""The pipeline, top to bottom: request → resolve → fetch → verify → import.

Every path that yields loadable code runs here, with the checks
:func:`~kernelhub.load.validators.validators_for` chooses: :func:`load` (``get_kernel``, locked loads, layer repositories, the
compatibility module), :func:`locate` (the variant a load would import, checked but not
imported: ``locate_kernel``, ``kernels.install_kernel``) and :func:`load_local` (a build
named by its path; one inside the kernel cache is a hub variant, and its org's signing
policy applies to it as to any load from the hub).
"""

from __future__ import annotations

# PEP 810: imported when first used (inert before Python 3.15)
__lazy_modules__ = {
    "kernelhub.deps", "kernelhub.load.fetch",
    "kernelhub.load.importer", "kernelhub.load.request", "kernelhub.load.resolve",
    "kernelhub.load.validators", "kernelhub.load.verify", "kernelhub.versions",
}

from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

from .. import settings
from ..deps import KernelDependency, Located, located
from ..versions import is_commit_id
from .fetch import fetch
from .importer import import_verified
from .request import KernelRequest, dependency_request
from .resolve import ReleaseVerdict, resolve_request
from .validators import SignatureValidator, Validator, validators_for
from .verify import Snapshot, verify, verify_fetched

_memo: dict[tuple[object, ...], ModuleType] = {}
"""What a request loaded in this process, keyed by the request and what its checks depend
on (policy, lock), so repeated loads cost a dict lookup and a changed policy checks again."""


def load(request: KernelRequest) -> ModuleType:
    """Load what ``request`` names: checked, fetched if needed, read once, imported."""
    checks = admitted(request)
    key = (request.hub.key, request.repo_id, request.describe(), request.backend,
           request.pins.key() if request.pins is not None else None,
           *(check.key() for check in checks))
    if (module := _memo.get(key)) is not None:
        return module
    module = _import_with_dependencies(request.repo_id, _snapshot(request, checks), request)
    _memo[key] = module
    return module


def checked_snapshot(request: KernelRequest) -> Snapshot:
    """The verified snapshot a load of ``request`` would import, with every check run
    (a kernel's dependencies are read this way before anything of the tree is imported)."""
    return _snapshot(request, admitted(request))


def locate(request: KernelRequest) -> Path:
    """The cache directory of the variant :func:`load` would import, fetched and checked
    like a load (trust, signature, lock), but not imported."""
    snapshot = _snapshot(request, admitted(request))
    snapshot.discard()
    assert snapshot.cached is not None
    return snapshot.cached


def admitted(request: KernelRequest) -> list[Validator]:
    """The checks of ``request``, once each has admitted the request itself (before the
    hub is asked anything)."""
    checks = validators_for(request.repo_id, request)
    for check in checks:
        check.on_request(request)
    return checks


def _snapshot(request: KernelRequest, checks: list[Validator]) -> Snapshot:
    resolution = resolve_request(request)
    for check in checks:
        resolution = check.on_resolution(resolution)
    return checked(verify_fetched(fetch(resolution)), checks)


def checked(snapshot: Snapshot, checks: Sequence[Validator]) -> Snapshot:
    """``snapshot`` once every check has given its verdict on it; a refused snapshot is
    removed before the error leaves."""
    try:
        for check in checks:
            check.on_snapshot(snapshot)
    except BaseException:
        snapshot.discard()
        raise
    return snapshot


def load_local(path: Path) -> ModuleType:
    """Import the variant dir at ``path``: naming it trusts it, but a variant inside the
    kernel cache came from a hub, and its org's signing policy applies."""
    path = Path(path).resolve()
    cached = _cached_variant(path)
    checks = validators_for(cached[1] if cached is not None else None)
    release = _cached_release(checks, *cached) if cached is not None else None
    snapshot = checked(verify(path, path.name, cached=cached is not None, release=release),
                       checks)
    return _import_with_dependencies(str(path), snapshot, None)


def _import_with_dependencies(name: str, snapshot: Snapshot,
                              parent: KernelRequest | None) -> ModuleType:
    """Import ``snapshot`` (the kernel ``name``) after its dependencies, each read as a
    request on ``parent``'s hub (:func:`~kernelhub.load.request.dependency_request`) into
    a checked snapshot before anything of the tree is imported."""

    root = _located(name, snapshot)
    if not root.depends:  # most kernels: imported here, without a round trip through deps
        return import_verified(snapshot.verified)

    from ..deps.loading import load_tree  # a kernel with dependencies only

    def resolve(dep: KernelDependency) -> Located:
        return _located(dep.repo_id, checked_snapshot(dependency_request(dep, parent)))

    return load_tree(root, resolve, _import_node, _discard_node)


def _located(name: str, snapshot: Snapshot) -> Located:
    commit = snapshot.cached.parent.name if snapshot.cached is not None else None
    return located(name, commit, snapshot.variant_name, snapshot.verified.metadata,
                   str(snapshot.verified.source), snapshot)


def _import_node(node: Located) -> ModuleType:
    return import_verified(_node_snapshot(node).verified)


def _discard_node(node: Located) -> None:
    _node_snapshot(node).discard()


def _node_snapshot(node: Located) -> Snapshot:
    assert isinstance(node.handle, Snapshot)
    return node.handle


def _cached_variant(path: Path) -> tuple[str, str, str, str] | None:
    """(hub key, repo id, commit, variant) of a variant dir inside the kernel cache."""
    try:
        parts = path.relative_to(settings.cache_dir().expanduser().resolve()).parts
    except (ValueError, OSError):
        return None
    if len(parts) != 5 or not is_commit_id(parts[3]):
        return None
    hub_key, org, name, commit, variant = parts
    return hub_key, f"{org}/{name}", commit, variant


def _cached_release(checks: list[Validator], hub_key: str, repo_id: str, commit: str,
                    variant: str) -> ReleaseVerdict | None:
    """The release signature's verdict on a cached variant, from the release files the
    cache holds (None: no signing policy applies)."""
    for check in checks:
        if isinstance(check, SignatureValidator):
            return check.on_cached(hub_key, repo_id, commit, variant)
    return None
