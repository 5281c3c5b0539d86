"""Every write to the hub: create and delete repositories, commit, branches and tags.

This is the one module that writes, and the one place the server imports the LocalHub
publisher (:class:`kernelhub_builder.ship.LocalPublisher`): its hub gives the repository paths, and its plumbing —
a tree written through a throwaway index on the bare repository, one ``git update-ref``
transaction that moves a ref only if it still has the value read — is what makes a
commit here atomic. The Hub's commit protocol is file operations on one branch, not
whole variant dirs, so a commit composes those primitives instead of calling
``publish()`` (which replaces variant dirs and would drop release files a signed
Hub-API publish sends in the same commit).

Atomicity: nothing is visible until the ref moves, and it moves in one step (with the
record of the LFS objects the commit adds, :mod:`kernelhub_serve.lfs_index`, in the same
transaction). A commit whose request fails or is cut off never reaches that step; objects
it wrote stay unreferenced (git's garbage). With ``parentCommit`` the ref moves only if it
is still that commit (else 412, as on the Hub); without, the commit is rebuilt on whatever
head won and tried again, so concurrent publishers never lose a commit.

Several serve processes over one hub: writers of one repository take turns on a file lock
(:data:`LOCK_DIR`, one per repository, held only around the ref update), so they queue
instead of spinning on compare-and-swap retries; the compare-and-swap stays what makes a
write correct (a LocalHub publisher outside serve takes no lock). Nothing about refs is
cached in a process: every read asks git.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import time
from pathlib import Path

from filelock import FileLock
from kernelhub.hub.git import ZERO_OID, GitRepo, IndexEntry, RefUpdate
from kernelhub_builder.ship import LocalPublisher

from . import lfs_index
from .commit_ops import AddFile, AddLfsFile, CommitRequest
from .errors import ApiError, entry_not_found, repo_not_found, revision_not_found
from .lfs import LfsStore
from .repos import RepoStore

GITATTRIBUTES = (b"# kernelhub serve keeps every file as a plain git blob (LFS uploads "
                 b"included), so LocalHub readers read them directly.\n")
PRIVATE_MARKER = "kernelhub-private"
"""A file in the bare repository's directory: only tokens with read rights may read it."""
_MAX_ATTEMPTS = 20
LOCK_DIR = ".kernelhub-serve/locks"


class HubWriter:
    """Writes to the repositories of one LocalHub root."""

    def __init__(self, store: RepoStore, lfs: LfsStore) -> None:
        self.store = store
        self.lfs = lfs
        self.publisher = LocalPublisher(store.root)

    def _lock(self, path: Path) -> FileLock:
        """The repository's lock, shared by every thread and process of every serve over
        this hub (an OS file lock, released if its holder dies)."""
        relative = path.relative_to(self.store.root)
        lock = self.store.root / LOCK_DIR / relative.parent / f"{relative.name}.lock"
        lock.parent.mkdir(parents=True, exist_ok=True)
        return FileLock(lock, thread_local=False, is_singleton=False)

    # -- repositories ------------------------------------------------------------------

    def create_repo(self, repo_id: str, private: bool) -> bool:
        """A new repository with ``main`` holding ``.gitattributes``, as the Hub makes one;
        False if it exists. Made in a sibling directory and renamed into place, so nobody
        sees a repository without its ``main``."""
        path = self.publisher.repo_path(repo_id)
        if GitRepo(path).is_repo():
            return False
        path.parent.mkdir(parents=True, exist_ok=True)
        staging = path.parent / f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.new"
        try:
            GitRepo.init_bare(staging, initial_branch="main")
            repo = GitRepo(staging)
            tree = repo.write_tree(None, [], [IndexEntry("100644", repo.hash_blob(GITATTRIBUTES),
                                                         ".gitattributes")])
            commit = repo.commit_tree(tree, None, "initial commit")
            repo.update_refs([RefUpdate("refs/heads/main", commit, ZERO_OID)])
            if private:
                (staging / PRIVATE_MARKER).write_text("readable only with a token\n")
            try:
                os.rename(staging, path)
            except OSError:
                if GitRepo(path).is_repo():
                    return False
                raise ApiError(409, f"cannot create {repo_id}: {path} exists and is not a "
                                    "repository") from None
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        return True

    def delete_repo(self, repo_id: str) -> None:
        """Moved aside in one rename, then removed: readers see it or don't."""
        path = self.store.path_of(repo_id)
        if not GitRepo(path).is_repo():
            raise repo_not_found(repo_id)
        trash = path.parent / f".{path.name}.{secrets.token_hex(4)}.deleted"
        os.rename(path, trash)
        shutil.rmtree(trash, ignore_errors=True)

    def move_repo(self, source: str, target: str) -> None:
        """Rename the bare repository in one step, under the source's write lock (so no
        commit of this process lands half-way). The target's name is claimed first with
        an empty directory, which ``rename`` replaces atomically: a repository created
        under that name meanwhile makes the move fail with 409 instead of being
        overwritten. LFS objects still waiting for a commit in the source are dropped,
        so none becomes committable under a name a new repository may take."""
        path, new = self.store.path_of(source), self.store.path_of(target)
        with self._lock(path):
            if not GitRepo(path).is_repo():
                raise repo_not_found(source)
            new.parent.mkdir(parents=True, exist_ok=True)
            try:
                new.mkdir()
            except FileExistsError:
                raise ApiError(409, f"cannot move {source} to {target}: {target} exists "
                                    "(delete it or choose another name)") from None
            try:
                os.rename(path, new)
            except OSError:
                with contextlib.suppress(OSError):
                    new.rmdir()
                raise ApiError(409, f"cannot move {source} to {target}: {target} was created "
                                    "meanwhile (choose another name)") from None
        self.lfs.drop(source)

    # -- commits -----------------------------------------------------------------------

    def commit(self, repo_id: str, branch: str, request: CommitRequest, author: str) -> str:
        """Apply ``request`` to ``branch`` as one commit; the new head (the old one when
        nothing changed: no empty commits)."""
        repo = self.store.open(repo_id)
        ref = f"refs/heads/{branch}"
        blobs = self._blobs(repo, repo_id, request)
        adds = [IndexEntry("100644", oid, add.path)
                for add, oid in zip(request.adds, blobs, strict=True)]
        lfs = {add.sha256: oid for add, oid in zip(request.adds, blobs, strict=True)
               if isinstance(add, AddLfsFile)}
        head = self._commit(repo, repo_id, ref, branch, request, adds, lfs, author)
        self.lfs.forget(repo_id, list(lfs))
        return head

    def _commit(self, repo: GitRepo, repo_id: str, ref: str, branch: str,
                request: CommitRequest, adds: list[IndexEntry], lfs: dict[str, str],
                author: str) -> str:
        with self._lock(repo.path):
            for _ in range(_MAX_ATTEMPTS):
                current = repo.refs(ref).get(ref)
                if current is None:
                    raise revision_not_found(repo_id, branch)
                if request.parent is not None and not current.commit.startswith(request.parent):
                    raise ApiError(412, "A commit has happened since. Please refresh and try "
                                        f"again (the branch is at {current.commit[:12]}, not "
                                        f"{request.parent[:12]})")
                tree = repo.write_tree(current.commit,
                                       self._removed(repo, repo_id, current.commit, request), adds)
                if tree == repo.tree_of(current.commit):  # no empty commit; LFS still noted
                    head, moves = current.commit, []
                else:
                    head = repo.out("commit-tree", tree, "-p", current.commit, "-F", "-",
                                    input=request.message.encode(),
                                    env={"GIT_AUTHOR_NAME": author})
                    moves = [RefUpdate(ref, head, current.oid)]
                if repo.update_refs([*moves, *_lfs_record(repo, lfs)]) is None:
                    return head
                time.sleep(0.005)  # another process moved it: rebuild on the new head
        raise ApiError(409, f"{repo_id} branch {branch} kept moving under {_MAX_ATTEMPTS} "
                            "attempts; nothing was changed, try again")

    def _blobs(self, repo: GitRepo, repo_id: str, request: CommitRequest) -> list[str]:
        """The blob of every added file, in order, written before taking the lock (one git
        process): an inline file's, a waiting LFS object's (read through a pin), or the
        blob an earlier commit recorded for the LFS object — looked up again when the
        waiting copy is gone, because a concurrent commit of the same object drops it
        only after recording it."""
        wanted = [a.sha256 for a in request.adds if isinstance(a, AddLfsFile)]
        committed = self.store.lfs_blobs(repo)
        with self.lfs.pinned(repo_id, [o for o in wanted if o not in committed]) as pins:
            if any(o not in committed and o not in pins for o in wanted):
                committed = self.store.lfs_blobs(repo)
            chosen: list[Path | str] = []  # a file to hash, or a blob id already in git
            for add in request.adds:
                if isinstance(add, AddFile):
                    chosen.append(add.source)
                elif add.sha256 in pins and add.size in (None, pins[add.sha256].stat().st_size):
                    chosen.append(pins[add.sha256])
                elif add.sha256 in committed and add.size in (None, committed[add.sha256][1]):
                    chosen.append(committed[add.sha256][0])
                else:
                    raise ApiError(422, f"{add.path}: LFS object {add.sha256[:12]} was not "
                                        f"uploaded to {repo_id} (or has another size); upload "
                                        "it through the LFS batch API first")
            hashed = iter(repo.hash_files([c for c in chosen if isinstance(c, Path)]))
            return [next(hashed) if isinstance(c, Path) else c for c in chosen]

    def _removed(self, repo: GitRepo, repo_id: str, commit: str, request: CommitRequest
                 ) -> list[str]:
        added = {a.path for a in request.adds}
        removed: list[str] = []
        for delete in request.deletes:
            if delete.folder:
                found = [e.path for e in self.store.entries(repo, commit, f"{delete.path}/",
                                                            recursive=True) if e.kind == "file"]
            else:
                found = [e.path for e in self.store.entries(repo, commit, delete.path)
                         if e.kind == "file" and e.path == delete.path]
            if not found:
                raise entry_not_found(repo_id, delete.path)
            removed += found
        return [p for p in removed if p not in added]

    # -- refs --------------------------------------------------------------------------

    def create_branch(self, repo_id: str, branch: str, start: str | None, empty: bool) -> None:
        repo = self.store.open(repo_id)
        check_ref_name(repo, "heads", branch)
        if empty:
            commit = repo.commit_tree(repo.write_tree(None, [], []), None, f"empty branch {branch}")
        else:
            commit = self.store.commit_of(repo, repo_id, start or _default_branch(repo))
        self._create_ref(repo, f"refs/heads/{branch}", commit, f"Reference already exists: "
                                                               f"refs/heads/{branch}")

    def create_tag(self, repo_id: str, tag: str, revision: str, message: str | None) -> None:
        repo = self.store.open(repo_id)
        check_ref_name(repo, "tags", tag)
        commit = self.store.commit_of(repo, repo_id, revision)
        target = commit
        if message:
            target = repo.out("mktag", input=(
                f"object {commit}\ntype commit\ntag {tag}\n"
                f"tagger kernelhub <kernelhub@localhost> {int(time.time())} +0000\n\n"
                f"{message}\n").encode())
        self._create_ref(repo, f"refs/tags/{tag}", target, f"Tag {tag} already exists")

    def delete_ref(self, repo_id: str, kind: str, name: str) -> None:
        repo = self.store.open(repo_id)
        ref = f"refs/{kind}/{name}"
        with self._lock(repo.path):
            current = repo.refs(ref).get(ref)
            if current is None:
                raise revision_not_found(repo_id, name)
            proc = repo.run("update-ref", "-d", ref, current.oid, check=False)
            if proc.returncode != 0:
                raise ApiError(409, f"{ref} moved while it was being deleted; try again")

    def _create_ref(self, repo: GitRepo, ref: str, target: str, exists: str) -> None:
        with self._lock(repo.path):
            if repo.update_refs([RefUpdate(ref, target, ZERO_OID)]) is not None:
                raise ApiError(409, exists)


def _lfs_record(repo: GitRepo, objects: dict[str, str]) -> list[RefUpdate]:
    """The update of the LFS record a commit adding ``objects`` (sha256 → blob) moves with
    its branch, if it adds one not yet recorded."""
    current = lfs_index.head(repo)
    new = lfs_index.updated(repo, current, objects) if objects else None
    if new is None:
        return []
    return [RefUpdate(lfs_index.INDEX_REF, new, current or ZERO_OID)]


def check_ref_name(repo: GitRepo, kind: str, name: str) -> None:
    """git's own rule for ref names (``git check-ref-format``), and no full commit id as a
    name: a resolve URL by commit id is cached as immutable, so no branch may take its
    place."""
    proc = repo.run("check-ref-format", f"refs/{kind}/{name}", check=False)
    if proc.returncode != 0 or name.startswith("-") or _is_commit_id(name):
        raise ApiError(400, f"{name!r} is not a valid {'branch' if kind == 'heads' else 'tag'} "
                            "name (e.g. 'v1' or 'v1.2.0')")


def _is_commit_id(name: str) -> bool:
    return len(name) == 40 and all(c in "0123456789abcdef" for c in name)


def _default_branch(repo: GitRepo) -> str:
    proc = repo.run("symbolic-ref", "--short", "HEAD", check=False)
    name = proc.stdout.decode().strip()
    return name if proc.returncode == 0 and name else "main"


def is_private(path: Path) -> bool:
    return (path / PRIVATE_MARKER).is_file()

