"""Variants without a digest (built by the ecosystem's builder): checked against the hub.

Such a variant's metadata.json lists no per-file sha256, so at fetch we ask the hub for
its own content hash of every file — the git blob id on a LocalHub, the Hub's per-file
hash from its tree listing (LFS sha256 or git blob id) on HfHub — and compare the fetched
bytes with it. What matched is recorded next to the cached variant as a digest in our
format (:data:`kernelhub.metadata.HUB_DIGEST_SUFFIX`), and every later load checks the
files against that record exactly as it checks a digest from metadata.json.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from pathlib import Path

from .errors import IntegrityError
from .hub.base import Hub
from .hub.guard import hub_call
from .lockfile import git_blob_id
from .metadata import Metadata, file_digest, stored_files


def _content_hash(data: bytes, kind: str) -> str:
    if kind == "git":
        return git_blob_id(data).hex()
    if kind == "sha256":
        return hashlib.sha256(data).hexdigest()
    raise IntegrityError(f"unknown content hash kind {kind!r} from the hub")


def check_against_hub(hub: Hub, repo_id: str, commit: str, variant: str, fetched: Path,
                      metadata: Metadata) -> Metadata:
    """Verify ``fetched`` against the hub's content hashes; return metadata with a digest."""
    file_hashes = getattr(hub, "file_hashes", None)
    where = f"{variant} of {repo_id} at {commit[:12]}"
    if file_hashes is None:
        raise IntegrityError(
            f"{where} has no digest in its metadata.json and {hub!r} cannot list the content "
            "hashes to check it against; refusing to load unverified code"
        )
    with hub_call(hub, f"listing the content hashes of {where}"):
        expected: dict[str, str] = file_hashes(repo_id, commit, variant)
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
    recorded = {rel: file_digest(fetched / rel) for rel in present if rel != "metadata.json"}
    return dataclasses.replace(metadata, digest_files=recorded)


def write_record(path: Path, metadata: Metadata) -> None:
    """Write the digest that matched the hub (atomically)."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(dict(sorted(metadata.digest_files.items())), indent=1))
    os.replace(tmp, path)
