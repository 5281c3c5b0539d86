"""Resolving a kernel's dependency tree through the hubs (:mod:`kernelhub.deps` has the
format and the tree rules): each dependency to a commit and this system's variant, its
``metadata.json`` fetched (and verified) to find its own dependencies."""

from __future__ import annotations

from pathlib import Path

from . import api
from .deps import KernelDependency, Located, Resolver, declared_depends
from .formats.metadata import Metadata, read_metadata
from .hub.base import Hub
from .load import fetch


def _located(name: str, commit: str | None, variant_dir: Path, metadata: Metadata,
             handle: object) -> Located:
    depends = declared_depends(metadata, str(variant_dir))
    return Located(name, commit, variant_dir.name, depends, tuple(metadata.python_depends),
                   handle)


def locate_local(path: Path, backend: str | None = None) -> Located:
    """The root of a tree loaded from a local build (``path`` as get_local_kernel takes it)."""
    variant_dir = api.find_local_variant(path, backend=backend)
    return _located(str(path), None, variant_dir, read_metadata(variant_dir), variant_dir)


def locate_hub(resolution: api.Resolution) -> Located:
    """A kernel of the tree resolved on a hub (fetches the chosen variant: its metadata
    names its own dependencies)."""
    variant_dir = fetch.fetch(resolution).path
    return _located(resolution.repo_id, resolution.commit, variant_dir,
                    read_metadata(variant_dir), resolution)


def hub_resolver(hub: Hub | str | None, backend: str | None = None) -> Resolver:
    """Resolve dependencies on ``hub`` for this system (or ``backend``)."""

    def resolve(dep: KernelDependency) -> Located:
        resolution = api.resolve_kernel(dep.repo_id, dep.version, dep.revision, hub=hub,
                                        backend=backend)
        resolution.variant  # noqa: B018 - raises, naming every rejection, when none fits
        return locate_hub(resolution)

    return resolve
