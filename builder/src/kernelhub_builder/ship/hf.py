"""Publishing to the Hugging Face Hub, or to any server that speaks its API.

One publish, in this order, every step read from the server first so that ``dry_run``
reports exactly the operations a real run makes:

1. the repository: the Hub's ``kernel`` type, created when missing. The ecosystem's
   loaders (``kernels`` 0.17-0.19, and Transformers through them) ask for that type
   only, so a ``model`` repository (all a server without kernel repositories, such as
   olah, can hold, or an existing model repository) is refused unless the publisher
   allows it (``allow_model_repo``), and then the notes say who will not find it;
2. branch ``v<major>``, created from ``main`` when missing;
3. one ``create_commit`` on that branch with ``parent_commit`` as compare-and-swap,
   deleting and re-adding exactly the published variant dirs (and deleting the
   ``remove`` ones); retried on a fresh head when another publish got there first;
4. the release tag, created (or moved forward, within the release rule of
   :mod:`kernelhub_builder.ship.release`) to that commit;
5. ``README.md`` on ``main``, when given and different.

With ``sign``, the commit of step 3 also carries the signed release files over every
variant the branch holds after it (:mod:`kernelhub_builder.ship.hf_release`), so the
signature lands atomically with what it signs; the tag that follows only points at it.

Nothing is written before every read has succeeded and every check has passed, and the
variants land in one commit, so an error leaves no partial set of variants. The Hub API
cannot move a branch and a tag in one transaction: if the tag step fails after the
commit landed, the error says so, and running the same publish again only adds the tag.

Server errors become one-line :class:`~kernelhub.errors.HubError` subclasses: unreachable
server, timeout, 401/403 (with the token source that was used and how to get write
access), 404, 405/409 (a read-only server or a conflicting write), anything else with its
status. Large-file transfer (LFS/Xet) is left to huggingface_hub itself.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TypeVar

from huggingface_hub import CommitOperationAdd, CommitOperationDelete, constants, hf_hub_download
from huggingface_hub.errors import EntryNotFoundError, HfHubHTTPError, RepositoryNotFoundError
from huggingface_hub.hf_api import RepoFile
from huggingface_hub.utils import get_session
from kernelhub.errors import HubError, KernelHubError, PublishConflictError
from kernelhub.formats.metadata import METADATA_FILE, parse_metadata
from kernelhub.formats.release_manifest import Signer
from kernelhub.formats.variants import check_variant_dir
from kernelhub.hub.base import BUILD_DIR
from kernelhub.hub.hashes import git_blob_id as git_blob_digest
from kernelhub.hub.hf import HfHub, absent
from kernelhub.versions import Refs

from .base import PublishResult
from .hf_release import (
    RELEASE_PATHS,
    CommitOperation,
    ReleaseStep,
    RemoteVariants,
    file_matches,
    release_step,
)
from .release import check_release, tag_needs_update
from .signed_tree import release_of_tag
from .staged import StagedFile, stage_variants

try:  # huggingface_hub 2.x talks through httpx2, 1.x through httpx
    import httpx2 as _httpx
except ImportError:  # pragma: no cover - depends on the installed huggingface_hub
    import httpx as _httpx  # type: ignore[no-redef]

T = TypeVar("T")

_MAX_ATTEMPTS = 3
_PRECONDITION_FAILED = 412
TIMEOUT_ENV = "KERNELHUB_HUB_TIMEOUT"
DEFAULT_TIMEOUT = 60.0
README = "README.md"
README_BRANCH = "main"


class HubUnreachableError(HubError):
    """The server could not be reached, or did not answer in time."""


class HubAuthError(HubError, PermissionError):
    """The server refused the credentials (401) or their rights (403)."""


class HubRefusedError(HubError):
    """The server refused the operation: not found, not allowed, or a conflict."""


class ModelRepoRefusedError(HubRefusedError):
    """The publish would land in a model repository, which the ecosystem's loaders never
    read; nothing was written."""


ALLOW_MODEL_REPO = "--allow-model-repo (allow_model_repo=True)"
ECOSYSTEM_BLIND = ("the ecosystem's `kernels` loader (0.17-0.19) and Transformers through it "
                   "ask for kernel repositories only and will not find it; kernelhub loads it")


@dataclass(frozen=True)
class _Target:
    """Which repository type a publish uses, and what the user should be told about it."""

    repo_type: str
    exists: bool
    note: str | None = None


class HfPublisher(HfHub):
    """An HfHub that can also be published to (reading stays :class:`HfHub`'s)."""

    def __init__(self, endpoint: str | None = None, token: str | bool | None = None,
                 timeout: float | None = None, allow_model_repo: bool = False) -> None:
        super().__init__(endpoint, token)
        self.allow_model_repo = allow_model_repo
        self.timeout = timeout if timeout is not None else float(
            os.environ.get(TIMEOUT_ENV) or DEFAULT_TIMEOUT)

    def __repr__(self) -> str:
        return f"HfPublisher({self.endpoint!r})"

    # -- the publish -------------------------------------------------------------------

    def publish(
        self, repo_id: str, branch: str, variants: dict[str, Path], *,
        tag: str | None, message: str, dry_run: bool = False, sign: Signer | None = None,
        remove: Sequence[str] = (), private: bool = False, create_pr: bool = False,
        readme: str | None = None,
    ) -> PublishResult:
        """Publish as the module docstring says; ``readme`` is the text for main's README.

        ``private``: a repository this publish creates is private (an existing one keeps
        its visibility, said in a note). ``create_pr``: the commit opens a pull request
        against ``branch`` (which must exist) instead of moving it — what a publisher
        without write access to the repository can do; no tag moves and the README stays.
        """
        release = release_of_tag(repo_id, tag) if sign is not None else None
        staged = stage_variants(repo_id, variants)
        for name in remove:
            check_variant_dir(name)
        return self._guarded(repo_id, lambda: self._publish(
            repo_id, branch, staged, tag=None if create_pr else tag, message=message,
            dry_run=dry_run, remove=sorted(set(remove) - set(staged)),
            readme=None if create_pr else readme, signing=(release, sign),
            private=private, create_pr=create_pr))

    def _publish(
        self, repo_id: str, branch: str, staged: Mapping[str, list[StagedFile]], *,
        tag: str | None, message: str, dry_run: bool, remove: list[str], readme: str | None,
        signing: tuple[str | None, Signer | None], private: bool = False,
        create_pr: bool = False,
    ) -> PublishResult:
        target = self._target(repo_id)
        created = not target.exists
        ops: list[str] = []
        if target.repo_type != "kernel":
            self._refuse_model_repo(repo_id, f"{repo_id} is a {target.repo_type} repository "
                                             f"on {self.endpoint}")
        if create_pr and not target.exists:
            raise HubRefusedError(f"{repo_id} does not exist on {self.endpoint}: a pull request "
                                  "needs a repository and a branch to target; publish without "
                                  "--create-pr to create it")
        if private and target.exists:
            target = replace(target, note=" ".join(filter(None, (
                target.note, f"{repo_id} exists already; --private only sets the visibility "
                             "of a repository the publish creates"))))
        if not target.exists:
            fallback = ("a model repository where the server has no kernel type"
                        if self.allow_model_repo else
                        f"refused where the server has no kernel type, unless {ALLOW_MODEL_REPO}")
            ops.append(f"create {target.repo_type} repository {repo_id} ({fallback})")
            if dry_run:
                step = self._release_step(repo_id, None, list(staged), staged, {}, signing,
                                          target.repo_type)
                ops += [f"create branch {branch} from {README_BRANCH}",
                        *_commit_lines(branch, staged, list(staged), [], [], step),
                        *([f"create tag {tag} at the new commit"] if tag else []),
                        *([f"add {README} on {README_BRANCH}"] if readme else [])]
                return replace(PublishResult.dry_run_new_repo(repo_id, branch, tag, list(staged)),
                               operations=ops, signed=step.signed)
            target = self._create_repo(repo_id, private)
            ops[-1] = f"create {'private ' if private else ''}{target.repo_type} repository {repo_id}"
        reader = HfHub(self.endpoint, self.token, repo_type=target.repo_type)
        notes = [target.note] if target.note else []

        for _ in range(_MAX_ATTEMPTS):
            refs = reader.list_refs(repo_id)
            old = refs.branches.get(branch)
            before = self._remote_variants(repo_id, old, target.repo_type) if old else {}
            added, replaced, unchanged = classify(staged, before)
            removed = [name for name in remove if name in before]
            after = sorted((set(before) - set(removed)) | set(staged))
            step = self._release_step(repo_id, old, after, staged, before, signing,
                                      target.repo_type)
            changed = bool(added or replaced or removed or step.operations)
            tagged = refs.tags.get(tag) if tag is not None else None
            if tag is not None and tagged is not None and tag_needs_update(tagged, old, changed):
                self._check_release(repo_id, branch, tag, tagged, old, staged, before,
                                    removed, target.repo_type)
            attempt_ops = list(ops)
            if create_pr and old is None:
                raise HubRefusedError(f"{repo_id} has no branch {branch} for a pull request to "
                                      "target; publish without --create-pr first, or name "
                                      "another with --branch")
            if old is None:
                attempt_ops.append(f"create branch {branch} from {README_BRANCH}")
            if create_pr and changed:
                attempt_ops.append(f"open a pull request against {branch} with:")
            if changed:
                attempt_ops += _commit_lines(branch, staged, added + replaced, removed,
                                             [n for n in added + replaced if n in before], step)
            if tag is not None and (changed or tagged != old):
                where = "the new commit" if changed else f"{branch} head {str(old)[:12]}"
                verb = f"move tag {tag} to" if tagged is not None else f"create tag {tag} at"
                attempt_ops.append(f"{verb} {where}")
            readme_op = self._readme_operation(repo_id, readme, target.repo_type, refs)
            if readme_op:
                attempt_ops.append(readme_op)
            result = PublishResult(
                repo_id, branch, commit=old, previous=old, tag=tag, added=added,
                replaced=replaced, unchanged=unchanged, created_repo=created,
                dry_run=dry_run, removed=removed, operations=attempt_ops, notes=notes,
                signed=step.signed, commit_needed=changed,
            )
            if dry_run:
                return result
            head = old
            if changed:
                if old is None:
                    self.api.create_branch(repo_id, branch=branch, repo_type=target.repo_type,
                                           exist_ok=True)
                    old = reader.list_refs(repo_id).branches[branch]
                operations = commit_operations({n: staged[n] for n in added + replaced},
                                               existing=before, remove=removed)
                operations += step.operations
                try:
                    info = self.api.create_commit(
                        repo_id, operations, commit_message=message,
                        repo_type=target.repo_type, revision=branch, parent_commit=old,
                        create_pr=create_pr)
                except HfHubHTTPError as exc:
                    if _status(exc) == _PRECONDITION_FAILED:
                        continue  # the branch moved: rebuild on the new head
                    raise
                head = info.oid
                if create_pr:  # the branch stays where it was; the PR holds the commit
                    return replace(result, commit=old, pull_request=info.pr_url)
            if tag is not None and head is not None and tagged != head:
                self._move_tag(repo_id, tag, head, tagged, target.repo_type)
            if readme_op and readme is not None:
                self.api.upload_file(
                    path_or_fileobj=readme.encode(), path_in_repo=README, repo_id=repo_id,
                    repo_type=target.repo_type, revision=README_BRANCH,
                    commit_message=f"{README}: {repo_id}")
            return replace(result, commit=head)
        raise PublishConflictError(
            f"could not publish to {repo_id} branch {branch} on {self.endpoint}: it kept "
            f"moving under {_MAX_ATTEMPTS} attempts. Nothing was changed; try again"
        )

    # -- steps -------------------------------------------------------------------------

    def _target(self, repo_id: str) -> _Target:
        """Which repository type to publish to, by the readers' rule (:meth:`HfHub.typed`);
        reads only."""
        def found_as(repo_type: str) -> str:
            self.api.repo_info(repo_id, repo_type=repo_type)
            return repo_type

        try:
            repo_type = self.typed(repo_id, found_as)
        except HfHubHTTPError as exc:
            if absent(exc):
                return _Target("kernel", exists=False)
            raise
        if repo_type == "kernel":
            return _Target("kernel", exists=True)
        return _Target(repo_type, exists=True, note=(
            f"{repo_id} is a {repo_type} repository on {self.endpoint} (not the kernel type), "
            f"published there as allowed: {ECOSYSTEM_BLIND}"))

    def _refuse_model_repo(self, repo_id: str, why: str) -> None:
        if not self.allow_model_repo:
            raise ModelRepoRefusedError(
                f"{why}, and {ECOSYSTEM_BLIND.replace('; kernelhub loads it', '')}. Publish "
                "to a server with kernel repositories (the Hugging Face Hub, `kernelhub "
                f"serve`), or pass {ALLOW_MODEL_REPO} to publish a repository only kernelhub "
                "loads. Nothing was published")

    def _create_repo(self, repo_id: str, private: bool = False) -> _Target:
        """Create the repo as a kernel repo, or, if allowed, as a model repo where the
        server has no kernel type (it refuses the type with 400, 404 or 422; 405 is a
        read-only server and stays an error); private when asked."""
        try:
            self.api.create_repo(repo_id, repo_type="kernel", exist_ok=True, private=private)
            return _Target("kernel", exists=True)
        except HfHubHTTPError as exc:
            if _status(exc) not in (400, 404, 422):
                raise
            refusal = _status(exc)
        self._refuse_model_repo(repo_id, f"{self.endpoint} has no kernel repository type (it "
                                         f"answered {refusal} to creating {repo_id} as one)")
        self.api.create_repo(repo_id, repo_type="model", exist_ok=True, private=private)
        return _Target("model", exists=True, note=(
            f"{self.endpoint} has no kernel repository type (it answered {refusal}); created "
            f"{repo_id} as a model repository, as allowed: {ECOSYSTEM_BLIND}"))

    def _move_tag(self, repo_id: str, tag: str, head: str, tagged: str | None,
                  repo_type: str) -> None:
        try:
            if tagged is not None:
                self.api.delete_tag(repo_id, tag=tag, repo_type=repo_type)
            self.api.create_tag(repo_id, tag=tag, revision=head, repo_type=repo_type)
        except (HfHubHTTPError, _httpx.TransportError) as exc:
            raise HubError(
                f"the variants of {repo_id} landed in commit {head[:12]}, but tagging it "
                f"{tag} failed ({_one_line(exc)}); run the same publish again to add the tag"
            ) from exc

    def _readme_operation(self, repo_id: str, readme: str | None, repo_type: str,
                          refs: Refs) -> str | None:
        """The README step, if main's README differs from ``readme``; reads only."""
        if readme is None:
            return None
        main = refs.branches.get(README_BRANCH)
        if main is not None:
            try:
                current = self.api.get_paths_info(repo_id, [README], revision=main,
                                                  repo_type=repo_type)
            except (EntryNotFoundError, RepositoryNotFoundError):
                current = []
            for entry in current:
                if isinstance(entry, RepoFile) and entry.blob_id == git_blob_id(readme.encode()):
                    return None
            if current:
                return f"update {README} on {README_BRANCH}"
        return f"add {README} on {README_BRANCH}"

    def _guarded(self, repo_id: str, call: Callable[[], T]) -> T:
        """Run ``call`` with a timeout on every request; server errors become one line."""
        session = get_session()
        previous = session.timeout
        session.timeout = _httpx.Timeout(self.timeout)
        try:
            return call()
        except KernelHubError:
            raise
        except _httpx.TimeoutException:
            raise HubUnreachableError(
                f"{self.endpoint} did not answer within {self.timeout:g} s while publishing "
                f"{repo_id}; nothing was published (raise {TIMEOUT_ENV} for a slow server)"
            ) from None
        except _httpx.TransportError as exc:
            raise HubUnreachableError(
                f"cannot reach {self.endpoint} ({_one_line(exc)}); check the URL and the "
                f"network. Nothing was published to {repo_id}"
            ) from None
        except HfHubHTTPError as exc:
            raise self._http_error(repo_id, exc) from None
        finally:
            session.timeout = previous

    def _http_error(self, repo_id: str, exc: HfHubHTTPError) -> HubError:
        status = _status(exc)
        said = _server_message(exc)
        if status in (401, 403):
            source = token_source(self.token)
            what = "rejected the token" if status == 401 else "gave the token no write access"
            return HubAuthError(
                f"{self.endpoint} {what} to {repo_id} ({status}: {said}); token from "
                f"{source}. Create a token with write access to the {repo_id.split('/')[0]} "
                "organisation and set HF_TOKEN (or run `hf auth login`). Nothing was published"
            )
        if status == 404:
            return HubRefusedError(
                f"{self.endpoint} answered 404 for {repo_id} ({said}): no such repository, "
                "branch or endpoint there; check --hub and the repository id. Nothing was "
                "published")
        if status == 405:
            return HubRefusedError(
                f"{self.endpoint} does not accept writes (405: {said}); it is a read-only "
                "server or mirror; publish to the hub it mirrors. Nothing was published")
        if status == 409:
            return PublishConflictError(
                f"{self.endpoint} reported a conflict for {repo_id} (409: {said}); another "
                "publish changed it at the same time. Nothing was published; run it again")
        return HubError(f"{self.endpoint} failed while publishing {repo_id} "
                        f"({status}: {said}). Nothing was published")

    # -- reading the branch ------------------------------------------------------------

    def branch_releases(self, repo_id: str, branch: str) -> dict[str, str | None]:
        return self._guarded(repo_id, lambda: self._branch_releases(repo_id, branch))

    def _branch_releases(self, repo_id: str, branch: str) -> dict[str, str | None]:
        target = self._target(repo_id)
        if not target.exists:
            return {}
        reader = HfHub(self.endpoint, self.token, repo_type=target.repo_type)
        head = reader.list_refs(repo_id).branches.get(branch)
        if head is None:
            return {}
        names = reader.list_variants(repo_id, head)
        paths = {f"{BUILD_DIR}/{name}/{METADATA_FILE}": name for name in names}
        found = self._read_files(repo_id, head, list(paths), target.repo_type)
        releases: dict[str, str | None] = dict.fromkeys(names)
        for path, data in found.items():
            with contextlib.suppress(KernelHubError):  # unreadable: None, said by the caller
                releases[paths[path]] = parse_metadata(data, path).release
        return releases

    def _release_step(
        self, repo_id: str, old: str | None, after: list[str],
        staged: Mapping[str, list[StagedFile]], before: RemoteVariants,
        signing: tuple[str | None, Signer | None], repo_type: str,
    ) -> ReleaseStep:
        """The release files of a commit on ``old`` whose tree holds ``after``; reads only."""
        present: dict[str, RepoFile] = {}
        if old is not None:
            try:
                entries = self.api.get_paths_info(repo_id, list(RELEASE_PATHS), revision=old,
                                                  repo_type=repo_type)
            except EntryNotFoundError:
                entries = []
            present = {e.path: e for e in entries if isinstance(e, RepoFile)}
        return release_step(
            repo_id, *signing, after=after, staged=staged, before=before, present=present,
            read=lambda paths: self._read_files(repo_id, str(old), paths, repo_type))

    def _read_files(self, repo_id: str, commit: str, paths: list[str],
                    repo_type: str) -> dict[str, bytes]:
        """The bytes of ``paths`` at ``commit``; a path the server does not have is left out."""
        found: dict[str, bytes] = {}
        with tempfile.TemporaryDirectory(prefix="kernelhub-read-") as tmp:
            for path in paths:
                try:
                    local = hf_hub_download(
                        repo_id, path, revision=commit, repo_type=repo_type,
                        endpoint=self.endpoint, token=self.token, local_dir=tmp)
                except EntryNotFoundError:
                    continue
                found[path] = Path(local).read_bytes()
        return found

    def _remote_variants(self, repo_id: str, commit: str, repo_type: str) -> RemoteVariants:
        found: RemoteVariants = {}
        try:
            entries = self.api.list_repo_tree(
                repo_id, path_in_repo=BUILD_DIR, revision=commit, recursive=True,
                repo_type=repo_type)
            for entry in entries:
                parts = entry.path.split("/", 2)
                if isinstance(entry, RepoFile) and len(parts) == 3:
                    found.setdefault(parts[1], {})[parts[2]] = entry
        except EntryNotFoundError:
            pass  # no build/ yet
        return found

    def _check_release(
        self, repo_id: str, branch: str, tag: str, tagged: str, old: str | None,
        staged: Mapping[str, list[StagedFile]], before: RemoteVariants, removed: list[str],
        repo_type: str,
    ) -> None:
        """The release rule of :mod:`kernelhub_builder.ship.release`, on Hub file listings."""
        on_branch = old is not None and (
            tagged == old
            or tagged in {c.commit_id for c in self.api.list_repo_commits(
                repo_id, revision=old, repo_type=repo_type)}
        )
        at_tag = self._remote_variants(repo_id, tagged, repo_type) if on_branch else {}

        def keeps_content(name: str) -> bool:
            if name in removed:
                return False
            if name in staged:
                return same_content(staged[name], at_tag[name])
            return _blob_ids(at_tag[name]) == _blob_ids(before.get(name, {}))

        check_release(repo_id, branch, tag, tagged, on_branch=on_branch,
                      tagged_variants=at_tag, keeps_content=keeps_content)


def token_source(token: str | bool | None) -> str:
    """Where huggingface_hub took the token from, in words (never the token itself)."""
    if isinstance(token, str):
        return "the caller"
    if token is False:
        return "nowhere (tokens disabled)"
    if os.environ.get("HF_TOKEN"):
        return "the HF_TOKEN environment variable"
    path = Path(constants.HF_TOKEN_PATH)
    if path.is_file() and path.read_text().strip():
        return f"the token file {path}"
    return "nowhere: no HF_TOKEN and no token file"


def _status(exc: HfHubHTTPError) -> int | None:
    return exc.response.status_code if exc.response is not None else None


def _server_message(exc: HfHubHTTPError) -> str:
    if exc.response is not None:
        said = exc.response.headers.get("X-Error-Message")
        if said:
            return said
    return _one_line(exc)


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def _commit_lines(branch: str, staged: Mapping[str, list[StagedFile]], written: list[str],
                  removed: list[str], replaced: list[str], release: ReleaseStep) -> list[str]:
    """The commit step in words: what it deletes and adds, release files included (a
    signature-only commit adds two files and no variant)."""
    release_data = [op.path_or_fileobj for op in release.operations
                    if isinstance(op, CommitOperationAdd)]
    files = sum(len(staged[n]) for n in written) + len(release_data)
    size = (sum(f.source.stat().st_size for n in written for f in staged[n])
            + sum(len(data) for data in release_data if isinstance(data, bytes)))
    lines = [f"commit to {branch} ({files} file(s), {size} bytes):"]
    lines += [f"  delete {BUILD_DIR}/{n}/" for n in sorted(set(replaced) | set(removed))]
    lines += [f"  add    {BUILD_DIR}/{n}/ ({len(staged[n])} files)" for n in sorted(written)]
    return lines + release.lines


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
    variants: Mapping[str, list[StagedFile]], existing: Iterable[str],
    remove: Iterable[str] = (),
) -> list[CommitOperation]:
    """The operations of one commit that replaces exactly these variant dirs.

    A variant dir that exists on the branch is deleted first, so files dropped from the
    new build don't linger; then every staged file is added. ``remove`` dirs are deleted.
    """
    present = set(existing)
    gone = sorted({n for n in variants if n in present} | set(remove))
    operations: list[CommitOperation] = [
        CommitOperationDelete(path_in_repo=f"{BUILD_DIR}/{name}/", is_folder=True)
        for name in gone
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
    return all(file_matches(remote[rel], source.read_bytes()) for rel, source in by_rel.items())


def git_blob_id(data: bytes) -> str:
    """The id git (and so the Hub) gives a file's bytes, in hex."""
    return git_blob_digest(data).hex()


def _blob_ids(files: Mapping[str, RepoFile]) -> dict[str, str]:
    return {rel: (f.lfs.sha256 if f.lfs is not None else f.blob_id) for rel, f in files.items()}
