"""HfHub: kernels on the Hugging Face Hub, or on any server that speaks its API.

Reads go through huggingface_hub: refs from ``list_repo_refs``, variants from
``list_repo_tree("build")``, and a fetch downloads only ``build/<variant>/*`` with
``snapshot_download``. The same code reads a LocalHub served by olah (see
:mod:`kernelhub.hub.local`), which the tests exercise.

Publishing uses ``create_commit`` with ``parent_commit`` as the compare-and-swap and
``create_tag`` for releases. olah is a read-only mirror, so publishing cannot be tested
against it; the pieces that decide what to send (:func:`commit_operations`,
:func:`same_content`) are pure functions with tests of their own. Unlike LocalHub, the
branch and the tag cannot move in one transaction here: the tag is written right after
the commit lands.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from urllib.parse import urlsplit

from huggingface_hub import (
    CommitOperationAdd,
    CommitOperationDelete,
    HfApi,
    constants,
    snapshot_download,
)
from huggingface_hub.errors import (
    EntryNotFoundError,
    HfHubHTTPError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)
from huggingface_hub.hf_api import RepoFile

from ..errors import HubError, PublishConflictError, RepoNotFoundError, VersionSpecError
from ..versions import Refs
from .base import BUILD_DIR, PublishResult
from .staged import StagedFile, check_variant_dir, staged_files

CommitOperation = CommitOperationAdd | CommitOperationDelete
RemoteVariants = dict[str, dict[str, RepoFile]]
"""Variant name → (path inside the variant → the file on the hub)."""

_MAX_ATTEMPTS = 3
_PRECONDITION_FAILED = 412


class HfHub:
    """A hub reached through huggingface_hub at ``endpoint`` (default: ``HF_ENDPOINT``)."""

    def __init__(self, endpoint: str | None = None, token: str | bool | None = None) -> None:
        # HF_ENDPOINT is read here, not through huggingface_hub.constants, which froze it at
        # import time.
        chosen = endpoint or os.environ.get("HF_ENDPOINT") or constants.ENDPOINT
        self.endpoint = chosen.rstrip("/")
        self.token = token
        self.api = HfApi(endpoint=self.endpoint, token=token)

    def __repr__(self) -> str:
        return f"HfHub({self.endpoint!r})"

    @property
    def key(self) -> str:
        parts = urlsplit(self.endpoint)
        host = parts.hostname or "unknown"
        if parts.port is not None:
            host = f"{host}-{parts.port}"
        return "hf-" + re.sub(r"[^A-Za-z0-9.-]", "_", host)

    # -- reading -----------------------------------------------------------------------

    def list_refs(self, repo_id: str) -> Refs:
        try:
            refs = self.api.list_repo_refs(repo_id, repo_type="model")
        except (RepositoryNotFoundError, EntryNotFoundError):
            raise RepoNotFoundError(
                f"no repository {repo_id} on {self.endpoint}; check the name, and for a "
                "private repository set HF_TOKEN"
            ) from None
        except HfHubHTTPError as exc:
            raise HubError(f"{self.endpoint} could not list the refs of {repo_id}: {exc}") from exc
        return Refs(
            branches={b.name: b.target_commit for b in refs.branches},
            tags={t.name: t.target_commit for t in refs.tags},
        )

    def list_variants(self, repo_id: str, commit: str) -> list[str]:
        try:
            entries = list(
                self.api.list_repo_tree(
                    repo_id, path_in_repo=BUILD_DIR, revision=commit, repo_type="model"
                )
            )
        except (RepositoryNotFoundError, RevisionNotFoundError, EntryNotFoundError):
            # Servers differ in which of these they send for a missing repo, revision or
            # build/ dir (olah answers "repository not found" for a missing path); ask
            # again more precisely to tell them apart.
            self._check_revision(repo_id, commit)
            return []
        except HfHubHTTPError as exc:
            raise HubError(f"{self.endpoint} could not list {repo_id}@{commit}: {exc}") from exc
        return sorted(e.path.rsplit("/", 1)[-1] for e in entries if not isinstance(e, RepoFile))

    def _check_revision(self, repo_id: str, commit: str) -> None:
        """Raise RepoNotFoundError / VersionSpecError unless ``commit`` exists in the repo."""
        refs = self.list_refs(repo_id)
        try:
            # The listing is lazy: taking its first entry is what sends the request.
            next(iter(self.api.list_repo_tree(repo_id, revision=commit, repo_type="model")), None)
        except (RepositoryNotFoundError, RevisionNotFoundError, EntryNotFoundError):
            raise VersionSpecError(
                f"{repo_id} has no commit {commit!r} on {self.endpoint}; {refs.describe()}"
            ) from None

    def fetch_variant(self, repo_id: str, commit: str, variant: str, dest: Path) -> None:
        check_variant_dir(variant)
        dest.mkdir(parents=True, exist_ok=True)
        if any(dest.iterdir()):
            raise HubError(f"cannot fetch {variant} into {dest}: the directory is not empty")
        # Download next to dest so the final moves are renames on one filesystem, and
        # keep huggingface_hub's .cache/ bookkeeping out of dest.
        with tempfile.TemporaryDirectory(prefix=".kernelhub-download-", dir=dest.parent) as tmp:
            try:
                snapshot_download(
                    repo_id,
                    repo_type="model",
                    revision=commit,
                    allow_patterns=[f"{BUILD_DIR}/{variant}/*"],
                    local_dir=tmp,
                    endpoint=self.endpoint,
                    token=self.token,
                )
            except (RepositoryNotFoundError, RevisionNotFoundError, EntryNotFoundError) as exc:
                self._check_revision(repo_id, commit)
                raise HubError(
                    f"{self.endpoint} failed to send {repo_id}@{commit} variant {variant}: {exc}"
                ) from exc
            except HfHubHTTPError as exc:
                raise HubError(
                    f"{self.endpoint} failed to send {repo_id}@{commit} variant {variant}: {exc}"
                ) from exc
            source = Path(tmp) / BUILD_DIR / variant
            if not source.is_dir() or not any(source.iterdir()):
                available = ", ".join(self.list_variants(repo_id, commit)) or "none"
                raise HubError(
                    f"{repo_id} at {commit[:12]} has no variant {variant}; variants: {available}"
                )
            for item in source.iterdir():
                shutil.move(str(item), dest / item.name)

    def trusted_orgs(self) -> frozenset[str]:
        """A remote hub declares no trust of its own; the user's configuration decides."""
        return frozenset()

    # -- publishing --------------------------------------------------------------------

    def publish(
        self,
        repo_id: str,
        branch: str,
        variants: dict[str, Path],
        *,
        tag: str | None,
        message: str,
        dry_run: bool = False,
    ) -> PublishResult:
        """Commit the variants to ``branch`` with ``create_commit``; see the module docstring.

        Only added or replaced variants are uploaded. ``parent_commit`` makes the commit
        fail if the branch moved since it was read; the publish then starts over on the new
        head, a few times.
        """
        if not variants:
            raise HubError(f"nothing to publish to {repo_id}: no variants were given")
        staged = {name: staged_files(name, Path(path)) for name, path in sorted(variants.items())}
        created = not self.api.repo_exists(repo_id, repo_type="model")
        if created and dry_run:
            return PublishResult(
                repo_id,
                branch,
                commit=None,
                previous=None,
                tag=tag,
                added=sorted(staged),
                created_repo=True,
                dry_run=True,
            )
        if created:
            self.api.create_repo(repo_id, repo_type="model", exist_ok=True)

        for _ in range(_MAX_ATTEMPTS):
            refs = self.list_refs(repo_id)
            old = refs.branches.get(branch)
            before = self._remote_variants(repo_id, old) if old else {}
            added, replaced, unchanged = classify(staged, before)
            if (
                tag is not None
                and tag in refs.tags
                and (added or replaced or refs.tags[tag] != old)
            ):
                self._check_release(repo_id, branch, tag, refs.tags[tag], old, staged, before)
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
                changed = {name: staged[name] for name in added + replaced}
                operations = commit_operations(changed, existing=before)
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
            if tag is not None and head is not None and refs.tags.get(tag) != head:
                if tag in refs.tags:
                    self.api.delete_tag(repo_id, tag=tag, repo_type="model")
                self.api.create_tag(repo_id, tag=tag, revision=head, repo_type="model")
            return PublishResult(
                repo_id,
                branch,
                commit=head,
                previous=result.previous,
                tag=tag,
                added=added,
                replaced=replaced,
                unchanged=unchanged,
                created_repo=created,
            )
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
        """Same rule as LocalHub: a release tag only moves forward to gain variants."""
        on_branch = old is not None and (
            tagged == old
            or tagged in {c.commit_id for c in self.api.list_repo_commits(repo_id, revision=old)}
        )
        if not on_branch:
            raise PublishConflictError(
                f"release {tag} of {repo_id} already exists at {tagged[:12]}, which is not on "
                f"branch {branch}; bump general.release. Nothing was published"
            )
        for name, files in sorted(self._remote_variants(repo_id, tagged).items()):
            if name in staged:
                same = same_content(staged[name], files)
            else:
                same = _blob_ids(files) == _blob_ids(before.get(name, {}))
            if not same:
                raise PublishConflictError(
                    f"release {tag} of {repo_id} already has variant {name} with different "
                    "content; bump general.release. Nothing was published"
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
