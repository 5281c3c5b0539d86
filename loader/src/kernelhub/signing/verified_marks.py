"""Verification remembered across processes, without trusting whoever writes the cache.

Verifying an Ed25519 signature takes a fraction of a millisecond, but the first one in a
process loads cryptography's native library, which after torch costs around 100 ms — more
than the rest of a warm load. So a successful check is remembered on disk, keyed by
*content* (the hash of manifest, signature and allowed key set, see
:mod:`kernelhub.signing.policy`), and the record carries an HMAC under a secret only this
user can read. Anyone who can write the cache (a shared cluster cache, another user) can
delete records — which only costs a re-verification — but cannot make one that passes:
that would need the secret.

The same secret authenticates the bytecode compiled from verified sources
(:func:`recall_data`, :func:`remember_data`): compiling a kernel's Python files costs a
few milliseconds on every warm load, and a record only this user's loader could have
made is as good as the source it was compiled from.

The secret is 32 random bytes in ``verify-secret`` next to the user's config file, created
on first use with mode 0600, and ignored unless it is a regular file owned by this user and
unreadable to others (the rule ssh applies to private keys). Without a usable secret, or
with a read-only cache, checks are remembered in-process only.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

from .. import settings

try:  # what hmac.new and hmac.compare_digest call on a CPython built with OpenSSL: the
    # same HMAC, without importing hmac (~0.25 ms CPU of every warm load here)
    from _hashlib import compare_digest, hmac_new
except ImportError:  # built without OpenSSL: hmac's own implementation
    from hmac import compare_digest
    from hmac import new as hmac_new  # type: ignore[assignment]  # the same call

SECRET_FILE = "verify-secret"
MARKS_DIR = "verified"
_SECRET_SIZE = 32
_TAG_SIZE = 32
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


def _secret() -> bytes | None:
    path = settings.config_path().parent / SECRET_FILE
    try:
        fd = os.open(path, os.O_RDONLY | _NOFOLLOW)
    except FileNotFoundError:
        return _create_secret(path)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        private = stat.S_ISREG(info.st_mode) and not info.st_mode & 0o077
        if not private or info.st_uid != os.getuid():
            return None
        data = os.read(fd, _SECRET_SIZE + 1)
    finally:
        os.close(fd)
    return data if len(data) == _SECRET_SIZE else None


def _create_secret(path: Path) -> bytes | None:
    data = os.urandom(_SECRET_SIZE)
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o600)
    except FileExistsError:
        return _secret()  # another process made it first: use theirs
    except OSError:
        return None
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    return data


def available() -> bool:
    """Whether checks can be remembered across processes (this user has a usable secret)."""
    return _secret() is not None


def _tag(secret: bytes, content_key: bytes, fingerprint: str) -> str:
    return _hmac_sha256(secret, content_key + fingerprint.encode()).hex()


def _hmac_sha256(secret: bytes, message: bytes) -> bytes:
    return hmac_new(secret, message, digestmod="sha256").digest()


def _mark_path(content_key: bytes) -> Path:
    return settings.cache_dir() / MARKS_DIR / content_key.hex()


def recall(content_key: bytes) -> str | None:
    """The signer fingerprint this user's loader recorded for ``content_key``, if any."""
    secret = _secret()
    if secret is None:
        return None
    try:
        with open(_mark_path(content_key), "rb") as f:
            fingerprint, _, tag = f.read(256).decode("ascii").strip().partition("\n")
    except (OSError, UnicodeDecodeError):
        return None
    if compare_digest(tag, _tag(secret, content_key, fingerprint)):
        return fingerprint
    return None


def remember(content_key: bytes, fingerprint: str) -> None:
    """Record a successful check (best effort: a read-only cache just keeps no record)."""
    secret = _secret()
    if secret is None:
        return
    path = _mark_path(content_key)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}")
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(f"{fingerprint}\n{_tag(secret, content_key, fingerprint)}\n")
        os.replace(tmp, path)
    with contextlib.suppress(OSError):
        tmp.unlink(missing_ok=True)


def _data_path(kind: str, content_key: bytes) -> Path:
    return settings.cache_dir() / MARKS_DIR / kind / content_key.hex()


def recall_data(kind: str, content_key: bytes) -> bytes | None:
    """The bytes this user's loader recorded for ``content_key`` under ``kind``; None
    when there is no record, or one whose HMAC does not match (made by anyone else)."""
    secret = _secret()
    if secret is None:
        return None
    try:
        with open(_data_path(kind, content_key), "rb") as f:
            raw = f.read()
    except OSError:
        return None
    tag, data = raw[:_TAG_SIZE], raw[_TAG_SIZE:]
    expected = _hmac_sha256(secret, content_key + data)
    return data if compare_digest(tag, expected) else None


def remember_data(kind: str, content_key: bytes, data: bytes) -> bool:
    """Record ``data`` for ``content_key`` under ``kind`` (best effort, like
    :func:`remember`); whether the record was written."""
    secret = _secret()
    if secret is None:
        return False
    path = _data_path(kind, content_key)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}")
    written = False
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_bytes(_hmac_sha256(secret, content_key + data) + data)
        os.replace(tmp, path)
        written = True
    with contextlib.suppress(OSError):
        tmp.unlink(missing_ok=True)
    return written
