"""A kernel's dependencies (``kernel-depends``), loaded before it, as a tree.

:func:`load_tree` resolves the root's dependencies recursively into a tree
(:func:`kernelhub.deps.resolve_tree`: a cycle or a pin nothing satisfies is one error
naming the chain, and nothing has been imported then), then imports it bottom-up: each
kernel's code runs with its direct dependencies served by
:func:`kernelhub.deps.get_kernel_dep`.

The load path calls this, never the other way round: how a dependency is read (a request
through the pipeline's own checks) and how a node is imported are the caller's steps,
passed in, so the tree rules import nothing of the load path.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType

from . import DepNode, KernelDependency, Located, Resolver, providing, resolve_tree

Step = Callable[[Located], object]
"""Something the caller does to one node of the tree (its ``handle`` is the caller's)."""


def load_tree(root: Located, resolve: Resolver, import_one: Callable[[Located], ModuleType],
              discard: Step) -> ModuleType:
    """Import ``root`` after its dependencies, each found by ``resolve``; ``import_one``
    imports one node (its dependencies are served meanwhile); on a failed resolution every
    node read so far is given to ``discard`` before the error leaves. (A root without
    dependencies needs none of this: the load path imports it itself.)"""
    taken: list[Located] = [root]

    def resolve_taking(dep: KernelDependency) -> Located:
        found = resolve(dep)
        taken.append(found)
        return found

    try:
        tree = resolve_tree(root, resolve_taking)
    except BaseException:
        for each in taken:
            discard(each)
        raise
    return _import_tree(tree, import_one, {})


def _import_tree(node: DepNode, import_one: Callable[[Located], ModuleType],
                 done: dict[int, ModuleType]) -> ModuleType:
    """Import ``node`` after its dependencies; a subtree shared by two kernels (one
    node, :func:`kernelhub.deps.resolve_tree` shares them) is imported once."""
    if (module := done.get(id(node))) is not None:
        return module
    deps = {repo: _import_tree(child, import_one, done) for repo, child in node.deps}
    with providing(deps):
        module = import_one(node.location)
    done[id(node)] = module
    return module
