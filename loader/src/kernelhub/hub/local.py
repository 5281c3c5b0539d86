"""LocalHub: the embedded default hub, a directory of bare git repositories.

Layout::

    <root>/kernelhub.toml                 optional: [trust] orgs = ["my-team"]
    <root>/models/<org>/<name>/           a bare git repository per kernel
        refs/heads/v<major>               build/<variant>/… for that major version
        refs/tags/v<semver>               a release: the branch head it was published at

Everything is git plumbing on bare repositories (see :mod:`kernelhub.hub.git`): nothing is
checked out. This module only reads; :mod:`kernelhub_builder.ship.local` writes one commit per
publish and moves the branch and the release tag together in one compare-and-swap
transaction, so readers never see half a publish.

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

# PEP 810: imported when first used (inert before Python 3.15)
__lazy_modules__ = {
    "kernelhub.errors", "kernelhub.formats.variants", "kernelhub.hub.base",
    "kernelhub.versions",
}

import hashlib
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from .. import user_files
from ..errors import HubError, RepoNotFoundError, VersionSpecError
from ..formats.variants import check_variant_dir
from ..versions import Refs, is_plain_name
from .base import BUILD_DIR, check_relative

if TYPE_CHECKING:
    from ..formats.release_manifest import ReleaseFiles
    from .git import GitRepo


def _git(path: Path) -> GitRepo:
    """The repository at ``path``."""
    from . import git
    return git.GitRepo(path)


MODELS_DIR = "models"
"""Repositories live under ``<root>/models/`` — the repo-type directory olah expects."""

CONFIG_FILE = "kernelhub.toml"


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
        org, name = split_repo_id(repo_id)
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
                if not repo.name.startswith(".") and _git(repo).is_repo()
            ]
            if names:
                found[org_dir.name] = names
        return found

    def open_repo(self, repo_id: str) -> GitRepo:
        """The existing repository ``org/name``; RepoNotFoundError saying what exists."""
        repo = _git(self.repo_path(repo_id))
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
        repo = self.open_repo(repo_id)
        branches: dict[str, str] = {}
        tags: dict[str, str] = {}
        for name, value in repo.refs("refs/heads/", "refs/tags/").items():
            if name.startswith("refs/heads/"):
                branches[name.removeprefix("refs/heads/")] = value.commit
            else:
                tags[name.removeprefix("refs/tags/")] = value.commit
        return Refs(branches=branches, tags=tags)

    def list_variants(self, repo_id: str, commit: str) -> list[str]:
        repo = self.open_repo(repo_id)
        resolved = self._resolve(repo, repo_id, commit)
        return sorted(variant_trees(repo, resolved))

    def fetch_variant(self, repo_id: str, commit: str, variant: str, dest: Path) -> None:
        check_variant_dir(variant)
        repo = self.open_repo(repo_id)
        resolved = self._resolve(repo, repo_id, commit)
        prefix = f"{BUILD_DIR}/{variant}/"
        entries = repo.ls_tree(resolved, prefix, recursive=True)
        if not entries:
            available = ", ".join(sorted(variant_trees(repo, resolved))) or "none"
            raise HubError(
                f"{repo_id} at {resolved[:12]} has no variant {variant}; variants: {available}"
            )
        for entry in entries:
            if entry.kind != "blob" or entry.mode not in ("100644", "100755"):
                raise HubError(
                    f"{repo_id} at {resolved[:12]}: {entry.path} is a {entry.kind} with mode "
                    f"{entry.mode}; variants may hold only regular files"
                )
            check_relative(entry.path[len(prefix) :])
        dest.mkdir(parents=True, exist_ok=True)
        if any(dest.iterdir()):
            raise HubError(f"cannot fetch {variant} into {dest}: the directory is not empty")
        for entry, data in zip(entries, repo.read_blobs([e.oid for e in entries]), strict=True):
            target = dest / entry.path[len(prefix) :]
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
            target.chmod(0o755 if entry.mode == "100755" else 0o644)

    def file_hashes(self, repo_id: str, commit: str, variant: str) -> dict[str, str]:
        """The hub's own content hash of every file of a variant: ``git:<blob id>``."""
        check_variant_dir(variant)
        repo = self.open_repo(repo_id)
        resolved = self._resolve(repo, repo_id, commit)
        prefix = f"{BUILD_DIR}/{variant}/"
        return {e.path[len(prefix):]: f"git:{e.oid}"
                for e in repo.ls_tree(resolved, prefix, recursive=True) if e.kind == "blob"}

    def fetch_release(self, repo_id: str, commit: str) -> ReleaseFiles:
        from ..formats import release_manifest
        repo = self.open_repo(repo_id)
        resolved = self._resolve(repo, repo_id, commit)
        release, signature = release_manifest.RELEASE_FILE, release_manifest.SIGNATURE_FILE
        found = {
            e.path: e.oid
            for e in repo.ls_tree(resolved, release, signature)
            if e.kind == "blob"
        }
        names = sorted(found)
        data = dict(zip(names, repo.read_blobs([found[n] for n in names]), strict=True))
        return release_manifest.ReleaseFiles(data.get(release), data.get(signature))

    def trusted_orgs(self) -> frozenset[str]:
        path = self.root / CONFIG_FILE
        if not path.is_file():
            return frozenset()
        from .. import tomlfile
        try:
            config = tomlfile.parse_toml(user_files.read_bounded(path))
        except OSError as exc:
            raise HubError(f"cannot read the hub config {path}: {exc.strerror or exc}") from None
        except tomlfile.TomlError as exc:
            raise HubError(f"cannot read the hub config {path}: {exc}") from None
        trust = config.get("trust", {})
        orgs = trust.get("orgs", []) if isinstance(trust, dict) else None
        if not isinstance(orgs, list) or not all(isinstance(o, str) for o in orgs):
            raise HubError(
                f'{path}: [trust] orgs must be a list of org names, e.g. orgs = ["my-team"]'
            )
        return frozenset(orgs)


def variant_trees(repo: GitRepo, treeish: str) -> dict[str, str]:
    """Variant name → tree oid of ``build/<variant>`` in a commit or tree."""
    return {
        PurePosixPath(e.path).name: e.oid
        for e in repo.ls_tree(treeish, f"{BUILD_DIR}/")
        if e.kind == "tree"
    }


def split_repo_id(repo_id: str) -> tuple[str, str]:
    parts = repo_id.split("/")
    if len(parts) != 2 or not all(is_plain_name(p) for p in parts):
        raise RepoNotFoundError(
            f"{repo_id!r} is not a valid repository id; expected 'org/name' using letters, "
            "digits, '.', '_' and '-'"
        )
    return parts[0], parts[1]
