"""Release files in a git tree: add a signed manifest over its variants, or drop stale ones.

Used by LocalPublisher.publish inside its compare-and-swap loop, so the manifest always
describes exactly the tree that gets committed, even when a concurrent publish of other
variants forced a rebuild of the tree on a newer branch head.
"""

from __future__ import annotations

from ..errors import HubError, MetadataError
from ..hub.base import BUILD_DIR
from ..hub.git import GitRepo, IndexEntry
from ..metadata import parse_metadata
from ..release_manifest import (
    RELEASE_FILE,
    SIGNATURE_FILE,
    ReleaseManifest,
    Signer,
    metadata_sha256,
    release_files,
)


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
    if missing := [paths[p] for p in paths if p not in found]:
        raise HubError(
            f"cannot sign {repo_id}: variant(s) {', '.join(missing)} on the branch have no "
            "metadata.json to sign; rebuild and publish them, or remove them from the branch"
        )
    blobs = dict(zip(paths, repo.read_blobs([found[p] for p in paths]), strict=True))
    if undigested := [paths[p] for p, data in blobs.items() if not _lists_digests(data, p)]:
        raise HubError(
            f"cannot sign {repo_id}: the metadata.json of {', '.join(undigested)} lists no "
            "file digests (an ecosystem build?), so a signature would not cover its files; "
            "rebuild it with builder build, or publish unsigned"
        )
    digests = {paths[p]: metadata_sha256(data) for p, data in blobs.items()}
    files = release_files(ReleaseManifest(repo_id, release, digests), sign)
    add = [IndexEntry("100644", repo.hash_blob(data), name) for name, data in files.items()]
    return repo.write_tree(tree, [], add), names


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
