"""What the pages show about a kernel repository, read once per (repository, commit).

Everything here is read from git at one commit, so a page describes one consistent
state: the variants under ``build/``, each one's ``metadata.json`` and ``symbols.json``,
the release signature, and the published benchmark results (:mod:`.bench_results`).
Variant names are parsed by the loader's one parser (:mod:`kernelhub.formats.variants`); a name
it does not know is still listed, under "other".
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from kernelhub.errors import KernelHubError
from kernelhub.formats.metadata import METADATA_FILE, Metadata, parse_metadata
from kernelhub.formats.release_manifest import (
    NAMESPACE,
    RELEASE_FILE,
    SIGNATURE_FILE,
    ReleaseManifest,
)
from kernelhub.formats.variants import VariantKind, parse_variant
from kernelhub.hub.git import GitRepo

from .bench_results import Benchmarks, read_benchmarks
from .repos import RepoStore

SYMBOLS_FILE = "symbols.json"
_RELEASE_TAG = re.compile(r"v(\d+)\.(\d+)\.(\d+)([-.+].*)?")
_BRANCH = re.compile(r"v(\d+)")
OS_NAMES = {"linux": "Linux", "darwin": "macOS", "windows": "Windows"}
BACKEND_NAMES = {"cpu": "CPU", "cuda": "CUDA", "rocm": "ROCm", "xpu": "Intel XPU",
                 "metal": "Apple Metal"}


@dataclass
class VariantView:
    name: str
    torch: str
    """The matrix row: ``2.13``, ``≥ 2.13 (stable ABI)``, ``any``."""
    backend: str
    """The matrix column: ``CPU``, ``CUDA 13.0``, ``any``."""
    platform: str
    """``x86_64 Linux``, or ``any`` for pure-Python variants."""
    serves: str
    """Which machine loads it, in words."""
    metadata: Metadata | None = None
    metadata_error: str | None = None
    symbols: dict[str, Any] | None = None
    files: int = 0
    size: int = 0


@dataclass
class Signature:
    signed: bool
    key: str | None = None
    """The signing key's fingerprint (``SHA256:…``) as the signature names it."""
    valid: bool | None = None
    """Whether the signature verifies for that key; None when it could not be checked."""
    release: str | None = None
    covered: list[str] = field(default_factory=list)
    uncovered: list[str] = field(default_factory=list)
    problem: str | None = None


@dataclass
class RefView:
    name: str
    kind: str
    """``branch``, ``release`` or ``tag``."""
    commit: str
    date: str


@dataclass
class KernelView:
    repo_id: str
    refs: list[RefView]
    selected: RefView | None
    variants: list[VariantView]
    signature: Signature
    benchmarks: Benchmarks
    description: str | None = None

    @property
    def branches(self) -> list[RefView]:
        return [r for r in self.refs if r.kind == "branch"]

    @property
    def releases(self) -> list[RefView]:
        return [r for r in self.refs if r.kind == "release"]

    @property
    def tags(self) -> list[RefView]:
        return [r for r in self.refs if r.kind == "tag"]

    def matrix(self) -> tuple[list[str], list[str], dict[tuple[str, str], list[VariantView]]]:
        """Rows (torch), columns (backend) and the variants in each cell."""
        rows = sorted({v.torch for v in self.variants}, key=_row_key)
        cols = sorted({v.backend for v in self.variants}, key=_col_key)
        cells: dict[tuple[str, str], list[VariantView]] = {}
        for v in self.variants:
            cells.setdefault((v.torch, v.backend), []).append(v)
        return rows, cols, cells


def list_refs(store: RepoStore, repo: GitRepo) -> list[RefView]:
    """Branches (``v<N>`` first, newest first), releases (``v<semver>``, newest first),
    then other tags; each with its commit date."""
    refs = store.refs(repo)
    commits = [r["targetCommit"] for r in refs["branches"] + refs["tags"]]
    dates = _dates(repo, commits)
    views = [RefView(b["name"], "branch", b["targetCommit"], dates.get(b["targetCommit"], ""))
             for b in refs["branches"]]
    for t in refs["tags"]:
        kind = "release" if _RELEASE_TAG.fullmatch(t["name"]) else "tag"
        views.append(RefView(t["name"], kind, t["targetCommit"], dates.get(t["targetCommit"], "")))
    return sorted(views, key=_ref_key)


def default_ref(refs: list[RefView]) -> RefView | None:
    """What a loader reads by default: the highest ``v<N>`` branch, else ``main``."""
    numbered = [r for r in refs if r.kind == "branch" and _BRANCH.fullmatch(r.name)]
    if numbered:
        return max(numbered, key=lambda r: int(r.name[1:]))
    return next((r for r in refs if r.kind == "branch" and r.name == "main"),
                refs[0] if refs else None)


def kernel_view(store: RepoStore, repo: GitRepo, repo_id: str, rev: str | None) -> KernelView:
    refs = list_refs(store, repo)
    selected = next((r for r in refs if r.name == rev), None) if rev else default_ref(refs)
    if selected is None and rev:
        commit = store.commit_of(repo, repo_id, rev)
        selected = RefView(rev, "commit", commit, _dates(repo, [commit]).get(commit, ""))
    if selected is None:
        return KernelView(repo_id, refs, None, [], Signature(False), Benchmarks([], []))
    commit = selected.commit
    entries = store.entries(repo, commit, "build/", recursive=True)
    variants: dict[str, VariantView] = {}
    blobs: dict[tuple[str, str], str] = {}
    for e in entries:
        parts = e.path.split("/")
        if len(parts) == 2 and e.kind == "directory":
            variants[parts[1]] = describe_variant(parts[1])
        elif len(parts) >= 3 and e.kind == "file" and parts[1] in variants:
            variants[parts[1]].files += 1
            variants[parts[1]].size += e.size
            if len(parts) == 3 and parts[2] in (METADATA_FILE, SYMBOLS_FILE):
                blobs[(parts[1], parts[2])] = e.oid
    keys = sorted(blobs)
    raw = dict(zip(keys, repo.read_blobs([blobs[k] for k in keys]), strict=True))
    for (name, file), data in raw.items():
        view = variants[name]
        if file == METADATA_FILE:
            try:
                view.metadata = parse_metadata(data, f"{repo_id}@{commit[:12]}:{name}")
            except KernelHubError as exc:
                view.metadata_error = str(exc)
        else:
            view.symbols = _symbols(data)
    signature = _signature(repo, repo_id, commit,
                           {n: raw[(n, METADATA_FILE)] for n in variants if (n, METADATA_FILE) in raw})
    ordered = sorted(variants.values(), key=lambda v: (_row_key(v.torch), _col_key(v.backend), v.name))
    description = next((v.metadata.name for v in ordered if v.metadata), None)
    return KernelView(repo_id, refs, selected, ordered, signature,
                      read_benchmarks(store, repo, commit), description)


def describe_variant(name: str) -> VariantView:
    """A variant's place in the matrix, and the machine it serves, from its name."""
    try:
        v = parse_variant(name)
    except KernelHubError:
        return VariantView(name, "other", "other", "other", "a variant name this hub does not know")
    backend = BACKEND_NAMES.get(v.backend or "", "any")
    if v.compute is not None and v.compute.version:
        backend = f"{backend} {v.compute.version_str}"
    platform = f"{v.arch} {OS_NAMES.get(v.os or '', v.os)}" if v.arch else "any"
    if v.kind is VariantKind.COMPILED:
        assert v.torch is not None
        torch = f"{v.torch[0]}.{v.torch[1]}"
        serves = f"torch {torch} on {platform}"
    elif v.kind is VariantKind.STABLE_ABI:
        assert v.torch is not None
        torch = f"≥ {v.torch[0]}.{v.torch[1]} (stable ABI)"
        serves = f"torch {v.torch[0]}.{v.torch[1]} or newer on {platform}"
    else:
        torch = "any"
        serves = "any torch, any platform" if v.kind is VariantKind.UNIVERSAL else \
            "any torch and platform"
    if v.backend == "cuda" and v.compute and v.compute.version:
        serves += f" with a CUDA {v.compute.version[0]}.x driver (toolkit ≥ {v.compute.version_str})"
    elif v.backend == "rocm" and v.compute and v.compute.version:
        serves += f" with ROCm {v.compute.version_str}"
    elif v.backend in ("cpu", "metal", "xpu"):
        serves += f" ({BACKEND_NAMES[v.backend]})"
    return VariantView(name, torch, backend, platform, serves)


def _signature(repo: GitRepo, repo_id: str, commit: str, metadata: dict[str, bytes]) -> Signature:
    found = {e.path: e.oid for e in repo.ls_tree(commit, RELEASE_FILE, SIGNATURE_FILE)
             if e.kind == "blob"}
    if RELEASE_FILE not in found or SIGNATURE_FILE not in found:
        return Signature(False)
    from kernelhub.formats.release_manifest import metadata_sha256
    from kernelhub.signing import sshsig

    manifest_bytes, sig_bytes = repo.read_blobs([found[RELEASE_FILE], found[SIGNATURE_FILE]])
    try:
        manifest = ReleaseManifest.from_bytes(manifest_bytes, f"{repo_id}@{commit[:12]}")
        parsed = sshsig.parse_signature(sig_bytes)
    except KernelHubError as exc:
        return Signature(True, problem=str(exc))
    try:
        valid: bool | None = sshsig.signature_valid(parsed, manifest_bytes, NAMESPACE)
    except ImportError:
        valid = None
    covered = sorted(n for n, d in metadata.items() if manifest.variants.get(n) == metadata_sha256(d))
    return Signature(True, key=parsed.key.fingerprint, valid=valid, release=manifest.release,
                     covered=covered, uncovered=sorted(set(metadata) - set(covered)),
                     problem=None if manifest.repo_id == repo_id else
                     f"the manifest names {manifest.repo_id}, not {repo_id}")


def _symbols(data: bytes) -> dict[str, Any] | None:
    """symbols.json in the shape the ecosystem's ``describe-api`` reads (schema_version 1,
    ``functions`` and ``layers`` lists of named entries); None when it is not that."""
    try:
        symbols = json.loads(data)
    except ValueError:
        return None
    if not isinstance(symbols, dict):
        return None
    for group in ("functions", "layers"):
        items = symbols.get(group)
        if not isinstance(items, list) or not all(
                isinstance(i, dict) and isinstance(i.get("name"), str) for i in items):
            return None
    return symbols


def _dates(repo: GitRepo, commits: list[str]) -> dict[str, str]:
    unique = sorted(set(commits))
    if not unique:
        return {}
    out = repo.out("show", "-s", "--format=%H %cs", *unique)
    return dict(line.split(" ", 1) for line in out.splitlines() if " " in line)


def _ref_key(r: RefView) -> tuple[int, tuple[int, ...], str]:
    order = {"branch": 0, "release": 1, "tag": 2, "commit": 3}[r.kind]
    m = _BRANCH.fullmatch(r.name) if r.kind == "branch" else _RELEASE_TAG.fullmatch(r.name)
    numbers = tuple(-int(g) for g in m.groups()[:3] if g is not None) if m else (1,)
    return order, numbers, r.name


def _row_key(row: str) -> tuple[int, str]:
    if row[0].isdigit():
        major, minor = row.split(".")
        return 0, f"{999 - int(major):03d}{999 - int(minor):03d}"
    return (1, row) if row.startswith("≥") else (2, row)


def _col_key(col: str) -> tuple[int, str]:
    order = ["CPU", "CUDA", "ROCm", "Intel XPU", "Apple Metal", "any", "other"]
    head = next((i for i, name in enumerate(order) if col.startswith(name)), len(order))
    return head, col
