"""The release files of a Hub-API publish: :mod:`kernelhub_builder.ship.signed_tree`'s rule on the
files of one Hub commit.

A signed publish adds ``release.json`` and ``release.json.sig`` to the same commit as the
variants, signing every variant the branch holds after it: the staged ones from their
local files, the ones earlier publishes left on the branch from the server, each checked
against the blob id (or LFS sha256) the server lists for it, so what is signed is what the
branch head holds. An unsigned publish deletes release files an earlier signed publish
left, since they no longer describe the tree (as LocalPublisher does).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from huggingface_hub import CommitOperationAdd, CommitOperationDelete
from huggingface_hub.hf_api import RepoFile
from kernelhub.errors import HubError
from kernelhub.formats.metadata import METADATA_FILE
from kernelhub.formats.release_manifest import RELEASE_FILE, SIGNATURE_FILE, Signer
from kernelhub.hub.base import BUILD_DIR
from kernelhub.hub.hashes import git_blob_id

from .signed_tree import signed_release_files
from .staged import StagedFile

CommitOperation = CommitOperationAdd | CommitOperationDelete
RemoteVariants = dict[str, dict[str, RepoFile]]
"""Variant name → (path inside the variant → the file on the hub)."""
ReadFiles = Callable[[list[str]], dict[str, bytes]]
"""Download these repo paths at the branch head: path → bytes."""

RELEASE_PATHS = (RELEASE_FILE, SIGNATURE_FILE)


@dataclass(frozen=True)
class ReleaseStep:
    """What the commit does with the release files."""

    operations: list[CommitOperation] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)
    """The operations in words, for the publish's report."""
    signed: list[str] = field(default_factory=list)
    """Every variant the new release signature covers (empty: unsigned)."""


def file_matches(entry: RepoFile, data: bytes) -> bool:
    """Whether ``data`` is the file the hub lists: its LFS sha256, else its git blob id."""
    if entry.lfs is not None:
        return hashlib.sha256(data).hexdigest() == entry.lfs.sha256
    return git_blob_id(data).hex() == entry.blob_id


def release_step(
    repo_id: str, release: str | None, sign: Signer | None, *,
    after: Sequence[str], staged: Mapping[str, list[StagedFile]], before: RemoteVariants,
    present: Mapping[str, RepoFile], read: ReadFiles,
) -> ReleaseStep:
    """The release-file operations of a commit whose tree holds the variants ``after``.

    ``before`` lists the variants on the branch head, ``present`` the release files at
    its root; ``read`` downloads files of the branch head.
    """
    if sign is None or release is None:
        gone = [path for path in RELEASE_PATHS if path in present]
        return ReleaseStep(
            [CommitOperationDelete(path_in_repo=path) for path in gone],
            [f"  delete {path} (this publish is unsigned)" for path in gone])
    metadata: dict[str, bytes | None] = {}
    wanted: dict[str, str] = {}
    for name in after:
        path = f"{BUILD_DIR}/{name}/{METADATA_FILE}"
        if name in staged:
            local = [f.source for f in staged[name] if f.path_in_repo == path]
            metadata[name] = local[0].read_bytes() if local else None
        elif METADATA_FILE in before.get(name, {}):
            wanted[path] = name
        else:
            metadata[name] = None
    fetched = read(sorted(wanted)) if wanted else {}
    for path, name in wanted.items():
        data = fetched.get(path)
        if data is None or not file_matches(before[name][METADATA_FILE], data):
            raise HubError(
                f"cannot sign {repo_id}: the server sent a {path} that is not the file its "
                "listing of the branch names; nothing was published, try again"
            )
        metadata[name] = data
    files = signed_release_files(repo_id, release, metadata, sign)
    changed = {path: data for path, data in files.items()
               if path not in present or not file_matches(present[path], data)}
    return ReleaseStep(
        [CommitOperationAdd(path_in_repo=path, path_or_fileobj=data)
         for path, data in changed.items()],
        [f"  add    {path}" for path in changed],
        sorted(metadata))
