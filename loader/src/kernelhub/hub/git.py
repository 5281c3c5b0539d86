"""A small typed wrapper over the git CLI, for the plumbing LocalHub needs.

LocalHub stores variants in bare repositories and never checks anything out, so all it
needs is plumbing: read refs, list trees, stream blobs, write a tree through a temporary
index, make a commit and move refs in one atomic transaction. Each method is one git
process (two for streaming blobs) so a publish or a fetch costs a handful of processes
however many files a variant has.

The environment is fixed so results don't depend on the user's git setup: no terminal
prompts, a fixed committer identity, no commit signing, C locale (stable messages).
"""

from __future__ import annotations

__lazy_modules__ = {"kernelhub.errors"}  # PEP 810: imported when first used

import os
import re
import secrets
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path

from ..errors import HubError
from ..value_types import Record

ZERO_OID = "0" * 40
STALE_LOCK_SECONDS = 10.0
"""git holds a ref lock for milliseconds; one this old was left by a process that died."""
_LOCK_FILE_RE = re.compile(r"Unable to create '(.+?\.lock)': File exists")
"""git's "no object": the expected old value when a ref must not exist yet."""

_IDENTITY = {
    "GIT_AUTHOR_NAME": "kernelhub",
    "GIT_AUTHOR_EMAIL": "kernelhub@localhost",
    "GIT_COMMITTER_NAME": "kernelhub",
    "GIT_COMMITTER_EMAIL": "kernelhub@localhost",
}


class TreeEntry(Record, frozen=True):
    """One line of ``git ls-tree``."""

    mode: str
    kind: str
    """``blob``, ``tree`` or ``commit`` (a submodule)."""
    oid: str
    path: str


class RefValue(Record, frozen=True):
    """Where a ref points: ``oid`` as stored (a tag object for annotated tags) and the
    commit it finally names. Compare-and-swap needs the first, readers the second."""

    oid: str
    commit: str


class IndexEntry(Record, frozen=True):
    """A file to place in a tree: ``mode`` is ``100644`` or ``100755``."""

    mode: str
    oid: str
    path: str


class RefUpdate(Record, frozen=True):
    """Set ``ref`` to ``new`` if it currently is ``old`` (``ZERO_OID``: must not exist)."""

    ref: str
    new: str
    old: str


def _env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env.update(_IDENTITY)
    env["GIT_TERMINAL_PROMPT"] = "0"
    env["LC_ALL"] = "C"
    if extra:
        env.update(extra)
    return env


class GitRepo:
    """A git repository (bare or not) addressed by path; every call runs ``git -C path``."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    def __repr__(self) -> str:
        return f"GitRepo({str(self.path)!r})"

    # -- running -----------------------------------------------------------------------

    def _argv(self, args: Sequence[str]) -> list[str]:
        # commit.gpgSign from a user's global config would make commit-tree prompt or fail.
        return ["git", "-C", str(self.path), "-c", "commit.gpgSign=false", *args]

    def run(
        self,
        *args: str,
        input: bytes | None = None,
        env: Mapping[str, str] | None = None,
        check: bool = True,
    ) -> subprocess.CompletedProcess[bytes]:
        """Run one git command; raise HubError with git's own message when it fails."""
        try:
            proc = subprocess.run(
                self._argv(args), input=input, capture_output=True, env=_env(env), check=False
            )
        except FileNotFoundError:
            raise HubError("git is not installed or not on PATH; LocalHub needs git") from None
        if check and proc.returncode != 0:
            raise HubError(self._failure(args, proc.stderr))
        return proc

    def _failure(self, args: Sequence[str], stderr: bytes) -> str:
        message = stderr.decode(errors="replace").strip() or "no message"
        return f"git {' '.join(args[:2])} failed in {self.path}: {message}"

    def out(
        self, *args: str, input: bytes | None = None, env: Mapping[str, str] | None = None
    ) -> str:
        """Run a command and return its stdout, stripped, as text."""
        return self.run(*args, input=input, env=env).stdout.decode().strip()

    # -- repository --------------------------------------------------------------------

    def is_repo(self) -> bool:
        """A bare repository keeps HEAD, objects/ and refs/ at its top level."""
        return (self.path / "HEAD").is_file() and (self.path / "objects").is_dir()

    @classmethod
    def init_bare(cls, path: Path, initial_branch: str) -> bool:
        """Create a bare repo at ``path`` unless one is there; True if this call made it.

        The repo is made in a sibling temp dir and renamed into place, so a concurrent
        reader or publisher never sees a half-initialised repository; if two publishers
        race, one rename wins and the other uses the winner's repo.
        """
        repo = cls(path)
        if repo.is_repo():
            return False
        path.parent.mkdir(parents=True, exist_ok=True)
        # A plain mkdir (not mkdtemp, which is private to its owner) so the repository
        # gets the usual umask-derived permissions and a team can share the hub.
        staging = path.parent / f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
        staging.mkdir()
        try:
            GitRepo(staging).run("init", "--bare", "--quiet", f"--initial-branch={initial_branch}")
            try:
                os.rename(staging, path)
            except OSError:
                if repo.is_repo():
                    return False
                raise HubError(
                    f"could not create repository {path}: the path exists and is not a git "
                    "repository"
                ) from None
        finally:
            shutil.rmtree(staging, ignore_errors=True)  # already gone if the rename won
        return True

    # -- reading -----------------------------------------------------------------------

    def resolve_commit(self, rev: str) -> str | None:
        """The commit ``rev`` names, or None if it names no commit here."""
        if rev.startswith("-"):
            return None
        proc = self.run(
            "rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}", check=False
        )
        return proc.stdout.decode().strip() if proc.returncode == 0 else None

    def refs(self, *prefixes: str) -> dict[str, RefValue]:
        """Ref name → value, for refs under ``prefixes`` (e.g. ``refs/heads/``)."""
        fmt = "%(refname)%00%(objectname)%00%(*objectname)"
        out = self.run("for-each-ref", f"--format={fmt}", *prefixes).stdout.decode()
        found: dict[str, RefValue] = {}
        for line in out.splitlines():
            name, oid, peeled = line.split("\0")
            found[name] = RefValue(oid=oid, commit=peeled or oid)
        return found

    def ls_tree(self, treeish: str, *paths: str, recursive: bool = False) -> list[TreeEntry]:
        """Entries under ``paths`` (directories, given with a trailing slash) in ``treeish``."""
        args = ["ls-tree", "-z", "--full-tree"]
        if recursive:
            args.append("-r")
        out = self.run(*args, treeish, "--", *paths).stdout.decode()
        entries = []
        for record in filter(None, out.split("\0")):
            meta, name = record.split("\t", 1)
            mode, kind, oid = meta.split(" ")
            entries.append(TreeEntry(mode, kind, oid, name))
        return entries

    def tree_of(self, commit: str) -> str:
        return self.out("rev-parse", f"{commit}^{{tree}}")

    def is_ancestor(self, ancestor: str, descendant: str) -> bool:
        proc = self.run("merge-base", "--is-ancestor", ancestor, descendant, check=False)
        if proc.returncode > 1:
            raise HubError(self._failure(["merge-base", "--is-ancestor"], proc.stderr))
        return proc.returncode == 0

    def read_blobs(self, oids: Sequence[str]) -> Iterator[bytes]:
        """Stream blob contents in order through one ``git cat-file --batch`` process."""
        proc = subprocess.Popen(
            self._argv(["cat-file", "--batch"]),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=_env(),
        )
        assert proc.stdin is not None and proc.stdout is not None
        try:
            for oid in oids:
                proc.stdin.write(f"{oid}\n".encode())
                proc.stdin.flush()
                header = proc.stdout.readline().decode().split()
                if len(header) != 3 or header[1] != "blob":
                    raise HubError(
                        f"git cat-file in {self.path}: {oid} is not a blob ({' '.join(header)})"
                    )
                size = int(header[2])
                data = proc.stdout.read(size)
                proc.stdout.read(1)  # the LF after each object
                yield data
        finally:
            proc.stdin.close()
            proc.stdout.close()
            proc.wait()
            if proc.stderr:
                proc.stderr.close()

    # -- writing -----------------------------------------------------------------------

    def hash_files(self, paths: Sequence[Path]) -> list[str]:
        """Write files as blobs (one process for all of them); their oids, in order."""
        if not paths:
            return []
        for p in paths:
            if "\n" in str(p):
                raise HubError(f"cannot publish {p!r}: file names must not contain newlines")
        # git runs in the repository, so relative paths would resolve against it.
        listing = "".join(f"{Path(p).absolute()}\n" for p in paths).encode()
        return self.out("hash-object", "-w", "--no-filters", "--stdin-paths", input=listing).split()

    def hash_blob(self, data: bytes) -> str:
        """Write ``data`` as a blob; its oid."""
        return self.out("hash-object", "-w", "--no-filters", "--stdin", input=data)

    def write_tree(self, base: str | None, remove: Iterable[str], add: Iterable[IndexEntry]) -> str:
        """A tree = ``base``'s tree, minus the ``remove`` paths, plus ``add``; its oid.

        Works on a throwaway index (GIT_INDEX_FILE), so it never touches the repo's own
        index and any number of publishers can do it at once.
        """
        with tempfile.TemporaryDirectory(prefix="kernelhub-index-") as tmp:
            env = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
            if base is None:
                self.run("read-tree", "--empty", env=env)
            else:
                self.run("read-tree", base, env=env)
            records = [f"0 {ZERO_OID}\t{path}\0" for path in remove]
            records += [f"{e.mode} {e.oid}\t{e.path}\0" for e in add]
            if records:
                self.run(
                    "update-index", "-z", "--index-info", input="".join(records).encode(), env=env
                )
            return self.out("write-tree", env=env)

    def commit_tree(self, tree: str, parent: str | None, message: str) -> str:
        args = ["commit-tree", tree]
        if parent is not None:
            args += ["-p", parent]
        return self.out(*args, "-F", "-", input=message.encode())

    def update_refs(self, updates: Sequence[RefUpdate]) -> str | None:
        """Apply all updates in one transaction, each only if its ref still has ``old``.

        Returns None when applied. When another writer got there first (a ref moved, was
        created, or is locked by a concurrent update) nothing changes and git's message is
        returned, so the caller can rebuild on the new state and try again. Other
        failures raise.
        """
        if not updates:
            return None
        script = "".join(f"update {u.ref} {u.new} {u.old}\n" for u in updates).encode()
        proc = self.run("update-ref", "--stdin", input=script, check=False)
        if proc.returncode == 0:
            return None
        stderr = proc.stderr.decode(errors="replace").strip()
        if "cannot lock ref" in stderr:
            _check_stale_lock(stderr)
            return stderr.splitlines()[0]
        raise HubError(self._failure(["update-ref", "--stdin"], proc.stderr))


def _check_stale_lock(stderr: str) -> None:
    """Raise HubError naming a ref lock file that a crashed git process left behind.

    A live writer's lock is retried by the caller; a stale one would make every retry
    fail the same way, so the user is told which file to remove. kernelhub does not
    remove it itself: it cannot tell a crashed writer from a very slow one on a shared
    filesystem.
    """
    m = _LOCK_FILE_RE.search(stderr)
    if m is None:
        return
    lock = Path(os.path.normpath(m[1]))
    try:
        age = time.time() - lock.stat().st_mtime
    except OSError:
        return  # gone already: the writer finished, a retry will do
    if age >= STALE_LOCK_SECONDS:
        raise HubError(
            f"{lock} was left by a git process that stopped {age:.0f} s ago (a crashed "
            "publish); if no publish to this repository is running, remove that file and "
            "publish again"
        )
