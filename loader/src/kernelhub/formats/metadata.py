"""metadata.json of a built variant: read, write, digest and verify.

The loader owns this format; the builder writes it through :func:`write_metadata`.
Keys are kebab-case like the rest of the kernel ecosystem; unknown keys are kept on
read and written back, so older loaders keep working as the format grows.
"""

from __future__ import annotations

__lazy_modules__ = {"kernelhub.errors"}  # PEP 810: imported when first used

import base64
import hashlib
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

from ..errors import IntegrityError, MetadataError
from ..value_types import Record, field, replace

T = TypeVar("T")

JsonObject = dict[str, object]
"""A JSON object as read: values are checked where they are used."""

METADATA_FILE = "metadata.json"
SIGNATURE_SIDECARS: tuple[str, ...] = ("metadata.json.sigstore",)
"""Signatures of metadata.json stored next to it (the ecosystem's sigstore bundle): made
after the digest, so not in it, and never imported."""
DIGEST_ALGORITHM = "sha256"
NO_LICENSE = "NOASSERTION"
"""The license a variant of a kernel that declares none records: SPDX's "no assertion".
The ecosystem's 0.19 loader refuses metadata.json whose ``license`` is missing or null."""
KERNELS_MINVER = "kernels-minver"
"""The key of the oldest ecosystem loader a variant needs (:mod:`.minver` checks it)."""
_SKIPPED_DIRS = {"__pycache__"}
_SKIPPED_SUFFIXES = (".pyc", ".pyo")


class BackendInfo(Record):
    type: str
    archs: list[str] = field(default_factory=list)


class Metadata(Record):
    """The typed view of metadata.json."""

    name: str
    id: str
    version: int
    release: str
    backend: BackendInfo
    digest_files: dict[str, str]
    license: str | None = None
    python_depends: list[str] = field(default_factory=list)
    provenance: JsonObject = field(default_factory=dict)
    torch: str | None = None
    extra: JsonObject = field(default_factory=dict)

    def to_json(self) -> JsonObject:
        data: JsonObject = dict(self.extra)
        data.update(
            {
                "name": self.name,
                "id": self.id,
                "version": self.version,
                "release": self.release,
                "license": self.license,
                "python-depends": list(self.python_depends),
                "backend": {"type": self.backend.type, "archs": list(self.backend.archs)},
                "digest": {"algorithm": DIGEST_ALGORITHM, "files": dict(sorted(self.digest_files.items()))},
                "provenance": self.provenance,
                "torch": self.torch,
            }
        )
        return data

    @classmethod
    def from_json(cls, data: object, source: str = METADATA_FILE) -> Metadata:
        if not isinstance(data, dict):
            raise MetadataError(f"{source}: expected a JSON object")

        def need(key: str, kind: type[T]) -> T:
            if key not in data:
                raise MetadataError(f"{source}: missing key {key!r}; rebuild the variant with builder build")
            value = data[key]
            if not isinstance(value, kind) or (isinstance(value, bool) and kind is int):
                raise MetadataError(f"{source}: key {key!r} has the wrong type ({type(value).__name__})")
            return value

        def optional(key: str, kind: type[T]) -> T | None:
            value = data.get(key)
            if value is not None and not isinstance(value, kind):
                raise MetadataError(
                    f"{source}: key {key!r} has the wrong type ({type(value).__name__}, "
                    f"expected {kind.__name__})"
                )
            return value

        def strings(value: object, key: str) -> list[str]:
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise MetadataError(f"{source}: key {key!r} must be a list of strings")
            return list(value)

        backend = need("backend", dict)
        if not isinstance(backend.get("type"), str):
            raise MetadataError(f"{source}: key 'backend' must have a string 'type'")
        # Variants built by the ecosystem's builder may carry no digest: the cache then
        # records the hub's own content hashes at fetch (see complete_digest).
        digest = optional("digest", dict)
        files: dict[str, str] = {}
        if digest is not None:
            if digest.get("algorithm") != DIGEST_ALGORITHM:
                raise MetadataError(
                    f"{source}: digest algorithm {digest.get('algorithm')!r} is not supported "
                    f"(expected {DIGEST_ALGORITHM!r})"
                )
            listed = digest.get("files")
            if not isinstance(listed, dict) or not listed:
                raise MetadataError(f"{source}: digest.files must list every file of the variant")
            files = {k: v for k, v in listed.items() if isinstance(k, str) and isinstance(v, str)}
            if len(files) != len(listed):
                raise MetadataError(f"{source}: key 'digest' files must map paths to base64 strings")
        known = {"name", "id", "version", "release", "license", "python-depends", "backend",
                 "digest", "provenance", "torch"}
        return cls(
            name=need("name", str),
            id=need("id", str),
            version=need("version", int),
            release=optional("release", str) or f"{need('version', int)}.0.0",
            backend=BackendInfo(backend["type"], strings(backend.get("archs") or [],
                                                         "backend.archs")),
            digest_files=dict(files),
            license=optional("license", str),
            python_depends=strings(data.get("python-depends") or [], "python-depends"),
            provenance=dict(optional("provenance", dict) or {}),
            torch=optional("torch", str),
            extra={k: v for k, v in data.items() if k not in known},
        )


def read_metadata_bytes(variant_dir: Path) -> bytes:
    """The raw bytes of a variant's metadata.json (what a release signature covers)."""
    path = Path(variant_dir) / METADATA_FILE
    try:
        return path.read_bytes()
    except (FileNotFoundError, NotADirectoryError):
        raise MetadataError(f"{path} does not exist: {variant_dir} is not a built variant") from None
    except OSError as e:
        raise MetadataError(f"cannot read {path}: {e.strerror or e}") from None


def parse_metadata(raw: bytes, source: str) -> Metadata:
    """Parse metadata.json bytes; ``source`` names them in errors."""
    try:
        data = json.loads(raw.decode("utf-8"))
    except ValueError as e:  # not UTF-8, not JSON, or a number longer than Python reads
        raise MetadataError(f"{source}: not valid JSON ({e})") from None
    except RecursionError:
        raise MetadataError(f"{source}: JSON nested too deeply to be metadata") from None
    return Metadata.from_json(data, source)


def read_metadata(variant_dir: Path) -> Metadata:
    raw = read_metadata_bytes(variant_dir)
    return complete_digest(parse_metadata(raw, str(Path(variant_dir) / METADATA_FILE)),
                           variant_dir)


HUB_DIGEST_SUFFIX = ".hub-digest.json"
"""Sidecar of a cached variant without a digest: ``{relpath: base64 sha256}`` of the files,
written at fetch after they matched the hub's own content hashes."""


def hub_digest_path(variant_dir: Path) -> Path:
    variant_dir = Path(variant_dir)
    return variant_dir.parent / f"{variant_dir.name}{HUB_DIGEST_SUFFIX}"


def complete_digest(metadata: Metadata, variant_dir: Path) -> Metadata:
    """``metadata`` with the digest recorded at fetch when its own has none.

    A variant with neither (an ecosystem build outside the cache, or a cache entry
    whose record is gone) is refused: nothing unverified is executed.
    """
    if metadata.digest_files:
        return metadata
    path = hub_digest_path(variant_dir)
    try:
        recorded = json.loads(path.read_text())
    except FileNotFoundError:
        raise IntegrityError(
            f"{variant_dir}: metadata.json has no digest (an ecosystem build) and no hub "
            "content hashes were recorded for it; load it from a hub so they are checked "
            "and recorded, or rebuild it with builder build"
        ) from None
    except (OSError, ValueError) as e:
        raise IntegrityError(f"{path}: unreadable record of the hub's hashes ({e}); run "
                             "`kernelhub cache clear`") from None
    if not isinstance(recorded, dict) or not recorded or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in recorded.items()):
        raise IntegrityError(f"{path}: malformed record of the hub's hashes; run "
                             "`kernelhub cache clear`")
    return replace(metadata, digest_files=recorded)


def write_metadata(variant_dir: Path, metadata: Metadata) -> None:
    path = Path(variant_dir) / METADATA_FILE
    path.write_text(json.dumps(metadata.to_json(), indent=2, sort_keys=False) + "\n")


def stored_files(variant_dir: Path) -> list[str]:
    """Every file of a variant dir as hubs store it, as sorted POSIX relative paths.

    The one definition of a variant's files: digests cover these (but metadata.json) and
    publishing sends exactly these. Bytecode caches are left out: they are per-interpreter
    and would make identical builds differ.
    """
    root = Path(variant_dir)
    found: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIPPED_DIRS)
        for name in filenames:
            if not name.endswith(_SKIPPED_SUFFIXES):
                found.append((Path(dirpath) / name).relative_to(root).as_posix())
    return sorted(found)


def is_digested(rel: str) -> bool:
    """Whether the digest covers the stored file ``rel``: all but metadata.json and the
    signatures of it."""
    return rel != METADATA_FILE and rel not in SIGNATURE_SIDECARS


def variant_files(variant_dir: Path) -> list[str]:
    """Every file the digest covers: the stored files but metadata.json and its signatures."""
    return [rel for rel in stored_files(variant_dir) if is_digested(rel)]


def file_digest(path: Path) -> str:
    """base64 of the sha256 of one file, the encoding the ecosystem uses."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return base64.b64encode(h.digest()).decode("ascii")


def compute_digests(variant_dir: Path) -> dict[str, str]:
    return {rel: file_digest(Path(variant_dir) / rel) for rel in variant_files(variant_dir)}


def verify_variant(variant_dir: Path, metadata: Metadata | None = None) -> Metadata:
    """Check every file against the recorded digest before anything is imported.

    Extra files are refused too: an added ``.py`` would run just like a changed one.
    """
    variant_dir = Path(variant_dir)
    metadata = metadata or read_metadata(variant_dir)
    present = variant_files(variant_dir)
    expected = set(metadata.digest_files)
    actual = {rel: file_digest(variant_dir / rel) for rel in present if rel in expected}
    check_digests(variant_dir, metadata, actual, present=set(present))
    return metadata


def check_digests(
    variant_dir: Path,
    metadata: Metadata,
    actual: dict[str, str],
    present: set[str] | None = None,
) -> None:
    """Compare the digests of the files found (``actual``) with the recorded ones.

    ``present`` is every file found, when not all of them were hashed. Missing, extra
    and changed files each raise IntegrityError naming the file.
    """
    present = set(actual) if present is None else present
    expected = set(metadata.digest_files)
    for rel in sorted(expected - present):
        raise IntegrityError(f"{variant_dir / rel}: listed in metadata.json but missing")
    for rel in sorted(present - expected):
        raise IntegrityError(
            f"{variant_dir / rel}: not listed in metadata.json's digest; refusing to load a "
            "variant with unexpected files"
        )
    for rel in sorted(expected):
        if actual[rel] != metadata.digest_files[rel]:
            raise IntegrityError(
                f"{variant_dir / rel}: sha256 does not match metadata.json; the file was "
                "changed after the build. Delete the cached variant (kernelhub cache clear) "
                "to fetch it again."
            )


def dirty_sources(provenance: Mapping[str, Any]) -> list[str]:
    """Which sources of a variant had uncommitted changes (``provenance``'s ``dirty``
    flags): ``kernel source``, ``kernel-builder``. Read here, with the rest of
    metadata.json, so a load of a clean build needs nothing more (:mod:`.provenance`
    warns about the others)."""
    found = []
    for key, label in (("kernel", "kernel source"), ("kernel-builder", "kernel-builder")):
        part = provenance.get(key)
        if isinstance(part, Mapping) and part.get("dirty") is True:
            found.append(label)
    return found
