"""The signed release files of a publish: a manifest over every variant the new tree holds.

:func:`signed_release_files` is the one rule both publishers apply (which variants can be
signed, what is signed); :func:`with_release_files` applies it to a git tree for
LocalPublisher, and HfPublisher to the files of a Hub-API commit. Each publisher calls it
inside its compare-and-swap loop, so the manifest always describes exactly the tree that
gets committed, even when a concurrent publish of other variants forced a rebuild on a
newer branch head.
"""

from __future__ import annotations

from collections.abc import Mapping

from kernelhub.errors import HubError, MetadataError
from kernelhub.formats.metadata import parse_metadata
from kernelhub.formats.release_manifest import (
    RELEASE_FILE,
    SIGNATURE_FILE,
    ReleaseManifest,
    Signer,
    metadata_sha256,
    release_files,
)
from kernelhub.hub.base import BUILD_DIR
from kernelhub.hub.git import GitRepo, IndexEntry


def with_release_files(
    repo: GitRepo,
    repo_id: str,
    tree: str,
    variant_trees: dict[str, str],
    release: str | None,
    sign: Signer | None,
) -> tuple[str, list[str]]:
    """``tree`` with a signed manifest over all its variants, or with none when unsigned.

    The manifest covers every variant in the resulting tree, including those earlier
    publishes left on the branch: the signature vouches for the release as it is tagged.
    """
    present = sorted(e.path for e in repo.ls_tree(tree, RELEASE_FILE, SIGNATURE_FILE))
    if sign is None or release is None:
        return (repo.write_tree(tree, present, []) if present else tree), []
    names = sorted(variant_trees)
    paths = {f"{BUILD_DIR}/{name}/metadata.json": name for name in names}
    found = {e.path: e.oid for e in repo.ls_tree(tree, *paths) if e.kind == "blob"}
    readable = [p for p in paths if p in found]
    blobs = dict(zip(readable, repo.read_blobs([found[p] for p in readable]), strict=True))
    metadata = {name: blobs.get(path) for path, name in paths.items()}
    files = signed_release_files(repo_id, release, metadata, sign)
    add = [IndexEntry("100644", repo.hash_blob(data), name) for name, data in files.items()]
    return repo.write_tree(tree, [], add), names


def signed_release_files(
    repo_id: str, release: str, metadata: Mapping[str, bytes | None], sign: Signer
) -> dict[str, bytes]:
    """The release files (path → bytes) signing every variant of the new tree.

    ``metadata`` maps each variant the tree will hold (those of this publish and those
    earlier publishes left on the branch) to its metadata.json bytes, None where it has
    none. Refused, naming the variants: one without metadata, or whose metadata lists no
    file digests (an ecosystem build), since the signature would not cover its files.
    """
    if missing := sorted(name for name, data in metadata.items() if data is None):
        raise HubError(
            f"cannot sign {repo_id}: variant(s) {', '.join(missing)} on the branch have no "
            "metadata.json to sign; rebuild and publish them, or remove them from the branch"
        )
    signed = {name: data for name, data in metadata.items() if data is not None}
    if undigested := sorted(n for n, data in signed.items() if not _lists_digests(data, n)):
        raise HubError(
            f"cannot sign {repo_id}: the metadata.json of {', '.join(undigested)} lists no "
            "file digests (an ecosystem build?), so a signature would not cover its files; "
            "rebuild it with builder build, or publish unsigned"
        )
    digests = {name: metadata_sha256(data) for name, data in signed.items()}
    return release_files(ReleaseManifest(repo_id, release, digests), sign)


def release_of_tag(repo_id: str, tag: str | None) -> str:
    """The release a signed publish signs for: its tag without the ``v``."""
    if tag is None or not tag.startswith("v") or len(tag) < 2:
        raise HubError(
            f"cannot sign a publish to {repo_id} without a release tag v<release>; "
            "publish with builder publish, which tags every release"
        )
    return tag[1:]


def _lists_digests(raw: bytes, where: str) -> bool:
    try:
        return bool(parse_metadata(raw, where).digest_files)
    except MetadataError:
        return False
