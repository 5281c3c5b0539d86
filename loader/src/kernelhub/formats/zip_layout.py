"""The ZIP build layout: a variant whose Python package is one archive, ``<id>.zip``.

The ecosystem's 0.19 builder can write ``"build-layout": "zip"`` into ``metadata.json``:
the package's files (``__init__.py``, ``_ops.py``, ``layers/``…) are the members of
``<id>.zip`` at the variant's root, and the rest (the native library, ``metadata.json``,
``symbols.json``) stay files next to it — its loader imports the package with zipimport
and finds the library beside the archive. The archive is one file of the variant's digest,
so it is verified like every other file before anything of it is used.

kernelhub imports no archive from disk: :func:`extract_verified` unpacks the archive's
*verified bytes* (the ones hashed while the snapshot was read) into the snapshot's private
copy, and the package is imported from there like a ``files`` variant — compiled from the
verified sources by kernelhub's own finder, never from bytecode. Members that could
escape or confuse that (absolute or ``..`` paths, links, bytecode, a member shadowing a
file outside the archive, duplicates — also ones spelled differently, ``a/b.py`` and
``a//b.py`` or ``./a/b.py`` — a member that is both a file and the folder of another,
more than :data:`MAX_UNPACKED` bytes) are refused.

The builder writes the archive (``kernelhub_builder.assemble``); what it may hold is
decided here, by what the loader accepts.
"""

from __future__ import annotations

__lazy_modules__ = {"kernelhub.errors"}  # PEP 810: imported when first used

import io
import stat
import zipfile
from pathlib import Path, PurePosixPath

from ..errors import IntegrityError, MetadataError

BUILD_LAYOUT = "build-layout"
LAYOUTS: tuple[str, ...] = ("files", "zip")
MAX_UNPACKED = 1 << 30
"""Refuse archives that unpack to more than 1 GiB (a verified archive is the publisher's,
but a decompression bomb should still be an error, not a full disk)."""


def build_layout(value: object, where: str) -> str:
    """The layout a metadata.json names (absent: ``files``, as before the key existed)."""
    if value is None:
        return "files"
    if value not in LAYOUTS:
        raise MetadataError(f"{where}: {BUILD_LAYOUT} must be one of {', '.join(LAYOUTS)}, "
                            f"got {value!r}; a newer kernelhub may know it")
    assert isinstance(value, str)
    return value


def archive_name(module_id: str) -> str:
    return f"{module_id}.zip"


def extract_verified(archive: bytes, dest: Path, outside: set[str] | frozenset[str],
                     where: str) -> dict[str, bytes]:
    """Unpack ``archive`` (verified bytes) into ``dest``; return its members' bytes by
    POSIX path. ``outside``: the variant's files beside the archive (a member may not
    shadow one)."""
    try:
        zf = zipfile.ZipFile(io.BytesIO(archive))
    except zipfile.BadZipFile as e:
        raise IntegrityError(f"{where}: not a ZIP archive ({e})") from None
    members: dict[str, bytes] = {}
    folders = {p.as_posix() for rel in outside for p in PurePosixPath(rel).parents if p.parts}
    total = 0
    with zf:
        for info in zf.infolist():
            name = info.filename
            if info.is_dir():
                continue
            path = PurePosixPath(name)
            if path.is_absolute() or ".." in path.parts or "\\" in name or not path.parts:
                raise IntegrityError(f"{where}: member {name!r} leaves the package")
            if stat.S_ISLNK(info.external_attr >> 16):
                raise IntegrityError(f"{where}: member {name!r} is a symbolic link")
            if "__pycache__" in path.parts or path.suffix in (".pyc", ".pyo"):
                raise IntegrityError(f"{where}: member {name!r} is bytecode; a variant "
                                     "carries sources only")
            key = path.as_posix()  # one spelling: "a//b.py" and "./a/b.py" are "a/b.py"
            if key in members:
                raise IntegrityError(f"{where}: member {name!r} appears twice (as {key!r})")
            if key in outside:
                raise IntegrityError(f"{where}: member {name!r} shadows the variant's file "
                                     "of the same name")
            parents = {p.as_posix() for p in path.parents if p.parts}
            if key in folders or parents & (members.keys() | outside):
                raise IntegrityError(f"{where}: member {name!r} is both a file and a folder "
                                     "of the archive; a package path is one or the other")
            folders |= parents
            total += info.file_size
            if total > MAX_UNPACKED:
                raise IntegrityError(f"{where}: unpacks to more than {MAX_UNPACKED >> 20} MiB")
            try:
                members[key] = zf.read(info)
            except (zipfile.BadZipFile, OSError, RuntimeError) as e:
                raise IntegrityError(f"{where}: member {name!r} cannot be read ({e})") from None
    for name, data in members.items():
        target = dest.joinpath(*PurePosixPath(name).parts)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    return members
