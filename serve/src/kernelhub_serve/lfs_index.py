"""Which committed files came in through Git LFS, recorded in the repository itself.

A file committed with an ``lfsFile`` operation is stored as a plain git blob (so LocalHub
readers read its bytes directly), and the fact that it is an LFS object is kept in the
bare repository beside the branches: the ref :data:`INDEX_REF` names a commit whose tree
maps each LFS object's sha256 (the entry's name) to the blob holding its bytes. A commit
moves its branch and this ref in one ``git update-ref`` transaction (see
:mod:`kernelhub_serve.writer`), so a reader never sees a file without its LFS record, and
the ref keeps every committed object reachable, as the Hub's LFS storage keeps its
objects.

Reads report such a file as the Hub reports an LFS-tracked one: ``oid`` is the git id of
its LFS pointer file, ``size`` the object's, and ``lfs`` = ``{oid (sha256), size,
pointerSize}`` (``sha256`` in ``model_info`` siblings); a resolve adds
``X-Linked-Etag``/``X-Linked-Size``. The pointer is the git-lfs spec's three lines, so its
id and size follow from (sha256, size) without being stored. The record is per blob: the
same bytes committed again as a regular file are reported as LFS too (on the Hub the
upload mode, hence the answer, depends on the size, so both would be LFS there as well).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from kernelhub.hub.git import GitRepo, IndexEntry

INDEX_REF = "refs/kernelhub/lfs"
POINTER_VERSION = "https://git-lfs.github.com/spec/v1"


@dataclass(frozen=True)
class LfsObject:
    """A committed file's LFS identity."""

    sha256: str
    size: int

    @property
    def pointer(self) -> bytes:
        """The LFS pointer file git-lfs would commit for the object."""
        return f"version {POINTER_VERSION}\noid sha256:{self.sha256}\nsize {self.size}\n".encode()

    @property
    def pointer_oid(self) -> str:
        """The git blob id of :attr:`pointer`: what the Hub reports as an LFS file's oid."""
        pointer = self.pointer
        return hashlib.sha1(b"blob %d\0" % len(pointer) + pointer).hexdigest()

    def tree_api(self) -> dict[str, object]:
        """The ``lfs`` object of a tree or paths-info entry."""
        return {"oid": self.sha256, "size": self.size, "pointerSize": len(self.pointer)}

    def sibling_api(self) -> dict[str, object]:
        """The ``lfs`` object of a ``model_info(files_metadata=True)`` sibling."""
        return {"sha256": self.sha256, "size": self.size, "pointerSize": len(self.pointer)}


def head(repo: GitRepo) -> str | None:
    """The index commit, or None before the repository's first LFS commit."""
    return repo.resolve_commit(INDEX_REF)


def updated(repo: GitRepo, current: str | None, objects: dict[str, str]) -> str | None:
    """A new index commit on ``current`` that adds ``objects`` (sha256 → blob id); None
    when every one of them is recorded already (nothing to update)."""
    known = {e.path for e in repo.ls_tree(current)} if current is not None else set()
    new = [IndexEntry("100644", blob, sha) for sha, blob in sorted(objects.items())
           if sha not in known]
    if not new:
        return None
    tree = repo.write_tree(current, [], new)
    return repo.commit_tree(tree, current, f"record {len(new)} LFS object(s)")
