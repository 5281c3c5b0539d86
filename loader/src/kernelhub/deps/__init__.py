"""Kernel dependencies: a kernel that loads other kernels from a hub.

A variant's ``metadata.json`` lists them as the kernel ecosystem writes them (0.19)::

    "kernel-depends": [{"repo-id": "kernels-community/activation", "version": 1},
                       {"repo-id": "acme/helpers", "revision": "v2.1.0"}]

— exactly one of ``version`` (an int major: branch ``v<N>``) and ``revision`` (a branch,
tag or commit) per entry, no other keys. Loading resolves them as a tree before anything
is imported: every dependency to a commit and a variant for this system, recursively; a
dependency on a kernel already on the path to it is a cycle, and a pin nothing satisfies
(no such version, no build for this system) names the chain that asked for it — each a
one-line :class:`~kernelhub.errors.DependencyError`. Dependencies load first; while a
kernel's own code runs, :func:`get_kernel_dep` returns the modules of its direct
dependencies (the ecosystem's API, re-exported by the compatibility module). Two kernels
may depend on different versions of a third: each gets its own, since builds of
different versions have different op namespaces.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from contextvars import ContextVar
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from .. import versions
from ..errors import KernelHubError
from ..lazy_names import deferred
from ..value_types import Record

if TYPE_CHECKING:
    from importlib import util as importlib_util

    from ..formats.metadata import Metadata
else:
    importlib_util = deferred("importlib.util")

KERNEL_DEPENDS = "kernel-depends"


class DependencyError(KernelHubError, ValueError):
    """A kernel dependency is malformed, cyclic, or cannot be satisfied."""


class KernelDependency(Record, frozen=True):
    """One entry of ``kernel-depends``."""

    repo_id: str
    version: int | None = None
    revision: str | None = None

    def __post_init__(self, *_args: object, **_kwargs: object) -> None:
        if (self.version is None) == (self.revision is None):
            raise DependencyError(f"dependency {self.repo_id}: give exactly one of version "
                                  "and revision")

    @property
    def spec(self) -> str:
        return f"v{self.version}" if self.version is not None else f"{self.revision}"

    def __str__(self) -> str:
        return f"{self.repo_id}@{self.spec}"

    def to_json(self) -> dict[str, Any]:
        key = "version" if self.version is not None else "revision"
        return {"repo-id": self.repo_id, key: self.version if self.version is not None
                else self.revision}


def parse_kernel_depends(value: object, where: str) -> tuple[KernelDependency, ...]:
    """``kernel-depends`` from metadata.json (absent: no dependencies), checked as strictly
    as the ecosystem's reader: a list of objects with ``repo-id`` and exactly one of an int
    ``version`` or a string ``revision``."""
    if value is None:
        return ()
    if not isinstance(value, list):
        raise DependencyError(f"{where}: {KERNEL_DEPENDS} must be a list")
    found = []
    for i, entry in enumerate(value):
        at = f"{where}: {KERNEL_DEPENDS}[{i}]"
        if not isinstance(entry, dict) or set(entry) - {"repo-id", "version", "revision"}:
            raise DependencyError(f"{at} must be an object with repo-id and version or "
                                  "revision (no other keys)")
        repo, version, revision = entry.get("repo-id"), entry.get("version"), entry.get("revision")
        try:
            versions.check_repo_id(repo)
        except KernelHubError:
            raise DependencyError(f"{at}: repo-id {repo!r} is not 'org/name'") from None
        if version is not None and (not isinstance(version, int) or isinstance(version, bool)
                                    or version < 0):
            raise DependencyError(f"{at}: version must be a non-negative integer")
        if revision is not None and (not isinstance(revision, str) or not revision):
            raise DependencyError(f"{at}: revision must be a branch, tag or commit")
        if (version is None) == (revision is None):
            raise DependencyError(f"{at}: give exactly one of version and revision")
        assert isinstance(repo, str)
        found.append(KernelDependency(repo, version, revision))
    return tuple(found)


def declared_depends(metadata: Metadata, where: str) -> tuple[KernelDependency, ...]:
    """The ``kernel-depends`` a variant's metadata declares (``where`` names it in errors):
    the one reading of them for a load, a dependency tree and a lock alike."""
    return parse_kernel_depends(metadata.extra.get(KERNEL_DEPENDS), where)


class Located(Record, frozen=True):
    """Where one kernel of the tree resolved to: enough to fetch, lock and describe it."""

    name: str
    """The repo id, or the local path of the root."""
    commit: str | None
    variant: str
    depends: tuple[KernelDependency, ...]
    python_depends: tuple[str, ...] = ()
    handle: Any = None
    """Whatever the resolver needs to fetch it later (a Resolution, a path)."""


def located(name: str, commit: str | None, variant: str, metadata: Metadata, where: str,
            handle: object) -> Located:
    """One kernel of a tree as its variant's metadata describes it (``where`` names the
    variant in errors): the one reading of a variant into a tree node, whoever found it (a
    load's snapshot, ``info --dep-tree``'s fetch)."""
    return Located(name, commit, variant, declared_depends(metadata, where),
                   tuple(metadata.python_depends), handle)


class DepNode(Record, frozen=True):
    location: Located
    deps: tuple[tuple[str, DepNode], ...] = ()
    """(repo id, node) per direct dependency, in declaration order."""

    def walk(self) -> Iterator[DepNode]:
        """Every node, dependencies before the kernels that need them (load order)."""
        for _, node in self.deps:
            yield from node.walk()
        yield self

    def to_json(self) -> dict[str, Any]:
        """``{repo_id: {…its dependencies…}}`` for the direct dependencies, as the ecosystem's
        ``info --dep-tree --json`` nests them."""
        return {repo: node.to_json() for repo, node in self.deps}

    def lines(self, prefix: str = "") -> list[str]:
        """The tree drawn with ASCII branches, one dependency per line."""
        out = []
        for i, (_, node) in enumerate(self.deps):
            last = i == len(self.deps) - 1
            loc = node.location
            where = f"{loc.commit[:12]} " if loc.commit else ""
            out.append(f"{prefix}{'`-- ' if last else '|-- '}{loc.name} ({where}{loc.variant})")
            out += node.lines(prefix + ("    " if last else "|   "))
        return out


Resolver = Callable[[KernelDependency], Located]
"""Resolve one dependency to a located kernel (raise a KernelHubError when nothing fits)."""


def resolve_tree(root: Located, resolve: Resolver) -> DepNode:
    """The dependency tree under ``root``; DependencyError for a cycle or an unsatisfiable
    pin, naming the chain.

    Each distinct dependency is resolved once and its subtree shared wherever it is
    asked for again: a diamond (two kernels needing a third, level after level) costs
    one resolution per kernel, not one per path, which doubles with every level."""
    return _resolve(root, resolve, ((root.name, root.name),), {})


_Subtree = tuple[DepNode, frozenset[str]]
"""A resolved dependency's node and every repo id below it (itself included)."""


def _resolve(location: Located, resolve: Resolver, path: tuple[tuple[str, str], ...],
             done: dict[KernelDependency, _Subtree]) -> DepNode:
    """``path``: (repo id, how it was asked for) from the root down to ``location``;
    ``done``: the subtrees resolved so far in this tree."""
    nodes = []
    on_path = {repo for repo, _ in path}
    for dep in location.depends:
        chain = " -> ".join([*(label for _, label in path), str(dep)])
        if dep.repo_id in on_path:
            raise DependencyError(f"kernel dependency cycle: {chain}")
        shared = done.get(dep)
        if shared is not None and not shared[1] & on_path:
            nodes.append((dep.repo_id, shared[0]))
            continue  # a subtree reaching the path is resolved again: it names the cycle
        try:
            found = resolve(dep) if shared is None else shared[0].location
        except DependencyError:
            raise
        except KernelHubError as e:
            first = str(e).splitlines()[0].rstrip(":")
            raise DependencyError(f"cannot satisfy {chain}: {first}") from None
        node = _resolve(found, resolve, (*path, (dep.repo_id, str(dep))), done)
        below = frozenset({dep.repo_id}).union(*(done[d][1] for d in found.depends))
        done[dep] = (node, below)
        nodes.append((dep.repo_id, node))
    return DepNode(location, tuple(nodes))


# -- while a kernel loads ---------------------------------------------------------------

_LOADING: ContextVar[Mapping[str, ModuleType] | None] = ContextVar("kernelhub_kernel_deps",
                                                                   default=None)


@contextmanager
def providing(deps: Mapping[str, ModuleType]) -> Iterator[None]:
    """Make ``deps`` (repo id → loaded module) what :func:`get_kernel_dep` returns while
    the kernel's own code runs (the importer wraps the kernel's import in this) — and what
    the ecosystem's own ``kernels.get_kernel_dep`` returns, where ``import kernels`` is the
    ecosystem's package (Transformers 5.25 always installs it): a tree written for the
    ecosystem calls that one."""
    token = _LOADING.set(dict(deps))
    try:
        with _ecosystem_providing(deps):
            yield
    finally:
        _LOADING.reset(token)


def _ecosystem_providing(deps: Mapping[str, ModuleType]) -> AbstractContextManager[object]:
    """The ecosystem's own context for ``deps`` (its ``use_kernel_deps``: 0.19 keeps it in
    ``kernels._internals.deps``, 0.17/0.18 in ``kernels.deps``), when ``import kernels``
    is its package; nothing to enter otherwise (kernelhub's compatibility module serves
    :func:`get_kernel_dep` itself, and a kernel without dependencies needs neither)."""
    if not deps:
        return nullcontext()
    spec = importlib_util.find_spec("kernels")
    if spec is None or spec.origin is None or "kernelhub" in Path(spec.origin).parts:
        return nullcontext()
    for name in ("kernels._internals.deps", "kernels.deps"):
        try:
            use = getattr(importlib.import_module(name), "use_kernel_deps", None)
        except ImportError:
            continue
        if callable(use):
            return use(dict(deps))
    return nullcontext()


def get_kernel_dep(repo_id: str) -> ModuleType:
    """One of the loading kernel's dependencies (declared in its ``kernel-depends``).

    Only callable while a kernel is being loaded, from its own code, as the ecosystem's
    ``get_kernel_dep``.
    """
    deps = _LOADING.get()
    if deps is None:
        raise DependencyError("get_kernel_dep() only works while a kernel is being loaded, "
                              "from the kernel's own code")
    module = deps.get(repo_id)
    if module is None:
        raise DependencyError(
            f"{repo_id} is not a dependency of the loading kernel (it has: "
            f"{', '.join(sorted(deps)) or 'none'}); add it to kernel-depends in build.toml")
    return module
