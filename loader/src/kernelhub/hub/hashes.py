"""The hub's own content hashes of a fetched variant, and what the cache keeps of them.

At fetch the cache asks the hub for its content hash of every file of the variant — the
git blob id on a LocalHub, the Hub's per-file hash from its tree listing on HfHub: the
LFS sha256 for a file stored with Git LFS, else the git blob id. Two things use them:

* Variants without a digest (built by the ecosystem's builder): their metadata.json lists
  no per-file sha256, so the fetched bytes are compared with the hub's hashes, and what
  matched is recorded next to the cached variant as a digest in our format
  (:data:`kernelhub.formats.metadata.HUB_DIGEST_SUFFIX`); every later load checks the files
  against that record exactly as it checks a digest from metadata.json.
* Lock files: the ecosystem's ``git_lfs_concat`` hash takes an LFS file's sha256 and any
  other file's blob id, so which files the hub stores with LFS is recorded next to the
  cached variant (:data:`LFS_SUFFIX`), and :func:`cached_variant_hash` hashes each cached
  file the way the hub stores it — offline, from the bytes on disk. The record only says
  which hash to take of a file, never a hash, so a forged record can only make a lock
  check fail.
"""

from __future__ import annotations

# PEP 810: imported when first used (inert before Python 3.15)
__lazy_modules__ = {
    "kernelhub.errors", "kernelhub.formats.metadata", "kernelhub.hub.base",
    "kernelhub.value_types",
}

import hashlib
import json
import os
from collections.abc import Collection
from pathlib import Path

from ..errors import IntegrityError
from ..formats.metadata import Metadata, file_digest, is_digested, stored_files
from ..value_types import replace
from .base import HashListingHub, Hub

LFS_SUFFIX = ".hub-lfs.json"
"""Sidecar of a cached variant some of whose files the hub stores with Git LFS: a JSON list
of their paths relative to the variant dir. Absent: no file is stored with LFS."""

HubHashes = dict[str, str]
"""Path inside the variant → ``git:<blob id>`` or ``sha256:<hex>`` (stored with LFS)."""


def _content_hash(data: bytes, kind: str) -> str:
    if kind == "git":
        return git_blob_id(data).hex()
    if kind == "sha256":
        return hashlib.sha256(data).hexdigest()
    raise IntegrityError(f"unknown content hash kind {kind!r} from the hub")


def matches_hash(data: bytes, expected: str) -> bool:
    """Whether ``data`` has the hub's content hash ``expected`` (``git:…``/``sha256:…``;
    an unknown kind never matches)."""
    kind, _, want = expected.partition(":")
    return kind in ("git", "sha256") and _content_hash(data, kind) == want


def hub_hashes(hub: Hub, repo_id: str, commit: str, variant: str) -> HubHashes | None:
    """The hub's content hash of every file of a variant; None for a hub that cannot list
    them (a variant with a digest is then still verified by it)."""
    if not isinstance(hub, HashListingHub):
        return None
    return hub.file_hashes(repo_id, commit, variant)


def check_against_hub(hub: Hub, repo_id: str, commit: str, variant: str, fetched: Path,
                      metadata: Metadata, expected: HubHashes | None) -> Metadata:
    """Verify ``fetched`` against the hub's content hashes ``expected`` (from
    :func:`hub_hashes`); return metadata with a digest."""
    where = f"{variant} of {repo_id} at {commit[:12]}"
    if expected is None:
        raise IntegrityError(
            f"{where} has no digest in its metadata.json and {hub!r} cannot list the content "
            "hashes to check it against; refusing to load unverified code"
        )
    present = stored_files(fetched)
    for rel in sorted(set(expected) - set(present)):
        raise IntegrityError(f"{where}: {rel} is on the hub but was not fetched")
    for rel in sorted(set(present) - set(expected)):
        raise IntegrityError(f"{where}: {rel} was fetched but the hub does not list it")
    for rel in present:
        kind, _, want = expected[rel].partition(":")
        if _content_hash((fetched / rel).read_bytes(), kind) != want:
            raise IntegrityError(
                f"{where}: {rel} does not match the hub's {kind} hash {want[:12]}…; the "
                "download was corrupted or altered, nothing of it was kept"
            )
    recorded = {rel: file_digest(fetched / rel) for rel in present if is_digested(rel)}
    return replace(metadata, digest_files=recorded)


def write_record(path: Path, metadata: Metadata) -> None:
    """Write the digest that matched the hub (atomically)."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(dict(sorted(metadata.digest_files.items())), indent=1))
    os.replace(tmp, path)


def lfs_record_path(variant_dir: Path) -> Path:
    variant_dir = Path(variant_dir)
    return variant_dir.parent / f"{variant_dir.name}{LFS_SUFFIX}"


def write_lfs_record(variant_dir: Path, hashes: HubHashes | None) -> None:
    """Record which files of the variant the hub stores with LFS, if any (atomically)."""
    lfs = sorted(rel for rel, value in (hashes or {}).items() if value.startswith("sha256:"))
    if not lfs:
        return
    path = lfs_record_path(variant_dir)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(lfs))
    os.replace(tmp, path)


def read_lfs_record(variant_dir: Path) -> frozenset[str]:
    """The paths the hub stores with LFS, as recorded at fetch (empty: none, or unknown)."""
    try:
        data = json.loads(lfs_record_path(variant_dir).read_text())
    except FileNotFoundError:
        return frozenset()
    except (OSError, ValueError) as e:
        raise IntegrityError(
            f"{lfs_record_path(variant_dir)} is unreadable ({type(e).__name__}); run "
            "`kernelhub cache clear` and load the kernel again") from None
    if not isinstance(data, list) or not all(isinstance(p, str) for p in data):
        raise IntegrityError(
            f"{lfs_record_path(variant_dir)} is not a list of paths; run `kernelhub cache "
            "clear` and load the kernel again")
    return frozenset(data)


def cached_variant_hash(variant_dir: Path) -> str:
    """The ecosystem's ``git_lfs_concat`` of a cached variant, each file hashed the way its
    hub stores it (LFS sha256 or git blob id)."""
    return variant_dir_hash(variant_dir, read_lfs_record(variant_dir))


# -- the ecosystem's variant hash (lock files) ------------------------------------------


def git_blob_id(data: bytes) -> bytes:
    """The git blob id (sha1 of ``blob <size>\\0<data>``) of a file's bytes."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).digest()


def git_lfs_concat(files: dict[str, bytes]) -> str:
    """The ecosystem's variant hash over ``relative path → blob id (or LFS sha256)``."""
    m = hashlib.sha256()
    for name, digest in sorted((p.encode("utf-8"), d) for p, d in files.items()):
        m.update(name)
        m.update(digest)
    return f"sha256-{m.hexdigest()}"


def variant_dir_hash(variant_dir: Path, lfs: Collection[str] = ()) -> str:
    """``git_lfs_concat`` of a variant directory: the files at ``lfs`` paths taken as Git
    LFS objects (their sha256), every other file as a git blob."""
    def digest(rel: str) -> bytes:
        data = (variant_dir / rel).read_bytes()
        return hashlib.sha256(data).digest() if rel in lfs else git_blob_id(data)

    return git_lfs_concat({rel: digest(rel) for rel in stored_files(variant_dir)})
