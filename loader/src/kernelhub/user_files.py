"""Paths and files the user names: checked once, read with a bound.

A path from an argument, an environment variable or a config file reaches ``os``
functions that fail in ways no caller expects: a NUL byte is a ``ValueError``, an
unknown ``~user`` a ``RuntimeError``, a 5000-character name an ``OSError`` from
``exists()``. :func:`user_path` turns such a path into a one-line :class:`PathError`
before anything uses it. And a config file, manifest, lock file or key is small: a
file that goes on and on (``/dev/zero``, a mistyped path to a disk image) is refused
after :data:`MAX_FILE_BYTES` by :func:`read_bounded` instead of filling memory.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import TYPE_CHECKING

from .errors import PathError
from .lazy_names import deferred

if TYPE_CHECKING:
    import argparse
else:  # for messages only: a warm load compiles no patterns
    argparse = deferred("argparse")

NAME_MAX = 255
"""Bytes in one path component (Linux, macOS)."""
PATH_MAX = 4095
"""Bytes in a whole path (Linux's 4096 with its terminating NUL)."""
MAX_FILE_BYTES = 16 * 1024 * 1024
"""Far beyond any real config file, manifest, lock file, allowed-signers file or key."""


def shown_path(value: object) -> str:
    """A path as messages show it: credentials out, control characters escaped, and
    at most 200 characters."""
    from .printable import printable  # messages only: a load that says nothing needs none
    from .redact import redact

    text = printable(redact(
        os.fspath(value) if isinstance(value, str | os.PathLike) else repr(value)))
    return text if len(text) <= 200 else f"{text[:100]}…{text[-60:]} ({len(text)} characters)"


def user_path(value: str | os.PathLike[str], what: str) -> Path:
    """``value`` as a Path with ``~`` expanded, or a :class:`PathError` naming ``what``
    (``"--project"``, ``"KERNELHUB_CACHE"``) and what is wrong with it."""
    if not isinstance(value, str | os.PathLike):
        raise PathError(f"{what} must be a path (a str or os.PathLike), not "
                        f"{type(value).__name__}")
    text = os.fspath(value)
    if not isinstance(text, str):
        raise PathError(f"{what} must be a str path, not {type(text).__name__}")
    if "\0" in text:
        raise PathError(f"{what} {shown_path(text)} contains a NUL byte, which no path can hold")
    if text.startswith("~"):
        try:
            text = os.fspath(Path(text).expanduser())
        except RuntimeError:
            user = text[1:].split("/", 1)[0]
            raise PathError(f"{what} {shown_path(text)}: cannot expand ~{shown_path(user)}"
                            f"{': there is no such user' if user else ': HOME is not set'}; "
                            "write the path out") from None
    encoded = os.fsencode(text)
    longest = max((len(part) for part in encoded.split(b"/")), default=0)
    if longest > NAME_MAX or len(encoded) > PATH_MAX:
        raise PathError(f"{what} {shown_path(text)}: file name too long (at most {NAME_MAX} "
                        f"bytes per name and {PATH_MAX} in all)")
    return Path(text)


def cli_path(text: str) -> Path:
    """argparse's ``type=`` for a path argument: a bad path is a usage error."""
    try:
        return user_path(text, "the path")
    except PathError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def read_bounded(path: Path, limit: int = MAX_FILE_BYTES) -> bytes:
    """The bytes of the file at ``path``, at most ``limit`` of them.

    A longer file raises ``OSError(EFBIG)``, so callers that report an unreadable file
    (by its ``strerror``) report this one the same way.
    """
    with open(path, "rb") as f:
        # Ask for the size the file says it has, not for ``limit``: a read of ``limit + 1``
        # bytes allocates that much first (16 MiB for a lock file of 200 bytes, ~50 µs on a
        # locked load). A file whose size says less than it holds (a device, a pipe, one
        # still growing) is read on, up to the same bound.
        size = os.fstat(f.fileno()).st_size
        data = f.read(min(size, limit) + 1)
        if size < len(data) <= limit:
            data += f.read(limit + 1 - len(data))
    if len(data) > limit:
        raise OSError(errno.EFBIG, f"larger than {limit // (1024 * 1024)} MiB, which no file "
                      "kernelhub reads is; is it the right file?", str(path))
    return data
