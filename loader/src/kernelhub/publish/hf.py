"""Publishing to the Hugging Face Hub, or to any server that speaks its API.

``create_commit`` with ``parent_commit`` is the compare-and-swap and ``create_tag`` makes
releases. olah is a read-only mirror, so publishing cannot be tested against it; the
pieces that decide what to send (:func:`commit_operations`, :func:`same_content`) are
pure functions with tests of their own. Unlike a LocalHub, the branch and the tag cannot
move in one transaction here: the tag is written right after the commit lands.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import replace
from pathlib import Path

from huggingface_hub import CommitOperationAdd, CommitOperationDelete
from huggingface_hub.errors import EntryNotFoundError, HfHubHTTPError
from huggingface_hub.hf_api import RepoFile

from ..errors import HubError, PublishConflictError
from ..hub.base import BUILD_DIR
from ..hub.hf import HfHub
from ..release_manifest import Signer
from .base import PublishResult
from .release import check_release, tag_needs_update
from .staged import StagedFile, stage_variants

CommitOperation = CommitOperationAdd | CommitOperationDelete
RemoteVariants = dict[str, dict[str, RepoFile]]
"""Variant name → (path inside the variant → the file on the hub)."""

_MAX_ATTEMPTS = 3
_PRECONDITION_FAILED = 412


class HfPublisher(HfHub):
    """An HfHub that can also be published to (reading stays :class:`HfHub`'s)."""

    def __repr__(self) -> str:
        return f"HfPublisher({self.endpoint!r})"

    def publish(
        self, repo_id: str, branch: str, variants: dict[str, Path], *,
        tag: str | None, message: str, dry_run: bool = False, sign: Signer | None = None,
    ) -> PublishResult:
        """Commit the variants to ``branch`` with ``create_commit``; see the module docstring.

        Only added or replaced variants are uploaded. ``parent_commit`` makes the commit
        fail if the branch moved since it was read; the publish then starts over on the new
        head, a few times.
        """
        if sign is not None:
            raise HubError(
                f"signed publishing to {self.endpoint} is not supported yet; publish signed "
                "releases to a LocalHub (served to clients through olah), or publish unsigned"
            )
        staged = stage_variants(repo_id, variants)
        created = not self.api.repo_exists(repo_id, repo_type="model")
        if created and dry_run:
            return PublishResult.dry_run_new_repo(repo_id, branch, tag, list(staged))
        if created:
            self.api.create_repo(repo_id, repo_type="model", exist_ok=True)

        for _ in range(_MAX_ATTEMPTS):
            refs = self.list_refs(repo_id)
            old = refs.branches.get(branch)
            before = self._remote_variants(repo_id, old) if old else {}
            added, replaced, unchanged = classify(staged, before)
            tagged = refs.tags.get(tag) if tag is not None else None
            changed = bool(added or replaced)
            if tag is not None and tagged is not None and tag_needs_update(tagged, old, changed):
                self._check_release(repo_id, branch, tag, tagged, old, staged, before)
            result = PublishResult(
                repo_id,
                branch,
                commit=old,
                previous=old,
                tag=tag,
                added=added,
                replaced=replaced,
                unchanged=unchanged,
                created_repo=created,
                dry_run=dry_run,
            )
            if dry_run:
                return result
            head = old
            if added or replaced:
                if old is None:
                    self.api.create_branch(repo_id, branch=branch, exist_ok=True)
                    old = self.list_refs(repo_id).branches[branch]
                to_send = {name: staged[name] for name in added + replaced}
                operations = commit_operations(to_send, existing=before)
                try:
                    info = self.api.create_commit(
                        repo_id,
                        operations,
                        commit_message=message,
                        repo_type="model",
                        revision=branch,
                        parent_commit=old,
                    )
                except HfHubHTTPError as exc:
                    status = exc.response.status_code if exc.response is not None else None
                    if status == _PRECONDITION_FAILED:
                        continue  # the branch moved: rebuild on the new head
                    raise HubError(
                        f"publishing to {repo_id} on {self.endpoint} failed: {exc}"
                    ) from exc
                head = info.oid
            if tag is not None and head is not None and tagged != head:
                if tagged is not None:
                    self.api.delete_tag(repo_id, tag=tag, repo_type="model")
                self.api.create_tag(repo_id, tag=tag, revision=head, repo_type="model")
            return replace(result, commit=head)
        raise PublishConflictError(
            f"could not publish to {repo_id} branch {branch} on {self.endpoint}: it kept "
            f"moving under {_MAX_ATTEMPTS} attempts. Nothing was changed; try again"
        )

    def _remote_variants(self, repo_id: str, commit: str) -> RemoteVariants:
        found: RemoteVariants = {}
        try:
            entries = self.api.list_repo_tree(
                repo_id, path_in_repo=BUILD_DIR, revision=commit, recursive=True, repo_type="model"
            )
            for entry in entries:
                parts = entry.path.split("/", 2)
                if isinstance(entry, RepoFile) and len(parts) == 3:
                    found.setdefault(parts[1], {})[parts[2]] = entry
        except EntryNotFoundError:
            pass  # no build/ yet
        return found

    def _check_release(
        self,
        repo_id: str,
        branch: str,
        tag: str,
        tagged: str,
        old: str | None,
        staged: Mapping[str, list[StagedFile]],
        before: RemoteVariants,
    ) -> None:
        """The release rule of :mod:`kernelhub.publish.release`, on Hub file listings."""
        on_branch = old is not None and (
            tagged == old
            or tagged in {c.commit_id for c in self.api.list_repo_commits(repo_id, revision=old)}
        )
        at_tag = self._remote_variants(repo_id, tagged) if on_branch else {}

        def keeps_content(name: str) -> bool:
            if name in staged:
                return same_content(staged[name], at_tag[name])
            return _blob_ids(at_tag[name]) == _blob_ids(before.get(name, {}))

        check_release(
            repo_id,
            branch,
            tag,
            tagged,
            on_branch=on_branch,
            tagged_variants=at_tag,
            keeps_content=keeps_content,
        )


def classify(
    staged: Mapping[str, list[StagedFile]], before: RemoteVariants
) -> tuple[list[str], list[str], list[str]]:
    """Split staged variants into (added, replaced, unchanged) against the branch head."""
    added, replaced, unchanged = [], [], []
    for name in sorted(staged):
        if name not in before:
            added.append(name)
        elif same_content(staged[name], before[name]):
            unchanged.append(name)
        else:
            replaced.append(name)
    return added, replaced, unchanged


def commit_operations(
    variants: Mapping[str, list[StagedFile]], existing: Iterable[str]
) -> list[CommitOperation]:
    """The operations of one commit that replaces exactly these variant dirs.

    A variant dir that exists on the branch is deleted first, so files dropped from the
    new build don't linger; then every staged file is added.
    """
    present = set(existing)
    operations: list[CommitOperation] = [
        CommitOperationDelete(path_in_repo=f"{BUILD_DIR}/{name}/", is_folder=True)
        for name in sorted(variants)
        if name in present
    ]
    for name in sorted(variants):
        operations += [
            CommitOperationAdd(path_in_repo=f.path_in_repo, path_or_fileobj=f.source)
            for f in variants[name]
        ]
    return operations


def same_content(local: list[StagedFile], remote: Mapping[str, RepoFile]) -> bool:
    """Whether a staged variant equals the files of a variant on the hub.

    The hub reports a git blob id for plain files and a sha256 for LFS files; each local
    file is hashed the same way, so nothing is downloaded to compare.
    """
    prefix_len = len(BUILD_DIR) + 1
    by_rel = {f.path_in_repo[prefix_len:].split("/", 1)[1]: f.source for f in local}
    if set(by_rel) != set(remote):
        return False
    for rel, source in by_rel.items():
        entry = remote[rel]
        data = source.read_bytes()
        if entry.lfs is not None:
            if hashlib.sha256(data).hexdigest() != entry.lfs.sha256:
                return False
        elif git_blob_id(data) != entry.blob_id:
            return False
    return True


def git_blob_id(data: bytes) -> str:
    """The id git (and so the Hub) gives a file's bytes."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


def _blob_ids(files: Mapping[str, RepoFile]) -> dict[str, str]:
    return {rel: (f.lfs.sha256 if f.lfs is not None else f.blob_id) for rel, f in files.items()}
