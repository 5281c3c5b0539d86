"""Step 3, verify: the variant read once into a :class:`Snapshot`.

The snapshot (:func:`kernelhub.load.verified_import.snapshot_variant`) is a private copy of
the variant's files, hashed as they were read and checked against the digest read in the
same pass; the validators give their verdict on it (:func:`kernelhub.load.pipeline.checked`),
and the next step imports from it.
"""

from __future__ import annotations

# PEP 810: imported when first used (inert before Python 3.15)
__lazy_modules__ = {
    "kernelhub.load.fetch", "kernelhub.load.resolve", "kernelhub.load.verified_import",
    "kernelhub.system",
}

from pathlib import Path

from ..system import SystemInfo
from ..value_types import Record
from .fetch import Fetched
from .resolve import ReleaseVerdict
from .verified_import import VerifiedVariant, snapshot_variant


class Snapshot(Record, frozen=True):
    """A variant's bytes as read and verified once, with where they were read from."""

    verified: VerifiedVariant
    variant_name: str
    """The variant's name (its directory's name in a hub repository)."""
    cached: Path | None = None
    """The cache directory it was read from (None: a local build named by the caller)."""
    system: SystemInfo | None = None
    """The system the variant was picked for (None: a variant named by its path)."""
    release: ReleaseVerdict | None = None
    """The release signature's verdict, as the checks before the bytes found it (None: not
    checked)."""

    # The validators read the fields (``snapshot.verified.metadata``, ``.metadata_bytes``,
    # ``.source``): plain values, so checking calls nothing back in this module.

    def discard(self) -> None:
        self.verified.discard()


def verify(path: Path, variant_name: str, *, cached: bool,
           release: ReleaseVerdict | None = None) -> Snapshot:
    """Read the variant at ``path`` once into a private copy, every file checked against
    the digest read in the same pass."""
    return Snapshot(snapshot_variant(path, keep=cached), variant_name,
                    path if cached else None, release=release)


def verify_fetched(fetched: Fetched) -> Snapshot:
    """:func:`verify` of a fetched variant, carrying what the checks learned of its
    resolution to the checks on its bytes."""
    resolution = fetched.resolution
    return Snapshot(snapshot_variant(fetched.path, keep=True), fetched.variant, fetched.path,
                    resolution.system, resolution.release)
