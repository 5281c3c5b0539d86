"""What ``kernelhub lock`` pins: the project's kernels and their whole dependency tree.

The ecosystem's locked loads (``get_locked_kernel``, 0.19's ``load_kernel`` from a lock)
look every ``kernel-depends`` entry of a kernel they load up in the lock by the exact
dependency (repo id and version or revision, as declared) and fail on one it lacks; so a
lock of the project's direct dependencies alone does not load a kernel that declares any.
The walk here is theirs in shape (``lock_kernel_tree``): each kernel at its locked commit,
the dependencies every one of its variants declares (a lock serves every platform, and
variants may declare different ones), recursively, each declared dependency locked once
and a cycle refused (:func:`kernelhub.deps.resolve_tree` names the chain). It differs in
one refusal: a tree that needs two commits of one repository cannot be locked, since
kernelhub's lock records hashes per repository and its locked loads take one pin each.
"""

from __future__ import annotations

from collections.abc import Mapping

from .deps import DepNode, KernelDependency, Located, declared_depends, resolve_tree
from .errors import LockFileError
from .formats.metadata import METADATA_FILE, parse_metadata, read_metadata_bytes
from .formats.release_manifest import metadata_sha256
from .hub.calls import hub_name
from .hub.hashes import cached_variant_hash
from .load.fetch import fetch
from .load.request import HubArg, kernel_request
from .load.resolve import Resolution, resolve_request
from .lock import LockEntry
from .value_types import Record
from .versions import shown_name

EVERY_VARIANT = "every variant"
"""The variant a locked node stands for: the lock hashes all of them."""


class LockedTree(Record, frozen=True):
    """What a lock records: one hashed entry per repository, and every declared dependency
    that must find its pin."""

    entries: tuple[LockEntry, ...]
    """By repo id: the project's kernels and every kernel they depend on."""
    dependencies: tuple[KernelDependency, ...]
    """Every ``kernel-depends`` entry of the tree, as declared, each once."""


def lock_tree(versions: Mapping[str, int | str], *, hub: HubArg = None) -> LockedTree:
    """Resolve ``versions`` (repo id → what the project asks for) and every kernel they
    depend on, fetching and hashing each variant at each locked commit."""
    found: dict[tuple[str, int | str | None, str | None], Located] = {}

    def locate(repo_id: str, version: int | str | None, revision: str | None) -> Located:
        key = (repo_id, version, revision)
        if key not in found:  # a dependency shared by two kernels is fetched once
            found[key] = _locate(resolve_request(kernel_request(repo_id, version, revision,
                                                                hub=hub)))
        return found[key]

    def resolve(dep: KernelDependency) -> Located:
        return locate(dep.repo_id, dep.version, dep.revision)

    entries: dict[str, tuple[LockEntry, str]] = {}
    dependencies: list[KernelDependency] = []
    seen: set[int] = set()
    for repo_id, version in sorted(versions.items()):
        tree = resolve_tree(locate(repo_id, version, None), resolve)
        asked = f"v{version}" if isinstance(version, int) else version
        _collect(tree, f"{repo_id}@{asked}", entries, dependencies, seen)
    return LockedTree(tuple(entry for _, (entry, _) in sorted(entries.items())),
                      tuple(dependencies))


def _locate(resolution: Resolution) -> Located:
    """The kernel at its resolved commit: every variant fetched and hashed, and the
    dependencies any of them declares (in the order first declared)."""
    hashes, metas = {}, {}
    depends: list[KernelDependency] = []
    for variant in resolution.variants:
        path = fetch(resolution, variant).path
        raw = read_metadata_bytes(path)
        hashes[variant] = cached_variant_hash(path)
        metas[variant] = metadata_sha256(raw)
        declared = declared_depends(parse_metadata(raw, str(path / METADATA_FILE)), str(path))
        depends += [dep for dep in declared if dep not in depends]
    entry = LockEntry(resolution.repo_id, resolution.commit, hashes, metas,
                      hub_name(resolution.hub))
    return Located(resolution.repo_id, resolution.commit, EVERY_VARIANT, tuple(depends),
                   handle=entry)


def _collect(node: DepNode, chain: str, entries: dict[str, tuple[LockEntry, str]],
             dependencies: list[KernelDependency], seen: set[int]) -> None:
    """Add ``node`` (reached by ``chain``) and its subtree to ``entries`` (repo id → entry
    and the first chain that needed it) and ``dependencies``; a subtree the tree shares
    (``seen``: the nodes collected so far) is collected once."""
    if id(node) in seen:
        return
    seen.add(id(node))
    entry = node.location.handle
    assert isinstance(entry, LockEntry)
    first, first_chain = entries.setdefault(entry.repo_id, (entry, chain))
    if first.sha != entry.sha:
        raise LockFileError(
            f"cannot lock {shown_name(entry.repo_id)} at two commits ({first.sha[:12]} for "
            f"{first_chain}, {entry.sha[:12]} for {chain}); a kernelhub locked load takes "
            "one commit per repository: make every kernel ask for one version of it")
    for dep, (_, child) in zip(node.location.depends, node.deps, strict=True):
        if dep not in dependencies:
            dependencies.append(dep)
        _collect(child, f"{chain} -> {dep}", entries, dependencies, seen)
