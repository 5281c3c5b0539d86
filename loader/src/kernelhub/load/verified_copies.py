"""Verified copies kept between processes, so a warm load need not copy and hash again.

A variant from the cache is read once per process into a private copy, hashed as it is
copied (:mod:`kernelhub.load.verified_import`); on this machine that is about 3 ms of a
warm load, most of it writing and hashing the native library. The copy is kept instead
(under :func:`root`, a directory only this user can write, beside the user's
``verified_marks`` secret), and a record under that secret says which bytes it holds: for every file, the digest
found when it was copied and the identity of both the cache file and its copy
(:data:`Fingerprint`: device, inode, size, mtime and ctime in nanoseconds).

A later load reuses the copy only when every cache file and every copied file still has
the recorded identity and no file was added or removed on either side. Writing a file's
bytes, replacing it, or changing its times moves its ctime to the present, which no
process below root can set back, so a file with the recorded identity still holds the
bytes that were hashed. Anything else (no record, a record anyone but this user's loader
wrote, any file touched) reads and hashes the cache variant in full, as before, and that
read reports any tampering. Two limits keep this sound:

* a file whose ctime is within :data:`SETTLED_NS` of the moment it was hashed is not
  recorded (file times are kept with the coarse kernel clock, so a write in the same tick
  could leave them unchanged); the next load records it;
* what is imported is always the private copy: a cache file rewritten through a shared
  memory mapping (which may leave its ctime alone) is never executed, only not reported.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import time
from pathlib import Path

from .. import settings
from ..signing import verified_marks

Fingerprint = tuple[int, int, int, int, int]
"""(st_dev, st_ino, st_size, st_mtime_ns, st_ctime_ns) of a regular file."""

RECORDS = "copies"
"""Where :mod:`kernelhub.signing.verified_marks` keeps the records of kept copies."""
SETTLED_NS = 1_000_000_000
"""How old a cache file's ctime must be, when it is hashed, for its identity to be recorded."""
_FORMAT = b"kernelhub-verified-copy-1\0"


def fingerprint(info: os.stat_result) -> Fingerprint:
    return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)


COPIES_DIR = "verified-copies"


def root() -> Path | None:
    """``verified-copies`` beside the user's config file (where the secret lives),
    created 0700. None (copies then live only as long as the process, in ``$TMPDIR``)
    where no record can be kept (no usable secret), or the directory is not one of this
    user's that no one else can write, or its filesystem is mounted noexec."""
    if not hasattr(os, "getuid") or not verified_marks.available():
        return None
    path = settings.config_path().parent / COPIES_DIR
    try:
        path.mkdir(mode=0o700, exist_ok=True)
        info = os.lstat(path)
        noexec = os.statvfs(path).f_flag & getattr(os, "ST_NOEXEC", 0)
    except OSError:
        return None
    private = stat.S_ISDIR(info.st_mode) and not info.st_mode & 0o077
    return path if private and info.st_uid == os.getuid() and not noexec else None


def key(source: Path, metadata_bytes: bytes) -> bytes:
    """The record's key: the variant dir and its metadata.json exactly as read."""
    return hashlib.sha256(_FORMAT + str(source).encode("utf-8", "surrogateescape") + b"\0"
                          + metadata_bytes).digest()


def remember(record_key: bytes, copy: Path, digests: dict[str, str],
             sources: dict[str, Fingerprint], copies: dict[str, Fingerprint]) -> bool:
    """Record that ``copy`` holds exactly the verified files: ``digests`` (file → digest
    checked against metadata.json), ``sources`` and ``copies`` (file → identity of the
    cache file and of its copy, metadata.json included). Nothing is recorded while a cache
    file is too fresh to tell apart from a write in the same clock tick, or where the
    record cannot be written (a read-only cache); returns whether it was written."""
    settled = time.time_ns() - SETTLED_NS
    if any(fp[4] > settled for fp in sources.values()):
        return False
    data = json.dumps({"copy": copy.name, "digests": digests, "sources": sources,
                       "copies": copies}, sort_keys=True).encode()
    return verified_marks.remember_data(RECORDS, record_key, data)


def recall(record_key: bytes, where: Path, sources: dict[str, Fingerprint]
           ) -> tuple[Path, dict[str, str]] | None:
    """The kept copy under ``where`` and its verified digests, when this user's loader
    recorded it for ``record_key`` and the cache files (``sources``, identities as just
    read) and the copied files are still exactly the recorded ones; else None."""
    data = verified_marks.recall_data(RECORDS, record_key)
    if data is None:
        return None
    try:
        record = json.loads(data)
        copy = where / record["copy"]
        recorded = {rel: tuple(fp) for rel, fp in record["sources"].items()}
        copied = {rel: tuple(fp) for rel, fp in record["copies"].items()}
        digests = dict(record["digests"])
    except (ValueError, KeyError, TypeError, AttributeError):
        return None
    if recorded != sources or _identities(copy) != copied:
        return None
    return copy, digests


def _identities(copy: Path) -> dict[str, Fingerprint] | None:
    """Every regular file under ``copy`` (relative POSIX path → identity); None if
    anything else is there or it cannot be read."""
    found: dict[str, Fingerprint] = {}
    try:
        for dirpath, _dirnames, filenames, dirfd in os.fwalk(copy, follow_symlinks=False):
            rel_dir = Path(dirpath).relative_to(copy)
            for name in filenames:
                info = os.stat(name, dir_fd=dirfd, follow_symlinks=False)
                if not stat.S_ISREG(info.st_mode):
                    return None
                found[(rel_dir / name).as_posix()] = fingerprint(info)
    except OSError:
        return None
    return found or None
