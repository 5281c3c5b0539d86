"""Test helpers: hand-made variants and a directory-backed Hub double.

The double implements the Hub protocol over plain directories and records every call,
so tests can assert exactly when the loader talks to a hub. Variants are real: a Python
package plus a metadata.json whose digests come from ``compute_digests``.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import time
import uuid
from pathlib import Path

from kernelhub.errors import RepoNotFoundError
from kernelhub.formats.metadata import BackendInfo, Metadata, compute_digests, write_metadata
from kernelhub.formats.release_manifest import ReleaseFiles
from kernelhub.formats.variants import variant_id
from kernelhub.hub.git import GitRepo, IndexEntry
from kernelhub.signing.sshsig import SigningKey
from kernelhub.versions import Refs


def unique_id(name: str = "kern", backend: str = "cpu") -> str:
    """A fresh module id: the process-wide registry must never see one twice by accident."""
    return variant_id(name, backend, uuid.uuid4().hex)


def new_signing_key(path: Path) -> SigningKey:
    """A fresh OpenSSH Ed25519 private key written to ``path`` (as ``ssh-keygen -t ed25519``
    writes one, without a passphrase), loaded."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from kernelhub.signing.sshsig import load_signing_key

    path.write_bytes(Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
        serialization.NoEncryption()))
    return load_signing_key(path)


def rewrite_on_branch(repo: GitRepo, branch: str, path: str, data: bytes) -> str:
    """Commit ``data`` at ``path`` on top of ``branch`` of a bare repo with git plumbing, as
    an attacker with write access to a hub's storage would; return the new commit."""
    head = repo.resolve_commit(branch)
    assert head is not None, f"no branch {branch}"
    tree = repo.write_tree(head, [], [IndexEntry("100644", repo.hash_blob(data), path)])
    commit = repo.commit_tree(tree, head, "forged")
    repo.run("update-ref", f"refs/heads/{branch}", commit)
    return commit


def make_variant(
    dest: Path,
    *,
    name: str = "kern",
    module_id: str | None = None,
    init: str = "VALUE = 42\n",
    files: dict[str, str] | None = None,
    backend: str = "cpu",
    python_depends: list[str] | None = None,
    kernel_depends: list[dict[str, object]] | None = None,
) -> Metadata:
    """Write a pure-Python variant with a correct metadata.json into ``dest``
    (``kernel_depends``: its ``kernel-depends``, as the ecosystem writes them)."""
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "__init__.py").write_text(init)
    for rel, text in (files or {}).items():
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        (dest / rel).write_text(text)
    metadata = Metadata(
        name=name,
        id=module_id or unique_id(name, backend),
        version=1,
        release="1.0.0",
        backend=BackendInfo(backend, []),
        digest_files=compute_digests(dest),
        license="Apache-2.0",
        python_depends=python_depends or [],
        provenance={"kernel-builder": {"version": "test"}},
        torch="2.13",
        extra={"kernel-depends": kernel_depends} if kernel_depends is not None else {},
    )
    write_metadata(dest, metadata)
    return metadata


class DirHub:
    """A Hub over ``<root>/<org>/<name>/{refs.json,<commit>/<variant>/…}``."""

    def __init__(self, root: Path, *, log: Path | None = None, fetch_delay: float = 0.0,
                 trusted: frozenset[str] = frozenset()) -> None:
        self.root = Path(root)
        self.calls: list[tuple[str, ...]] = []
        self.log = log
        self.fetch_delay = fetch_delay
        self._trusted = trusted

    @property
    def key(self) -> str:
        return "dirhub-" + hashlib.sha256(str(self.root).encode()).hexdigest()[:12]

    def _record(self, *call: str) -> None:
        self.calls.append(call)
        if self.log is not None:
            with open(self.log, "a") as f:
                f.write(" ".join(call) + "\n")

    def _repo(self, repo_id: str) -> Path:
        path = self.root / repo_id
        if not path.is_dir():
            raise RepoNotFoundError(f"no repository {repo_id}")
        return path

    def add(self, repo_id: str, branch: str, variants: dict[str, Path],
            tag: str | None = None) -> str:
        """Publish ``variants`` as a new commit on ``branch``; return the commit."""
        repo = self.root / repo_id
        repo.mkdir(parents=True, exist_ok=True)
        commit = hashlib.sha1(uuid.uuid4().bytes).hexdigest()
        for name, src in variants.items():
            shutil.copytree(src, repo / commit / name)
        (repo / commit).mkdir(exist_ok=True)
        refs_path = repo / "refs.json"
        refs = json.loads(refs_path.read_text()) if refs_path.exists() else {"branches": {}, "tags": {}}
        refs["branches"][branch] = commit
        if tag:
            refs["tags"][tag] = commit
        refs_path.write_text(json.dumps(refs))
        return commit

    def list_refs(self, repo_id: str) -> Refs:
        self._record("list_refs", repo_id)
        data = json.loads((self._repo(repo_id) / "refs.json").read_text())
        return Refs(branches=data["branches"], tags=data["tags"])

    def list_variants(self, repo_id: str, commit: str) -> list[str]:
        self._record("list_variants", repo_id, commit)
        return sorted(p.name for p in (self._repo(repo_id) / commit).iterdir())

    def fetch_variant(self, repo_id: str, commit: str, variant: str, dest: Path) -> None:
        self._record("fetch_variant", repo_id, commit, variant)
        time.sleep(self.fetch_delay)
        shutil.copytree(self._repo(repo_id) / commit / variant, dest, dirs_exist_ok=True)

    def fetch_release(self, repo_id: str, commit: str) -> ReleaseFiles:
        self._record("fetch_release", repo_id, commit)
        return ReleaseFiles(None, None)  # a DirHub's releases are never signed

    def trusted_orgs(self) -> frozenset[str]:
        self._record("trusted_orgs")
        return self._trusted
