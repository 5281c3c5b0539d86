"""A kernel's dependencies (``kernel-depends``), loaded before it, as a tree.

:func:`load_with_dependencies` takes the kernel's verified snapshot, resolves its
dependencies the way any load resolves (each one a request on the same hub, with the
same backend and trust, through the same checks; for a locked load, at the commit its
lock pins, checked against that pin's hashes), recursively, into a tree of verified
snapshots (:func:`kernelhub.deps.resolve_tree`: a cycle or a pin nothing satisfies is one
error naming the chain, and nothing has been imported then). It then imports the tree
bottom-up: each kernel's code runs with its direct dependencies served by
:func:`kernelhub.deps.get_kernel_dep`. Every snapshot is the one read of that variant,
and it is what is imported.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType

from ..deps import DepNode, KernelDependency, Located, declared_depends, providing, resolve_tree
from .importer import import_verified
from .request import KernelRequest, kernel_request
from .verify import Snapshot


def _located(name: str, snapshot: Snapshot) -> Located:
    metadata = snapshot.verified.metadata
    depends = declared_depends(metadata, str(snapshot.verified.source))
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
        found = take(_dependency_request(dep, parent))
        taken.append(found)
        return _located(dep.repo_id, found)

    try:
        tree = resolve_tree(root, resolve)
    except BaseException:
        for each in taken:
            each.discard()
        raise
    return _import_tree(tree)


def _dependency_request(dep: KernelDependency, parent: KernelRequest | None) -> KernelRequest:
    """How ``dep`` loads for ``parent``: on its hub with its backend and trust; for a
    locked load, at the commit the same lock pins, checked against that pin's hashes (a
    dependency the lock does not pin is refused, naming the chain: a fresh resolution
    would load what nobody locked)."""
    if parent is None:
        return kernel_request(dep.repo_id, dep.version, dep.revision)
    if parent.pins is not None:
        pin = parent.pins.pick(dep.repo_id)
        return kernel_request(dep.repo_id, revision=pin.sha, hub=parent.hub,
                              backend=parent.backend,
                              trust_remote_code=parent.trust_remote_code, lock=pin,
                              pins=parent.pins)
    return kernel_request(dep.repo_id, dep.version, dep.revision, hub=parent.hub,
                          backend=parent.backend, trust_remote_code=parent.trust_remote_code)


def _import_tree(node: DepNode, done: dict[int, ModuleType] | None = None) -> ModuleType:
    """Import ``node`` after its dependencies; a subtree shared by two kernels (one
    node, :func:`kernelhub.deps.resolve_tree` shares them) is imported once."""
    done = {} if done is None else done
    if (module := done.get(id(node))) is not None:
        return module
    deps = {repo: _import_tree(child, done) for repo, child in node.deps}
    snapshot = node.location.handle
    assert isinstance(snapshot, Snapshot)
    with providing(deps):
        module = import_verified(snapshot.verified)
    done[id(node)] = module
    return module
