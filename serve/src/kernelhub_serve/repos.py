"""Reading the hub's repositories in the shapes the Hub API answers with.

One namespace serves both repository types the ecosystem's clients ask for: a LocalHub
keeps every repository at ``<root>/models/<org>/<name>``, and ``/api/kernels/<id>`` and
``/api/models/<id>`` name the same repository (the ecosystem's loader asks for the
``kernel`` type, kernelhub's HfHub tries ``kernel`` then ``model``, ``HfApi`` defaults to
``model``). Everything is git plumbing on bare repositories; nothing is checked out.

Every file is stored as a plain git blob, so LocalHub readers read it like any other; one
committed through LFS is reported as the Hub reports an LFS file (its record:
:mod:`kernelhub_serve.lfs_index`).
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from kernelhub.errors import KernelHubError
from kernelhub.hub.git import GitRepo
from kernelhub.hub.local import MODELS_DIR, split_repo_id

from . import lfs_index
from .errors import ApiError, entry_not_found, repo_not_found, revision_not_found
from .lfs_index import LfsObject

URL_TYPES = {"models": "model", "kernels": "kernel"}
"""The API's plural path segment → the repository type it names."""
URL_PREFIXES = {"model": "", "kernel": "kernels/"}
"""A repository type → its prefix in file URLs (``/<prefix><id>/resolve/…``)."""
OTHER_TYPES = ("datasets", "spaces")
CHUNK = 1024**2


def repo_type_of(segment: str) -> str:
    """The repository type of an API path segment; datasets and spaces are refused."""
    if segment in URL_TYPES:
        return URL_TYPES[segment]
    raise ApiError(404, f"this hub serves kernel and model repositories, not {segment}",
                   "RepoNotFound")


@dataclass(frozen=True)
class Entry:
    """One tree entry at a commit."""

    kind: str
    """``file`` or ``directory``."""
    path: str
    oid: str
    size: int
    mode: str

    def to_api(self, lfs: dict[str, LfsObject]) -> dict[str, object]:
        """The entry as a tree or paths-info listing names it; ``lfs``: the repository's
        LFS objects by blob id (:meth:`RepoStore.lfs_objects`)."""
        if self.kind == "directory":
            return {"type": "directory", "oid": self.oid, "size": 0, "path": self.path}
        obj = lfs.get(self.oid)
        if obj is None:
            return {"type": "file", "oid": self.oid, "size": self.size, "path": self.path}
        return {"type": "file", "oid": obj.pointer_oid, "size": self.size, "path": self.path,
                "lfs": obj.tree_api()}


class RepoStore:
    """The repositories under a LocalHub root, read for the API and the pages."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def path_of(self, repo_id: str) -> Path:
        try:
            org, name = split_repo_id(repo_id)
        except KernelHubError:
            raise repo_not_found(repo_id) from None
        return self.root / MODELS_DIR / org / name

    def open(self, repo_id: str) -> GitRepo:
        repo = GitRepo(self.path_of(repo_id))
        if not repo.is_repo():
            raise repo_not_found(repo_id)
        return repo

    def repo_ids(self) -> list[str]:
        """Every repository, sorted by id."""
        found = []
        models = self.root / MODELS_DIR
        if not models.is_dir():
            return []
        for org in sorted(p for p in models.iterdir() if p.is_dir() and not p.name.startswith(".")):
            for repo in sorted(org.iterdir()):
                if not repo.name.startswith(".") and GitRepo(repo).is_repo():
                    found.append(f"{org.name}/{repo.name}")
        return found

    # -- revisions ---------------------------------------------------------------------

    @staticmethod
    def commit_of(repo: GitRepo, repo_id: str, rev: str) -> str:
        """The commit ``rev`` (a branch, tag or commit sha) names; RevisionNotFound if none.

        Branches win over tags of the same name, as on the Hub; a full ref name
        (``refs/heads/v1``) is accepted too.
        """
        if not rev or rev.startswith("-") or ".." in rev:
            raise revision_not_found(repo_id, rev)
        for candidate in (f"refs/heads/{rev}", f"refs/tags/{rev}", rev):
            if candidate == rev and not (rev.startswith("refs/") or _is_hex(rev)):
                continue
            commit = repo.resolve_commit(candidate)
            if commit is not None:
                return commit
        raise revision_not_found(repo_id, rev)

    @staticmethod
    def refs(repo: GitRepo) -> dict[str, list[dict[str, str]]]:
        branches: list[dict[str, str]] = []
        tags: list[dict[str, str]] = []
        for ref, value in sorted(repo.refs("refs/heads/", "refs/tags/").items()):
            kind, _, name = ref.removeprefix("refs/").partition("/")
            item = {"name": name, "ref": ref, "targetCommit": value.commit}
            (branches if kind == "heads" else tags).append(item)
        return {"branches": branches, "tags": tags, "converts": [], "pullRequests": []}

    # -- trees -------------------------------------------------------------------------

    @staticmethod
    def entries(repo: GitRepo, commit: str, *paths: str, recursive: bool = False) -> list[Entry]:
        """``git ls-tree -l`` of ``paths`` (directories with a trailing slash) at a commit."""
        args = ["ls-tree", "-z", "-l", "--full-tree"] + (["-r", "-t"] if recursive else [])
        out = repo.run(*args, commit, "--", *paths).stdout.decode()
        found = []
        for record in filter(None, out.split("\0")):
            meta, path = record.split("\t", 1)
            mode, kind, oid, size = meta.split()
            if kind == "commit":
                continue  # a submodule: nothing to serve
            found.append(Entry("directory" if kind == "tree" else "file", path, oid,
                               0 if size == "-" else int(size), mode))
        return found

    def tree(self, repo: GitRepo, repo_id: str, commit: str, path: str, recursive: bool
             ) -> list[Entry]:
        """The listing ``GET /api/<type>s/<id>/tree/<rev>/<path>`` answers with."""
        path = path.strip("/")
        if path:
            found = self.entries(repo, commit, path)
            if not found or found[0].kind != "directory":
                raise entry_not_found(repo_id, path)
            return [e for e in self.entries(repo, commit, f"{path}/", recursive=recursive)
                    if e.path.startswith(f"{path}/")]  # -t also lists the trees above
        return self.entries(repo, commit, recursive=recursive)

    def paths_info(self, repo: GitRepo, commit: str, paths: list[str]) -> list[Entry]:
        """Entries for exactly the given paths (missing ones are left out, as on the Hub)."""
        wanted = [p.strip("/") for p in paths if p.strip("/")]
        if not wanted:
            return []
        return [e for e in self.entries(repo, commit, *wanted) if e.path in wanted]

    def file(self, repo: GitRepo, repo_id: str, commit: str, path: str) -> Entry:
        path = path.strip("/")
        found = self.entries(repo, commit, path) if path else []
        if not found or found[0].kind != "file" or found[0].path != path:
            raise entry_not_found(repo_id, path)
        return found[0]

    def lfs_objects(self, repo: GitRepo) -> dict[str, LfsObject]:
        """Blob id → LFS object, for every file committed through LFS (none: empty)."""
        index = lfs_index.head(repo)
        if index is None:
            return {}
        return {e.oid: LfsObject(e.path, e.size) for e in self.entries(repo, index)
                if e.kind == "file"}

    def lfs_blobs(self, repo: GitRepo) -> dict[str, tuple[str, int]]:
        """sha256 → (blob id, size) of every object committed through LFS."""
        return {o.sha256: (blob, o.size) for blob, o in self.lfs_objects(repo).items()}

    @staticmethod
    def read(repo: GitRepo, oid: str) -> bytes:
        return repo.run("cat-file", "blob", oid).stdout

    @staticmethod
    def stream(repo: GitRepo, oid: str, start: int, length: int) -> Iterator[bytes]:
        """``length`` bytes of a blob from ``start``, in chunks: a download (or a range of
        one) holds one chunk in memory, whatever the file's size."""
        proc = subprocess.Popen(["git", "-C", str(repo.path), "cat-file", "blob", oid],
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        assert proc.stdout is not None
        try:
            while start > 0:
                skipped = len(proc.stdout.read(min(start, CHUNK)))
                if not skipped:
                    return
                start -= skipped
            while length > 0:
                chunk = proc.stdout.read(min(length, CHUNK))
                if not chunk:
                    return
                length -= len(chunk)
                yield chunk
        finally:
            proc.stdout.close()
            proc.kill()
            proc.wait()

    # -- history -----------------------------------------------------------------------

    @staticmethod
    def commits(repo: GitRepo, commit: str, limit: int | None = None) -> list[dict[str, object]]:
        args = ["log", "--format=%H%x00%s%x00%B%x00%ct%x00%an%x1e"]
        if limit is not None:
            args.append(f"-{limit}")
        out = repo.run(*args, commit).stdout.decode()
        found: list[dict[str, object]] = []
        for record in filter(None, (r.strip("\n") for r in out.split("\x1e"))):
            oid, title, message, date, author = record.split("\x00")
            found.append({"id": oid, "title": title, "message": message.strip(),
                          "authors": [{"user": author}], "date": hub_date(date)})
        return found

    def info(self, repo: GitRepo, repo_id: str, repo_type: str, commit: str,
             blobs: bool = False) -> dict[str, object]:
        """What ``GET /api/<type>s/<id>[/revision/<rev>]`` answers (model/kernel info);
        ``blobs`` (``files_metadata=True``) adds each file's size, blob id and ``lfs``
        (null for a file not committed through LFS)."""
        date = hub_date(repo.out("show", "-s", "--format=%ct", commit))
        files = [e for e in self.entries(repo, commit, recursive=True) if e.kind == "file"]
        lfs = self.lfs_objects(repo) if blobs else {}
        info: dict[str, object] = {
            "id": repo_id, "_id": repo_id, "author": repo_id.split("/")[0], "sha": commit,
            "lastModified": date, "private": False, "disabled": False, "gated": False,
            "downloads": 0, "likes": 0, "tags": [], "library_name": None,
            "siblings": [_sibling(f, lfs.get(f.oid)) if blobs else {"rfilename": f.path}
                         for f in files],
        }
        if repo_type == "model":
            info["modelId"] = repo_id
        return info


def _sibling(entry: Entry, lfs: LfsObject | None) -> dict[str, object]:
    if lfs is None:
        return {"rfilename": entry.path, "size": entry.size, "blobId": entry.oid, "lfs": None}
    return {"rfilename": entry.path, "size": entry.size, "blobId": lfs.pointer_oid,
            "lfs": lfs.sibling_api()}


def hub_date(unix_seconds: str) -> str:
    """A git timestamp in the one format huggingface_hub parses (``…T…:…:….000Z``)."""
    moment = datetime.fromtimestamp(int(unix_seconds), tz=timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.000Z")


def _is_hex(rev: str) -> bool:
    return 7 <= len(rev) <= 64 and all(c in "0123456789abcdef" for c in rev)
