"""Staged variant dirs as hubs store them: files with their repo paths and modes.

Shared by every hub implementation, so LocalHub and HfHub publish exactly the same files.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from ..errors import HubError, VariantNameError
from .base import BUILD_DIR

_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_SKIPPED_DIRS = frozenset({"__pycache__"})
_SKIPPED_SUFFIXES = (".pyc", ".pyo")


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

    Bytecode caches are skipped: they are per-interpreter and would make identical builds
    differ. The executable bit is kept, as git records it.
    """
    check_variant_dir(variant)
    if not root.is_dir():
        raise HubError(f"cannot publish variant {variant}: {root} is not a directory")
    found: list[StagedFile] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIPPED_DIRS)
        for filename in sorted(filenames):
            if filename.endswith(_SKIPPED_SUFFIXES):
                continue
            source = Path(dirpath) / filename
            rel = source.relative_to(root).as_posix()
            executable = bool(os.stat(source).st_mode & 0o111)
            found.append(StagedFile(f"{BUILD_DIR}/{variant}/{rel}", source, executable))
    if not found:
        raise HubError(f"cannot publish variant {variant}: {root} holds no files")
    return found


def check_variant_dir(name: str) -> None:
    """A variant name becomes a directory on every machine that fetches it: no paths."""
    if not _NAME_RE.fullmatch(name):
        raise VariantNameError(
            f"{name!r} is not a valid variant directory name (letters, digits, '.', '_', '-')"
        )
