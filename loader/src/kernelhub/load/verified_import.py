"""Nothing unverified runs: read a variant once, verify those bytes, import only them.

Verifying a directory and then importing from it reads every file twice: whoever can
write the directory in between (a shared cache, a racing process, a link swapped under
us) decides what runs. So a variant is read exactly once, here, into a private copy
that only this process writes (:func:`snapshot_variant`): each file is opened without
following links (``O_NOFOLLOW`` through directory file descriptors, so no path component
can be swapped either), hashed as it is copied, and the digests are checked against the
metadata read in the same pass. A copy of a variant from the kernel cache is kept for this
user's later processes, which use it only while neither it nor the cache variant changed
(:mod:`kernelhub.load.verified_copies`).

Python's own file loaders would then read each ``.py`` again (after verification) and
prefer a ``__pycache__/*.pyc`` whose header matches the source's size and mtime — a file
no digest covers. So the import hook (:class:`VerifiedFinder`, installed as
:data:`FINDER`) answers for every module under a loaded variant's name and only from
the :class:`VerifiedVariant`: sources are compiled from the bytes that were hashed
(no ``__pycache__`` is read or written; the code compiled from a verified source is
kept under an HMAC only this user's loader can make, :func:`compiled`), native extensions are loaded from the private
verified copy (whose paths are what the variant's own ``__file__`` points at), and a
module that is not part of the verified build cannot be imported at all. The copy and
the hook are one guarantee, so they live in one module.

Links are refused, not followed: a link may leave the variant or change after the
check, and hubs never store them. ``__pycache__`` dirs and ``.pyc`` files in a variant
are ignored entirely: never read, never verified, never run.
"""

from __future__ import annotations

# PEP 810: imported when first used (inert before Python 3.15)
__lazy_modules__ = {
    "kernelhub.errors", "kernelhub.formats.metadata",
}

import atexit
import base64
import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import linecache
import marshal
import os
import shutil
import stat
import sys
import tempfile
import threading
from collections.abc import Sequence
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path
from types import CodeType, ModuleType

from ..errors import IntegrityError, KernelLoadError, MetadataError
from ..formats.metadata import (
    METADATA_FILE,
    SIGNATURE_SIDECARS,
    Metadata,
    check_digests,
    complete_digest,
    parse_metadata,
)
from ..signing import verified_marks
from ..value_types import Record
from . import verified_copies
from .verified_copies import Fingerprint

# -- the verified private copy ------------------------------------------------------

_BYTECODE_DIRS = frozenset({"__pycache__"})
_BYTECODE_SUFFIXES = (".pyc", ".pyo")
NATIVE_SUFFIXES = (*EXTENSION_SUFFIXES, ".so", ".dylib")
"""Files that are native code: loaded by the dynamic linker, never by Python."""
_CHUNK = 1 << 20
_OPEN_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NOFOLLOW", 0)  # a link is refused by the kernel, not after a check
    | getattr(os, "O_NONBLOCK", 0)  # a FIFO planted in the variant must not hang the load
    | getattr(os, "O_CLOEXEC", 0)
)

_private_root: Path | None = None
_private_lock = threading.Lock()


class VerifiedVariant(Record, frozen=True):
    """A variant's bytes as read and verified once; everything imported comes from here."""

    source: Path
    """The variant dir the bytes were read from (for messages; never read again)."""
    copy: Path
    """A private directory holding exactly the verified bytes (and metadata.json)."""
    metadata: Metadata
    metadata_bytes: bytes
    """metadata.json exactly as read: what a release signature is checked against."""
    python_sources: dict[str, bytes]
    """Relative path → verified bytes of every ``.py`` file."""
    files: frozenset[str]
    """Every verified file (relative POSIX paths), metadata.json excluded."""
    own_digest: bool = True
    """Whether metadata.json itself lists the digests (False: an ecosystem build, checked
    against the hub's hashes recorded at fetch)."""
    kept: bool = False
    """Whether the copy is kept for later processes (:mod:`kernelhub.load.verified_copies`)."""

    def discard(self) -> None:
        """Remove the private copy (native code already loaded from it stays mapped); a
        kept copy stays, for the loads its record serves."""
        if not self.kept:
            shutil.rmtree(self.copy, ignore_errors=True)


def snapshot_variant(variant_dir: Path, keep: bool = False) -> VerifiedVariant:
    """Copy ``variant_dir`` into a private dir, hashing as it goes; verify; return it.

    With ``keep`` (a variant in the kernel cache) the copy is kept for later processes,
    and one kept before is used instead when neither it nor ``variant_dir`` changed since
    (:mod:`kernelhub.load.verified_copies`). Raises IntegrityError (naming the file) for
    links, special files, missing, extra or changed files, and MetadataError for a missing
    or malformed metadata.json. On any error the private copy is removed.
    """
    source = Path(variant_dir)
    where = verified_copies.root() if keep else None
    if where is not None and (kept := _recalled(source, where)) is not None:
        return kept
    copy = Path(tempfile.mkdtemp(prefix=f"{source.name}-", dir=where or _private_dir()))
    try:
        metadata_bytes, digests, sources, identities = _copy_verified(source, copy)
        parsed = parse_metadata(metadata_bytes, str(source / METADATA_FILE))
        metadata = complete_digest(parsed, source)
        check_digests(source, metadata, digests)
        files = frozenset(digests)
        unpacked, files = _unpack_zip_layout(source, copy, metadata, sources, files)
        if any(rel.endswith(NATIVE_SUFFIXES) for rel in files):
            _check_exec_allowed(copy)
        kept_now = where is not None and files == frozenset(digests) and verified_copies.remember(
            verified_copies.key(source, metadata_bytes), copy, digests, *identities)
    except BaseException:
        shutil.rmtree(copy, ignore_errors=True)
        raise
    if where is not None and not kept_now:  # not recorded: no later load can use it
        atexit.register(shutil.rmtree, copy, True)
    return VerifiedVariant(source, copy, metadata, metadata_bytes, unpacked, files,
                           bool(parsed.digest_files), kept_now)


def _recalled(source: Path, where: Path) -> VerifiedVariant | None:
    """The copy kept for ``source``, when its record says it still holds exactly the
    verified files (None: read and hash ``source`` in full)."""
    scanned = _scan(source)
    if scanned is None:
        return None
    metadata_bytes, identities = scanned
    found = verified_copies.recall(verified_copies.key(source, metadata_bytes), where,
                                   identities)
    if found is None:
        return None
    copy, digests = found
    parsed = parse_metadata(metadata_bytes, str(source / METADATA_FILE))
    metadata = complete_digest(parsed, source)
    check_digests(source, metadata, digests)
    sources = {}
    for rel in digests:
        if rel.endswith(".py"):
            try:
                sources[rel] = (copy / rel).read_bytes()
            except OSError:
                return None
    if any(rel.endswith(NATIVE_SUFFIXES) for rel in digests):
        _check_exec_allowed(copy)
    return VerifiedVariant(source, copy, metadata, metadata_bytes, sources,
                           frozenset(digests), bool(parsed.digest_files), True)


def _scan(source: Path) -> tuple[bytes, dict[str, Fingerprint]] | None:
    """metadata.json's bytes and the identity of every file :func:`_copy_verified` would
    copy, without reading them; None on anything unusual (the full read reports it)."""
    metadata_bytes: bytes | None = None
    identities: dict[str, Fingerprint] = {}
    try:
        for dirpath, dirnames, filenames, dirfd in os.fwalk(source, follow_symlinks=False):
            rel_dir = Path(dirpath).relative_to(source)
            dirnames[:] = [d for d in dirnames if d not in _BYTECODE_DIRS]
            for name in filenames:
                rel = (rel_dir / name).as_posix()
                if name.endswith(_BYTECODE_SUFFIXES) or rel in SIGNATURE_SIDECARS:
                    continue
                if rel == METADATA_FILE:
                    fd = os.open(name, _OPEN_FLAGS, dir_fd=dirfd)
                    with os.fdopen(fd, "rb") as f:
                        info = os.fstat(f.fileno())
                        if not stat.S_ISREG(info.st_mode):
                            return None
                        metadata_bytes = f.read()
                        info = os.fstat(f.fileno())
                else:
                    info = os.stat(name, dir_fd=dirfd, follow_symlinks=False)
                    if not stat.S_ISREG(info.st_mode):
                        return None
                identities[rel] = verified_copies.fingerprint(info)
    except OSError:
        return None
    return None if metadata_bytes is None else (metadata_bytes, identities)


def _unpack_zip_layout(source: Path, copy: Path, metadata: Metadata, kept: dict[str, bytes],
                       files: frozenset[str]) -> tuple[dict[str, bytes], frozenset[str]]:
    """The Python sources and files of the package: for the ZIP build layout
    (:mod:`kernelhub.formats.zip_layout`) the archive's members, unpacked into the private copy from
    the verified bytes of ``<id>.zip``, next to the variant's other files."""
    # Not on a warm load, which recalls its kept copy (kernelhub.load.verified_copies).
    from ..formats.zip_layout import BUILD_LAYOUT, archive_name, build_layout, extract_verified

    sources = {rel: data for rel, data in kept.items() if rel.endswith(".py")}
    where = str(source / METADATA_FILE)
    if build_layout(metadata.extra.get(BUILD_LAYOUT), where) != "zip":
        return sources, files
    name = archive_name(metadata.id)
    if name not in kept:
        raise IntegrityError(f"{source}: metadata.json says build-layout zip, but there is no "
                             f"{name}; the variant is incomplete")
    members = extract_verified(kept[name], copy, files | {METADATA_FILE}, str(source / name))
    sources.update({rel: data for rel, data in members.items() if rel.endswith(".py")})
    return sources, files | frozenset(members)


Identities = tuple[dict[str, Fingerprint], dict[str, Fingerprint]]
"""File → identity of each file read (as it was after the read) and of its copy."""


def _copy_verified(source: Path, copy: Path
                   ) -> tuple[bytes, dict[str, str], dict[str, bytes], Identities]:
    """Walk ``source`` through directory fds, copying every regular file once."""
    metadata_bytes: bytes | None = None
    digests: dict[str, str] = {}
    sources: dict[str, bytes] = {}
    identities: Identities = ({}, {})
    try:
        walk = os.fwalk(source, follow_symlinks=False)
        for dirpath, dirnames, filenames, dirfd in walk:
            rel_dir = Path(dirpath).relative_to(source)
            dirnames[:] = sorted(d for d in dirnames if d not in _BYTECODE_DIRS)
            for name in dirnames:
                _refuse_link(source / rel_dir / name, name, dirfd)
                (copy / rel_dir / name).mkdir()
            for name in sorted(filenames):
                if name.endswith(_BYTECODE_SUFFIXES):
                    continue
                rel = (rel_dir / name).as_posix()
                if rel in SIGNATURE_SIDECARS:  # a signature of metadata.json: never imported
                    continue
                keep = rel == METADATA_FILE or name.endswith(".py") or (
                    name.endswith(".zip") and rel_dir == Path("."))  # a ZIP layout's archive
                digest, data, read, written = _copy_file(source / rel, name, dirfd,
                                                         copy / rel, keep)
                identities[0][rel], identities[1][rel] = read, written
                if rel == METADATA_FILE:
                    metadata_bytes = data
                else:
                    digests[rel] = digest
                    if data is not None:
                        sources[rel] = data
    except FileNotFoundError as e:
        raise IntegrityError(f"{source}: a file vanished while it was read ({e.filename})") from None
    except NotADirectoryError:
        raise MetadataError(f"{source} is not a directory: it is not a built variant") from None
    except OSError as e:
        raise KernelLoadError(f"cannot read the variant {source}: {e.strerror or e}") from None
    if metadata_bytes is None:
        raise MetadataError(
            f"{source / METADATA_FILE} does not exist: {source} is not a built variant"
        )
    return metadata_bytes, digests, sources, identities


def _refuse_link(path: Path, name: str, dirfd: int) -> None:
    if stat.S_ISLNK(os.stat(name, dir_fd=dirfd, follow_symlinks=False).st_mode):
        raise _link_error(path)


def _link_error(path: Path) -> IntegrityError:
    return IntegrityError(
        f"{path} is a symbolic link; a variant may hold only regular files and directories "
        "(a link can leave the variant or change after verification). Replace it with the "
        "file it points to and rebuild"
    )


def _copy_file(
    path: Path, name: str, dirfd: int, dest: Path, keep: bool
) -> tuple[str, bytes | None, Fingerprint, Fingerprint]:
    """Copy one file opened without following links; its digest, (if kept) bytes, and
    the identities of the file (once read) and of the copy."""
    try:
        fd = os.open(name, _OPEN_FLAGS, dir_fd=dirfd)
    except OSError as e:
        if stat.S_ISLNK(os.stat(name, dir_fd=dirfd, follow_symlinks=False).st_mode):
            raise _link_error(path) from None
        raise e
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            raise IntegrityError(f"{path} is not a regular file; a variant may hold only files")
        h = hashlib.sha256()
        kept: list[bytes] = []
        with open(dest, "xb") as out:
            while chunk := f.read(_CHUNK):
                h.update(chunk)
                out.write(chunk)
                if keep:
                    kept.append(chunk)
            out.flush()  # what the copy holds once closed
            written = verified_copies.fingerprint(os.fstat(out.fileno()))
        read = verified_copies.fingerprint(os.fstat(f.fileno()))
    digest = base64.b64encode(h.digest()).decode("ascii")
    return digest, (b"".join(kept) if keep else None), read, written


def _private_dir() -> Path:
    """This process's own directory (mode 0700) for verified copies, removed at exit."""
    global _private_root
    with _private_lock:
        if _private_root is None or not _private_root.is_dir():
            try:
                _private_root = Path(tempfile.mkdtemp(prefix="kernelhub-verified-"))
            except OSError as e:
                raise KernelLoadError(
                    f"cannot create a private directory for verified kernel files in "
                    f"{tempfile.gettempdir()}: {e.strerror or e}; set TMPDIR to a writable "
                    "directory"
                ) from None
            atexit.register(shutil.rmtree, _private_root, True)
        return _private_root


def _check_exec_allowed(copy: Path) -> None:
    noexec = getattr(os, "ST_NOEXEC", 0)
    if noexec and os.statvfs(copy).f_flag & noexec:
        raise KernelLoadError(
            f"{copy.parent} is on a filesystem mounted noexec, so the verified copy of this "
            "kernel's native library cannot be loaded from it; set TMPDIR to a directory on "
            "a filesystem that allows executables"
        )


# -- the import hook: modules come only from the verified copy ------------------------


class _VerifiedSourceLoader(importlib.abc.InspectLoader):
    """Executes one module from verified source bytes; writes no bytecode anywhere."""

    def __init__(self, path: str, source: bytes, is_package: bool, kept: bool = False) -> None:
        self.path = path
        self.source = source
        self._is_package = is_package
        self._kept = kept

    def is_package(self, fullname: str) -> bool:
        return self._is_package

    def get_source(self, fullname: str) -> str:
        return importlib.util.decode_source(self.source)

    def get_code(self, fullname: str) -> CodeType:
        return compiled(self.source, self.path, self._kept)

    def exec_module(self, module: ModuleType) -> None:
        # Tracebacks and inspect.getsource (which Triton uses to compile kernels) read
        # the verified lines from here; mtime None tells linecache never to re-read them.
        lines = self.get_source(module.__name__).splitlines(keepends=True)
        linecache.cache[self.path] = (len(self.source), None, lines, self.path)
        exec(self.get_code(module.__name__), module.__dict__)


CODE_RECORDS = "code"
"""Where :mod:`kernelhub.signing.verified_marks` keeps the code compiled from verified sources."""
_BYTECODE_FORMAT = importlib.util.MAGIC_NUMBER + bytes([sys.flags.optimize])
"""What else than the source a compiled code object depends on: the interpreter's
bytecode format and its optimisation level."""


def compiled(source: bytes, path: str, kept: bool = False) -> CodeType:
    """``source`` (verified bytes) compiled as the module at ``path``.

    Compiling a kernel's sources costs a few milliseconds on every warm load, so the code
    is remembered by the sha256 of the source and the bytecode format, under an HMAC
    only this user's loader can make (:mod:`kernelhub.signing.verified_marks`): a record anyone
    else wrote, or one for other bytes, is never read as code; the source is compiled
    instead. The record holds no path: the code is given ``path`` as it is loaded.

    Giving it a path renames every code object it holds (~0.2 ms for a small kernel), so
    a module of a ``kept`` copy (which later processes load from the same ``path``) is
    also remembered under the source and that path, and taken from there as it is."""
    key = hashlib.sha256(_BYTECODE_FORMAT + source).digest()
    at_path = (hashlib.sha256(_AT_PATH + _BYTECODE_FORMAT + path.encode("utf-8", "surrogateescape")
                              + b"\0" + source).digest() if kept else None)
    if at_path is not None and (code := _recalled_code(at_path)) is not None \
            and code.co_filename == path:
        return code
    if (code := _recalled_code(key)) is not None:
        code = _at(code, path)
    else:
        code = compile(source, path, "exec", dont_inherit=True)
        verified_marks.remember_data(CODE_RECORDS, key, marshal.dumps(code))
    if at_path is not None:
        verified_marks.remember_data(CODE_RECORDS, at_path, marshal.dumps(code))
    return code


_AT_PATH = b"kernelhub-code-at-path\0"
"""Keeps the keys of code remembered under a path apart from those under the source alone."""


def _recalled_code(key: bytes) -> CodeType | None:
    """The code this user's loader recorded under ``key``, if any."""
    if (data := verified_marks.recall_data(CODE_RECORDS, key)) is None:
        return None
    try:
        code = marshal.loads(data)
    except (EOFError, ValueError, TypeError):
        return None
    return code if isinstance(code, CodeType) else None


def _at(code: CodeType, path: str) -> CodeType:
    """``code`` and the code objects it holds, named as compiled from ``path``."""
    consts = tuple(_at(c, path) if isinstance(c, CodeType) else c for c in code.co_consts)
    return code.replace(co_filename=path, co_consts=consts)


class VerifiedFinder(importlib.abc.MetaPathFinder):
    """The only finder for names under a loaded variant's top-level name."""

    def __init__(self) -> None:
        self._variants: dict[str, VerifiedVariant] = {}
        self._lock = threading.Lock()

    def add(self, name: str, variant: VerifiedVariant) -> None:
        with self._lock:
            self._variants[name] = variant
            if self not in sys.meta_path:
                sys.meta_path.insert(0, self)

    def remove(self, name: str) -> None:
        with self._lock:
            self._variants.pop(name, None)

    def find_spec(
        self, fullname: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        top, _, rest = fullname.partition(".")
        variant = self._variants.get(top)
        if variant is None:
            return None
        spec = module_spec(fullname, variant, rest)
        if spec is None:
            # Raising stops the search: no other finder may supply an unverified file.
            raise ModuleNotFoundError(
                f"{fullname} is not part of the verified build loaded from {variant.source}",
                name=fullname,
            )
        return spec


def module_spec(
    fullname: str, variant: VerifiedVariant, rest: str
) -> importlib.machinery.ModuleSpec | None:
    """The spec of ``rest`` (dotted, relative to the variant root) from verified files."""
    rel = rest.replace(".", "/")
    prefix = f"{rel}/" if rel else ""
    init = f"{prefix}__init__.py"
    if init in variant.python_sources:
        return _source_spec(fullname, variant, init, package_dir=rel or ".")
    if not rel:
        return None
    if (module := f"{rel}.py") in variant.python_sources:
        return _source_spec(fullname, variant, module, package_dir=None)
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        if (ext := f"{rel}{suffix}") in variant.files:
            origin = str(variant.copy / ext)
            loader = importlib.machinery.ExtensionFileLoader(fullname, origin)
            return importlib.util.spec_from_file_location(fullname, origin, loader=loader)
    if any(f.startswith(prefix) for f in variant.files):  # a directory without __init__.py
        spec = importlib.machinery.ModuleSpec(fullname, None, is_package=True)
        spec.submodule_search_locations = [str(variant.copy / rel)]
        return spec
    return None


def _source_spec(
    fullname: str, variant: VerifiedVariant, rel: str, package_dir: str | None
) -> importlib.machinery.ModuleSpec:
    origin = str(variant.copy / rel)
    loader = _VerifiedSourceLoader(origin, variant.python_sources[rel], package_dir is not None,
                                   variant.kept)
    spec = importlib.machinery.ModuleSpec(
        fullname, loader, origin=origin, is_package=package_dir is not None
    )
    spec.has_location = True  # sets __file__ (to the private verified copy)
    if package_dir is not None:
        spec.submodule_search_locations = [str(variant.copy / package_dir)]
    return spec


FINDER = VerifiedFinder()
