"""LocalHub: the embedded default hub, a directory of bare git repositories.

Layout::

    <root>/kernelhub.toml                 optional: [trust] orgs = ["my-team"]
    <root>/models/<org>/<name>/           a bare git repository per kernel
        refs/heads/v<major>               build/<variant>/… for that major version
        refs/tags/v<semver>               a release: the branch head it was published at

Everything is git plumbing on bare repositories (see :mod:`kernelhub.hub.git`): nothing is
checked out, a publish writes one commit through a throwaway index and moves the branch
and the release tag together in one compare-and-swap transaction, so readers never see
half a publish and concurrent publishers of different variants never lose each other's
work.

Serving it to huggingface_hub clients with olah: the layout is exactly what olah's
mirror mode reads. Point olah at the hub root as a mirrors path, offline::

    [basic]
    host = "127.0.0.1"
    port = 8090
    mirrors-path = ["<root>"]        # olah looks up <root>/models/<org>/<name>
    repos-path = "<a scratch dir>"   # olah's own cache, unused for mirrored repos

    [accessibility]
    offline = true

olah (checked with 0.5.4) reads the repositories with GitPython and needs nothing more:
bare repositories work, no working tree or ``main`` branch is required, branches and
tags (annotated tags peeled) are served by ``/refs``, and ``list_repo_tree`` and
``snapshot_download`` work at a branch, a tag or a full commit sha. Files are stored as
plain git blobs (no LFS). New repositories get HEAD pointing at the first branch
published so tools that look at HEAD find content.
"""

from __future__ import annotations

import hashlib
import random
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from ..errors import (
    HubError,
    PublishConflictError,
    RepoNotFoundError,
    VersionSpecError,
)
from ..versions import Refs
from .base import BUILD_DIR, PublishResult
from .git import ZERO_OID, GitRepo, IndexEntry, RefUpdate, RefValue
from .staged import check_variant_dir, staged_files

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

MODELS_DIR = "models"
"""Repositories live under ``<root>/models/`` — the repo-type directory olah expects."""

CONFIG_FILE = "kernelhub.toml"

_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_REF_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/-]*")
_MAX_ATTEMPTS = 12


@dataclass
class _Plan:
    """What one publish attempt would do, computed against one observed branch head."""

    old: str | None
    tree: str
    commit_needed: bool
    added: list[str] = field(default_factory=list)
    replaced: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    tag_old: str | None = None
    """The tag's current oid when the tag must be created (ZERO_OID) or moved; else None."""


class LocalHub:
    """A hub made of bare git repositories under ``root`` (see the module docstring)."""

    def __init__(self, root: Path | str) -> None:
        self.root = Path(root).expanduser()

    def __repr__(self) -> str:
        return f"LocalHub({str(self.root)!r})"

    @property
    def key(self) -> str:
        digest = hashlib.sha256(str(self.root.resolve()).encode()).hexdigest()
        return f"local-{digest[:12]}"

    # -- repositories ------------------------------------------------------------------

    def repo_path(self, repo_id: str) -> Path:
        """Where ``org/name`` lives on disk (whether or not it exists yet)."""
        org, name = _split_repo_id(repo_id)
        return self.root / MODELS_DIR / org / name

    def list_repos(self) -> dict[str, list[str]]:
        """Org → sorted repository names, for error messages and ``kernelhub`` listings."""
        found: dict[str, list[str]] = {}
        models = self.root / MODELS_DIR
        if not models.is_dir():
            return found
        for org_dir in sorted(models.iterdir()):
            if not org_dir.is_dir() or org_dir.name.startswith("."):
                continue
            names = [
                repo.name
                for repo in sorted(org_dir.iterdir())
                if not repo.name.startswith(".") and GitRepo(repo).is_repo()
            ]
            if names:
                found[org_dir.name] = names
        return found

    def _open(self, repo_id: str) -> GitRepo:
        repo = GitRepo(self.repo_path(repo_id))
        if not repo.is_repo():
            raise RepoNotFoundError(self._missing_repo_message(repo_id))
        return repo

    def _missing_repo_message(self, repo_id: str) -> str:
        org = repo_id.split("/")[0]
        repos = self.list_repos()
        where = f"no repository {repo_id} in the local hub at {self.root}"
        if not repos:
            return (
                f"{where}: the hub is empty. Publish to it with `builder publish`, or point "
                "KERNELHUB_HUB at the hub you meant"
            )
        if org in repos:
            return f"{where}; {org} has: {', '.join(repos[org])}"
        return f"{where}; it has no org {org!r}, only: {', '.join(sorted(repos))}"

    def _resolve(self, repo: GitRepo, repo_id: str, commit: str) -> str:
        resolved = repo.resolve_commit(commit)
        if resolved is None:
            refs = self.list_refs(repo_id)
            raise VersionSpecError(
                f"{repo_id} has no commit {commit!r} in the local hub at {self.root}; "
                f"{refs.describe()}"
            )
        return resolved

    # -- reading -----------------------------------------------------------------------

    def list_refs(self, repo_id: str) -> Refs:
        repo = self._open(repo_id)
        branches: dict[str, str] = {}
        tags: dict[str, str] = {}
        for name, value in repo.refs("refs/heads/", "refs/tags/").items():
            if name.startswith("refs/heads/"):
                branches[name.removeprefix("refs/heads/")] = value.commit
            else:
                tags[name.removeprefix("refs/tags/")] = value.commit
        return Refs(branches=branches, tags=tags)

    def list_variants(self, repo_id: str, commit: str) -> list[str]:
        repo = self._open(repo_id)
        resolved = self._resolve(repo, repo_id, commit)
        return sorted(_variant_trees(repo, resolved))

    def fetch_variant(self, repo_id: str, commit: str, variant: str, dest: Path) -> None:
        check_variant_dir(variant)
        repo = self._open(repo_id)
        resolved = self._resolve(repo, repo_id, commit)
        prefix = f"{BUILD_DIR}/{variant}/"
        entries = repo.ls_tree(resolved, prefix, recursive=True)
        if not entries:
            available = ", ".join(sorted(_variant_trees(repo, resolved))) or "none"
            raise HubError(
                f"{repo_id} at {resolved[:12]} has no variant {variant}; variants: {available}"
            )
        for entry in entries:
            if entry.kind != "blob" or entry.mode not in ("100644", "100755"):
                raise HubError(
                    f"{repo_id} at {resolved[:12]}: {entry.path} is a {entry.kind} with mode "
                    f"{entry.mode}; variants may hold only regular files"
                )
            _check_relative(entry.path[len(prefix) :])
        dest.mkdir(parents=True, exist_ok=True)
        if any(dest.iterdir()):
            raise HubError(f"cannot fetch {variant} into {dest}: the directory is not empty")
        for entry, data in zip(entries, repo.read_blobs(e.oid for e in entries), strict=True):
            target = dest / entry.path[len(prefix) :]
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
            target.chmod(0o755 if entry.mode == "100755" else 0o644)

    def trusted_orgs(self) -> frozenset[str]:
        path = self.root / CONFIG_FILE
        if not path.is_file():
            return frozenset()
        try:
            config = tomllib.loads(path.read_text())
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise HubError(f"cannot read the hub config {path}: {exc}") from None
        trust = config.get("trust", {})
        orgs = trust.get("orgs", []) if isinstance(trust, dict) else None
        if not isinstance(orgs, list) or not all(isinstance(o, str) for o in orgs):
            raise HubError(
                f'{path}: [trust] orgs must be a list of org names, e.g. orgs = ["my-team"]'
            )
        return frozenset(orgs)

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
        _check_ref_name(branch, "branch")
        if tag is not None:
            _check_ref_name(tag, "tag")
        if not variants:
            raise HubError(f"nothing to publish to {repo_id}: no variants were given")
        staged = {name: staged_files(name, Path(path)) for name, path in sorted(variants.items())}
        path = self.repo_path(repo_id)
        repo = GitRepo(path)

        if not repo.is_repo() and dry_run:
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
        created = GitRepo.init_bare(path, initial_branch=branch)

        files = [f for name in staged for f in staged[name]]
        oids = repo.hash_files([f.source for f in files])
        entries = [
            IndexEntry(f.git_mode, oid, f.path_in_repo) for f, oid in zip(files, oids, strict=True)
        ]

        race = ""
        for attempt in range(_MAX_ATTEMPTS):
            plan = self._plan(repo, repo_id, branch, tag, sorted(staged), entries)
            result = PublishResult(
                repo_id,
                branch,
                commit=plan.old,
                previous=plan.old,
                tag=tag,
                added=plan.added,
                replaced=plan.replaced,
                unchanged=plan.unchanged,
                created_repo=created,
                dry_run=dry_run,
            )
            if dry_run:
                return result
            head = plan.old
            updates: list[RefUpdate] = []
            if plan.commit_needed:
                head = repo.commit_tree(plan.tree, plan.old, message)
                updates.append(RefUpdate(f"refs/heads/{branch}", head, plan.old or ZERO_OID))
            if tag is not None and plan.tag_old is not None:
                assert head is not None
                updates.append(RefUpdate(f"refs/tags/{tag}", head, plan.tag_old))
            lost = repo.update_refs(updates)
            if lost is None:
                return PublishResult(
                    repo_id,
                    branch,
                    commit=head,
                    previous=plan.old,
                    tag=tag,
                    added=plan.added,
                    replaced=plan.replaced,
                    unchanged=plan.unchanged,
                    created_repo=created,
                )
            race = lost
            # Someone else moved the branch or tag: back off a little, then rebuild the
            # tree on top of their commit so both publishes survive.
            time.sleep(random.uniform(0.005, 0.02) * (attempt + 1))
        raise PublishConflictError(
            f"could not publish to {repo_id} branch {branch}: it kept moving under "
            f"{_MAX_ATTEMPTS} attempts ({race}). Nothing was changed; try again"
        )

    def _plan(
        self,
        repo: GitRepo,
        repo_id: str,
        branch: str,
        tag: str | None,
        names: list[str],
        entries: list[IndexEntry],
    ) -> _Plan:
        """Build the new tree on the current branch head and check the release tag."""
        patterns = [f"refs/heads/{branch}"] + ([f"refs/tags/{tag}"] if tag else [])
        refs = repo.refs(*patterns)
        head_ref = refs.get(f"refs/heads/{branch}")
        old = head_ref.commit if head_ref else None
        before = _variant_trees(repo, old) if old else {}
        remove: list[str] = []
        if old:
            dirs = [f"{BUILD_DIR}/{name}/" for name in names if name in before]
            if dirs:
                remove = [e.path for e in repo.ls_tree(old, *dirs, recursive=True)]
        tree = repo.write_tree(old, remove, entries)
        after = _variant_trees(repo, tree)

        plan = _Plan(old=old, tree=tree, commit_needed=old is None or tree != repo.tree_of(old))
        for name in names:
            if name not in before:
                plan.added.append(name)
            elif before[name] != after[name]:
                plan.replaced.append(name)
            else:
                plan.unchanged.append(name)

        if tag is not None:
            tag_ref = refs.get(f"refs/tags/{tag}")
            plan.tag_old = self._check_release(repo, repo_id, branch, tag, tag_ref, old, after)
            if tag_ref is not None and not plan.commit_needed and tag_ref.commit == old:
                plan.tag_old = None
        return plan

    def _check_release(
        self,
        repo: GitRepo,
        repo_id: str,
        branch: str,
        tag: str,
        tag_ref: RefValue | None,
        old: str | None,
        after: dict[str, str],
    ) -> str:
        """The tag's expected old oid for the CAS; raises if moving it would rewrite a release.

        A release tag may only follow its branch forward to add variants: every variant it
        already marks must keep exactly the same content.
        """
        if tag_ref is None:
            return ZERO_OID
        tagged = tag_ref.commit
        if old is None or not repo.is_ancestor(tagged, old):
            raise PublishConflictError(
                f"release {tag} of {repo_id} already exists at {tagged[:12]}, which is not on "
                f"branch {branch}; bump general.release. Nothing was published"
            )
        for name, tree in sorted(_variant_trees(repo, tagged).items()):
            if after.get(name) != tree:
                raise PublishConflictError(
                    f"release {tag} of {repo_id} already has variant {name} with different "
                    "content; bump general.release. Nothing was published"
                )
        return tag_ref.oid


def _variant_trees(repo: GitRepo, treeish: str) -> dict[str, str]:
    """Variant name → tree oid of ``build/<variant>`` in a commit or tree."""
    return {
        PurePosixPath(e.path).name: e.oid
        for e in repo.ls_tree(treeish, f"{BUILD_DIR}/")
        if e.kind == "tree"
    }


def _split_repo_id(repo_id: str) -> tuple[str, str]:
    parts = repo_id.split("/")
    if len(parts) != 2 or not all(_NAME_RE.fullmatch(p) for p in parts):
        raise RepoNotFoundError(
            f"{repo_id!r} is not a valid repository id; expected 'org/name' using letters, "
            "digits, '.', '_' and '-'"
        )
    return parts[0], parts[1]


def _check_ref_name(name: str, what: str) -> None:
    if (
        not _REF_NAME_RE.fullmatch(name)
        or ".." in name
        or "//" in name
        or name.endswith((".lock", "/", "."))
    ):
        raise HubError(f"{name!r} is not a valid git {what} name (e.g. 'v1' or 'v1.2.0')")


def _check_relative(rel: str) -> None:
    """Refuse tree paths that would escape the destination directory."""
    parts = PurePosixPath(rel).parts
    if not parts or rel.startswith("/") or any(p in ("..", ".") for p in parts):
        raise HubError(f"refusing to write {rel!r}: it would land outside the variant directory")
