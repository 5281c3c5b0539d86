"""Staged variant dirs as hubs store them: files with their repo paths and modes.

Shared by every publisher, so LocalHub and Hub-API servers receive exactly the same files:
those :func:`kernelhub.formats.metadata.stored_files` names, the set the digests cover.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from kernelhub.errors import HubError
from kernelhub.formats.metadata import stored_files
from kernelhub.formats.variants import check_variant_dir
from kernelhub.hub.base import BUILD_DIR


@dataclass(frozen=True)
class StagedFile:
    """One file of a staged variant dir, as it will be stored in a hub repository."""

    path_in_repo: str
    """``build/<variant>/<relative path>``, with forward slashes."""
    source: Path
    executable: bool

    @property
    def git_mode(self) -> str:
        return "100755" if self.executable else "100644"


def staged_files(variant: str, root: Path) -> list[StagedFile]:
    """Every file of a staged variant dir, sorted, ready to publish to any hub.

    The executable bit is kept, as git records it.
    """
    check_variant_dir(variant)
    if not root.is_dir():
        raise HubError(f"cannot publish variant {variant}: {root} is not a directory")
    found = [
        StagedFile(
            f"{BUILD_DIR}/{variant}/{rel}",
            root / rel,
            bool(os.stat(root / rel).st_mode & 0o111),
        )
        for rel in stored_files(root)
    ]
    if not found:
        raise HubError(f"cannot publish variant {variant}: {root} holds no files")
    return found


def stage_variants(repo_id: str, variants: Mapping[str, Path]) -> dict[str, list[StagedFile]]:
    """Every variant's staged files, by name; refuses an empty publish."""
    if not variants:
        raise HubError(f"nothing to publish to {repo_id}: no variants were given")
    return {name: staged_files(name, Path(path)) for name, path in sorted(variants.items())}
