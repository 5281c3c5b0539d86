"""A kernel's dependencies (``kernel-depends``), loaded before it, as a tree.

:func:`load_with_dependencies` takes the kernel's verified snapshot, resolves its
dependencies the way any load resolves (each one a request on the same hub, with the
same backend and trust, through the same checks), recursively, into a tree of verified
snapshots (:func:`kernelhub.deps.resolve_tree`: a cycle or a pin nothing satisfies is one
error naming the chain, and nothing has been imported then). It then imports the tree
bottom-up: each kernel's code runs with its direct dependencies served by
:func:`kernelhub.deps.get_kernel_dep`. Every snapshot is the one read of that variant,
and it is what is imported.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType

from ..deps import (
    KERNEL_DEPENDS,
    DepNode,
    KernelDependency,
    Located,
    parse_kernel_depends,
    providing,
    resolve_tree,
)
from ..importer import import_verified
from .request import KernelRequest, kernel_request
from .verify import Snapshot


def _located(name: str, snapshot: Snapshot) -> Located:
    metadata = snapshot.verified.metadata
    depends = parse_kernel_depends(metadata.extra.get(KERNEL_DEPENDS),
                                   str(snapshot.verified.source))
    commit = snapshot.cached.parent.name if snapshot.cached is not None else None
    return Located(name, commit, snapshot.variant_name, depends,
                   tuple(metadata.python_depends), snapshot)


def load_with_dependencies(name: str, snapshot: Snapshot, parent: KernelRequest | None,
                           take: Callable[[KernelRequest], Snapshot]) -> ModuleType:
    """Import ``snapshot`` (the kernel ``name``) after its dependencies, resolved on
    ``parent``'s hub with its backend and trust (the default hub and trust for a local
    build: ``parent`` None); ``take`` reads a dependency's request into a checked snapshot
    (the pipeline's own step)."""
    root = _located(name, snapshot)
    if not root.depends:
        return import_verified(snapshot.verified)
    taken: list[Snapshot] = [snapshot]

    def resolve(dep: KernelDependency) -> Located:
        request = kernel_request(
            dep.repo_id, dep.version, dep.revision,
            hub=parent.hub if parent is not None else None,
            backend=parent.backend if parent is not None else None,
            trust_remote_code=parent.trust_remote_code if parent is not None else False)
        found = take(request)
        taken.append(found)
        return _located(dep.repo_id, found)

    try:
        tree = resolve_tree(root, resolve)
    except BaseException:
        for each in taken:
            each.discard()
        raise
    return _import_tree(tree)


def _import_tree(node: DepNode) -> ModuleType:
    deps = {repo: _import_tree(child) for repo, child in node.deps}
    snapshot = node.location.handle
    assert isinstance(snapshot, Snapshot)
    with providing(deps):
        return import_verified(snapshot.verified)
