"""A variant built from a dirty git tree: loaded, with one warning.

``metadata.json``'s ``provenance`` records the git state of the kernel's sources
(``kernel: {commit, dirty}``) and, from the ecosystem's 0.19 builder on, of the builder
itself (``kernel-builder: {version, commit, dirty}``). A build from uncommitted changes is
not identified by its commit — it may not be reproducible — so the loader says so once
per variant (as the ecosystem's loader does), and loads it.
"""

from __future__ import annotations

__lazy_modules__ = {"kernelhub.formats.metadata"}  # PEP 810: imported when first used

import warnings
from collections.abc import Mapping
from typing import Any

from .metadata import dirty_sources as dirty_sources  # read with metadata.json

NULL_COMMIT = "0" * 40
"""Git's null object id: the commit a dirty build records when no commit names its tree."""

_warned: set[str] = set()


def kernel_git_status(commit: str | None, dirty: bool) -> dict[str, object] | None:
    """``provenance.kernel`` for sources at ``commit`` (``None``: not known), or ``None``
    when there is nothing to record.

    The ecosystem's 0.19 loader refuses a ``kernel`` part without a full ``commit`` id,
    so a dirty tree without one (a Nix 2.8 flake with uncommitted changes, a flake outside
    git) records :data:`NULL_COMMIT`: the build stays marked dirty for every loader, and the
    commit says it names nothing. A clean tree without a commit has no part at all.
    """
    if commit:
        return {"commit": commit, "dirty": dirty}
    return {"commit": NULL_COMMIT, "dirty": True} if dirty else None


def warn_if_dirty(provenance: Mapping[str, Any], name: str, variant: str) -> bool:
    """Warn once per variant built from a dirty tree; whether it was."""
    dirty = dirty_sources(provenance)
    if dirty and f"{name}/{variant}" not in _warned:
        _warned.add(f"{name}/{variant}")
        warnings.warn(
            f"kernel {name!r} variant {variant!r} was built from a dirty git tree "
            f"({' and '.join(dirty)} had uncommitted changes): its recorded commit does not "
            "identify the sources it was built from, so the build may not be reproducible",
            stacklevel=3)
    return bool(dirty)
