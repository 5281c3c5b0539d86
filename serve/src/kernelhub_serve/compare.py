"""Two refs of a kernel repository compared the way a kernel's user asks: which files
changed, which build variants were added, removed or changed, and how the kernel's
metadata (each variant's ``metadata.json``, and ``build.toml``'s ``[general]`` where the
repository carries its source) differs, field by field, side by side.

Metadata is read by the loader's one parser (:func:`kernelhub.formats.metadata.parse_metadata`);
an unreadable ``metadata.json`` is shown as such, never trusted.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

from kernelhub.errors import KernelHubError
from kernelhub.formats.metadata import METADATA_FILE, Metadata, parse_metadata
from kernelhub.hub.git import GitRepo

from .history import Change, changes
from .repos import RepoStore

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - the 3.10 branch
    import tomli as tomllib

BUILD = "build/"
BUILD_TOML = "build.toml"


@dataclass(frozen=True)
class Field:
    """One metadata field on both sides (``""`` where a side has none)."""

    name: str
    base: str
    head: str

    @property
    def differs(self) -> bool:
        return self.base != self.head


@dataclass
class VariantChange:
    name: str
    status: str
    """``added``, ``removed``, ``changed`` or ``unchanged``."""
    files: list[Change] = field(default_factory=list)
    fields: list[Field] = field(default_factory=list)


@dataclass
class Comparison:
    base: str
    head: str
    base_commit: str
    head_commit: str
    files: list[Change]
    variants: list[VariantChange]
    kernel: list[Field]
    """Kernel-wide facts: what every variant's metadata says, and ``build.toml``."""


def compare(store: RepoStore, repo: GitRepo, repo_id: str, base: str, head: str) -> Comparison:
    """``base`` → ``head`` (branches, tags or commits; RevisionNotFound for either)."""
    old = store.commit_of(repo, repo_id, base)
    new = store.commit_of(repo, repo_id, head)
    files = changes(repo, old, new) if old != new else []
    before, after = _metadata(store, repo, repo_id, old), _metadata(store, repo, repo_id, new)
    variants = []
    for name in sorted(before.keys() | after.keys()):
        touched = [c for c in files if c.path.startswith(f"{BUILD}{name}/")]
        status = ("added" if name not in before else "removed" if name not in after
                  else "changed" if touched else "unchanged")
        fields = _fields(before.get(name), after.get(name)) if status != "unchanged" else []
        variants.append(VariantChange(name, status, touched, fields))
    kernel = _kernel_fields(before, after) + _general_fields(store, repo, old, new)
    return Comparison(base, head, old, new, files, variants, kernel)


def _metadata(store: RepoStore, repo: GitRepo, repo_id: str, commit: str
              ) -> dict[str, Metadata | str]:
    """Each variant under ``build/`` → its parsed metadata, or why it could not be read."""
    names = [e.path.removeprefix(BUILD) for e in store.entries(repo, commit, BUILD)
             if e.kind == "directory"]
    wanted = [f"{BUILD}{n}/{METADATA_FILE}" for n in names]
    found = {e.path: e.oid for e in store.paths_info(repo, commit, wanted) if e.kind == "file"}
    paths = [p for p in wanted if p in found]
    blobs = dict(zip(paths, repo.read_blobs([found[p] for p in paths]), strict=True))
    result: dict[str, Metadata | str] = {}
    for name, path in zip(names, wanted, strict=True):
        if path not in blobs:
            result[name] = f"no {METADATA_FILE}"
            continue
        try:
            result[name] = parse_metadata(blobs[path], f"{repo_id}@{commit[:12]}:{name}")
        except KernelHubError as exc:
            result[name] = str(exc)
    return result


def describe(meta: Metadata | str | None) -> dict[str, str]:
    """The fields of one variant's metadata the comparison shows, as text."""
    if meta is None:
        return {}
    if isinstance(meta, str):
        return {"metadata.json": meta}
    kernel = meta.provenance.get("kernel")
    source = kernel.get("commit") if isinstance(kernel, dict) else None
    return {"name": meta.name, "id": meta.id, "version": str(meta.version),
            "release": meta.release, "license": meta.license or "",
            "backend": " ".join([meta.backend.type, *meta.backend.archs]),
            "torch": meta.torch or "", "python-depends": ", ".join(meta.python_depends),
            "files": str(len(meta.digest_files)), "source commit": str(source or "")}


def _fields(base: Metadata | str | None, head: Metadata | str | None) -> list[Field]:
    old, new = describe(base), describe(head)
    return [Field(k, old.get(k, ""), new.get(k, "")) for k in dict.fromkeys([*old, *new])]


def _kernel_fields(before: dict[str, Metadata | str], after: dict[str, Metadata | str]
                   ) -> list[Field]:
    """Per field, the distinct values across all variants on each side."""
    def values(side: dict[str, Metadata | str], key: str) -> str:
        seen = {describe(m).get(key, "") for m in side.values() if not isinstance(m, str)}
        return ", ".join(sorted(v for v in seen if v))

    rows = [Field("variants", str(len(before)), str(len(after)))]
    for key in ("name", "version", "release", "license", "torch", "python-depends"):
        rows.append(Field(key, values(before, key), values(after, key)))
    rows.append(Field("backends",
                      ", ".join(sorted({m.backend.type for m in before.values()
                                        if not isinstance(m, str)})),
                      ", ".join(sorted({m.backend.type for m in after.values()
                                        if not isinstance(m, str)}))))
    return rows


def _general_fields(store: RepoStore, repo: GitRepo, old: str, new: str) -> list[Field]:
    """``build.toml``'s ``[general]`` on each side, where either side has one."""
    old_general, new_general = _general(store, repo, old), _general(store, repo, new)
    keys = dict.fromkeys([*old_general, *new_general])
    return [Field(f"build.toml {k}", old_general.get(k, ""), new_general.get(k, ""))
            for k in keys]


def _general(store: RepoStore, repo: GitRepo, commit: str) -> dict[str, str]:
    found = [e for e in store.paths_info(repo, commit, [BUILD_TOML]) if e.kind == "file"]
    if not found:
        return {}
    try:
        general = tomllib.loads(store.read(repo, found[0].oid).decode()).get("general", {})
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        return {"(unreadable)": str(exc)[:200]}
    if not isinstance(general, dict):
        return {}
    return dict(_flatten(general))


def _flatten(table: dict[str, object], prefix: str = "") -> list[tuple[str, str]]:
    rows: list[tuple[str, str]] = []
    for key, value in table.items():
        if isinstance(value, dict):
            rows += _flatten(value, f"{prefix}{key}.")
        elif isinstance(value, list):
            rows.append((f"{prefix}{key}", ", ".join(str(v) for v in value)))
        else:
            rows.append((f"{prefix}{key}", str(value)))
    return rows
