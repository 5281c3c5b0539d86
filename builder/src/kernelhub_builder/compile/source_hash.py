"""The content hash of one build: its sources plus its settings → the variant id.

The id (``_<name>_<backend>_<hash10>``) is the op namespace and module name of a build,
so two builds of different sources never share one, and it is how ``builder build``
knows a variant is up to date without starting a compiler. Everything that can change
the built files must therefore be hashed — and nothing machine-specific (absolute
paths), so the same tree built on two machines gets the same id.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from kernelhub.formats.variants import variant_id

from ..manifest import KernelManifest

HEADER_SUFFIXES = frozenset({".h", ".hh", ".hpp", ".hxx", ".cuh", ".inc", ".inl", ".ipp",
                             ".metal"})
"""Files of include dirs that reach a compile. Include dirs are often the kernel root
(``include = ["."]``), so hashing everything there would make tests and docs part of
the id."""

_SKIPPED_DIRS = frozenset({"__pycache__", ".git", ".pytest_cache", "build", "result"})


@dataclass(frozen=True)
class BuildSettings:
    """Everything besides the sources that shapes the built files."""

    variant: str
    compiler: str | None
    """The compiler's identity (its ``--version`` line); None when nothing is compiled."""
    flags: tuple[str, ...]
    torch_version: str | None
    release: str
    builder_version: str

    def lines(self) -> list[str]:
        return [
            f"variant={self.variant}",
            f"compiler={self.compiler or ''}",
            "flags=" + "\x1f".join(self.flags),
            f"torch={self.torch_version or ''}",
            f"release={self.release}",
            f"builder={self.builder_version}",
        ]


def source_files(kernel: KernelManifest, backend: str | None) -> list[Path]:
    """Every input file of a build of ``kernel`` for ``backend``, sorted and unique.

    ``backend`` None means a pure-Python build: only the package and build.toml count.
    """
    root = kernel.root
    found: set[Path] = {root / "build.toml"}
    found.update(_walk(kernel.package_dir))
    if backend is not None and not kernel.torch.noarch:
        parts = kernel.parts_for(backend)
        found.update(root / s for s in kernel.torch.src)
        for part in parts:
            found.update(root / s for s in part.src)
        for include in (*kernel.torch.include, *(i for p in parts for i in p.include)):
            found.update(f for f in _walk(root / include) if f.suffix in HEADER_SUFFIXES)
    return sorted(found)


def _walk(directory: Path) -> Iterable[Path]:
    if not directory.is_dir():
        return
    for dirpath, dirnames, filenames in os.walk(directory):
        dirnames[:] = [d for d in dirnames if d not in _SKIPPED_DIRS and not d.startswith(".")]
        for name in filenames:
            if not name.endswith(".pyc"):
                yield Path(dirpath) / name


def source_digest(root: Path, files: Iterable[Path], settings: BuildSettings) -> str:
    """sha256 hex over the files (by path relative to ``root`` and content) and settings."""
    h = hashlib.sha256()
    for path in sorted(files):
        rel = path.relative_to(root).as_posix() if path.is_relative_to(root) else path.name
        try:
            content = path.read_bytes()
        except FileNotFoundError:
            # A missing source is reported by the compile with a better message; hash
            # its absence so the id still differs from a build that had it.
            content = b"\0missing"
        h.update(f"file {rel} {len(content)}\n".encode())
        h.update(content)
    for line in settings.lines():
        h.update(f"setting {line}\n".encode())
    return h.hexdigest()


def build_id(kernel: KernelManifest, backend: str, settings: BuildSettings) -> tuple[str, str]:
    """(variant id, full hex digest) of one build."""
    compiled_backend = None if kernel.torch.noarch else backend
    digest = source_digest(kernel.root, source_files(kernel, compiled_backend), settings)
    return variant_id(kernel.name, backend, digest), digest
