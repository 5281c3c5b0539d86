"""The cache root: which of its entries kernelhub made, and clearing only those.

``KERNELHUB_CACHE`` is a user's word, and a typo or a guess (``~``, ``/tmp``, a project
directory) points it at a directory full of someone's files. Nothing there may be lost
to ``kernelhub cache clear``. Two facts say what is kernelhub's:

* a marker, ``CACHEDIR.TAG`` (the cache directory tag backup tools already skip), that
  kernelhub writes only into a root it creates or finds empty: every entry of such a
  root is the cache's;
* its own entry names (hub keys ``hf-<host>-<12 hex>`` and ``local-<12 hex>``,
  ``autotune``, ``verify`` (its former name), ``verified``, temporary ``.….partial`` files), which is how a cache made
  before the marker existed is recognised — only when it holds nothing else.

Anything else is refused in one line and nothing is removed.
"""

from __future__ import annotations

__lazy_modules__ = {"kernelhub.errors"}  # PEP 810: imported when first used

import shutil
from pathlib import Path

from ..errors import CacheError

MARKER = "CACHEDIR.TAG"
_SIGNATURE = "Signature: 8a477f597d28d172789f06886806bc55"
"""The first line of every cache directory tag (https://bford.info/cachedir/)."""
MARKER_TEXT = (f"{_SIGNATURE}\n# This directory is a kernel cache created by kernelhub; "
               "`kernelhub cache clear` empties it.\n# For information about cache directory "
               "tags, see https://bford.info/cachedir/\n")
OWN_DIRS = frozenset({"autotune", "verify", "verified"})
"""Top-level directories besides hub keys (autotuning decisions, under their former name
too, and verified releases)."""

_HEX = frozenset("0123456789abcdef")
_claimed: set[Path] = set()


def claim(root: Path) -> None:
    """Mark ``root`` as kernelhub's when it does not exist yet or is empty (called before
    the cache writes into it); a root that holds anything is left unmarked."""
    if root in _claimed:
        return
    try:
        if not root.exists():
            root.mkdir(parents=True, exist_ok=True)
        if not any(root.iterdir()):
            (root / MARKER).write_text(MARKER_TEXT)
    except OSError:
        return  # the write that follows reports an unwritable cache, in its own words
    _claimed.add(root)


def is_marked(root: Path) -> bool:
    try:
        return (root / MARKER).read_text(errors="replace").startswith(_SIGNATURE)
    except OSError:
        return False


def is_own_name(name: str) -> bool:
    """Whether kernelhub names a top-level cache entry ``name``."""
    if name in OWN_DIRS or name == MARKER or (name.startswith(".") and name.endswith(".partial")):
        return True
    prefix, _, digest = name.rpartition("-")
    return (len(digest) == 12 and set(digest) <= _HEX
            and (prefix == "local" or (prefix.startswith("hf-") and len(prefix) > 3)))


def clear(root: Path, setting: str = "KERNELHUB_CACHE") -> list[Path]:
    """Delete kernelhub's entries under ``root``; return them. Refuses, removing nothing,
    when ``root`` is not a directory kernelhub made (see the module docstring)."""
    if not root.exists() and not root.is_symlink():
        return []
    if not root.is_dir():
        raise CacheError(f"the kernel cache {root} is not a directory; nothing was removed "
                         f"(point {setting} at the cache directory)")
    try:
        entries = sorted(root.iterdir())
    except OSError as e:
        raise CacheError(f"cannot list the kernel cache {root}: {e.strerror or e}") from None
    marked = is_marked(root)
    if not marked:
        foreign = [e.name for e in entries if not is_own_name(e.name)]
        if foreign:
            shown = ", ".join(repr(n) for n in foreign[:3]) + (", …" if len(foreign) > 3 else "")
            raise CacheError(
                f"{root} is not a kernel cache kernelhub made: it holds {shown} "
                f"({len(foreign)} entr{'y' if len(foreign) == 1 else 'ies'} not kernelhub's); "
                f"nothing was removed. Point {setting} at the kernel cache, or remove the "
                "directory yourself")
    removed = [e for e in entries if e.name != MARKER]
    for done, entry in enumerate(removed):
        try:
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()
        except OSError as e:
            raise CacheError(f"cannot remove {entry} from the kernel cache: "
                             f"{e.strerror or e} (removed {done} of {len(removed)} entries)"
                             ) from None
    if not marked:
        _claimed.discard(root)
        claim(root)
    return removed
