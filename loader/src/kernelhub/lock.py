"""``kernels.lock``: the kernel ecosystem's lock-file format, plus kernelhub's own hash —
the one lock module (writing a project's lock and prefetching what it pins are
:func:`kernelhub.api.lock_project` and :func:`kernelhub.api.download_locked`).

The file is a JSON list with one entry per repository, as the ecosystem's CLI writes it::

    [{"repo_id": "org/name", "sha": "<commit id>",
      "variants": {"<variant>": {"hash": "sha256-<hex>", "hash_type": "git_lfs_concat"}},
      "kernelhub": {"metadata-sha256": {"<variant>": "<hex>"}}}]

* ``variants[v].hash`` (``git_lfs_concat``): sha256 over the variant's files sorted by
  their path (relative to ``build/<v>/``, UTF-8 bytes), each path followed by the raw
  bytes of the file's git blob id (or, for a file stored with Git LFS, its sha256). The
  ecosystem's loader checks it; so do we, from the cached files' git blob ids.
* ``kernelhub["metadata-sha256"][v]`` (ours, ignored by the ecosystem's loader, which
  reads only the keys above): the sha256 of the variant's ``metadata.json``. Since every
  other file is checked against that metadata's digests before import, it pins the
  whole variant whatever the hub's storage (LFS or not).

A lock also accepts the older ``{"org/name": "<sha>"}`` object (pins without hashes),
and the list kernels 0.17+ writes (``KernelLocks``: pins without hashes, one per locked
dependency, transitive ones included)::

    [{"dependency": {"repo-id": "org/name", "version": 1}, "lock": {"commit": "<sha>"}}]

A pin must be a full commit id: a branch or tag moves, which defeats locking.

A locked load checks the lock on the bytes it imports
(:class:`kernelhub.load.validators.LockValidator`).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from .errors import LockFileError
from .records import Record, field
from .versions import is_commit_id, shown_name

LOCKFILE_NAME = "kernels.lock"
GIT_LFS_CONCAT = "git_lfs_concat"
OURS = "kernelhub"


class LockEntry(Record, frozen=True):
    """One locked repository: its commit and, per variant, the hashes it must match."""

    repo_id: str
    sha: str
    variant_hashes: dict[str, str] = field(default_factory=dict)
    """variant → ``sha256-<hex>`` (``git_lfs_concat``)."""
    metadata_sha256: dict[str, str] = field(default_factory=dict)
    """variant → sha256 hex of its metadata.json (kernelhub's addition)."""

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {
            "repo_id": self.repo_id,
            "sha": self.sha,
            "variants": {v: {"hash": h, "hash_type": GIT_LFS_CONCAT}
                         for v, h in sorted(self.variant_hashes.items())},
        }
        if self.metadata_sha256:
            out[OURS] = {"metadata-sha256": dict(sorted(self.metadata_sha256.items()))}
        return out


def _ecosystem_entry(raw: dict[str, object], bad: LockFileError) -> LockEntry:
    """An entry of the ``KernelLocks`` list kernels 0.17+ writes: the pin, no hashes."""
    dependency, lock = raw.get("dependency"), raw.get("lock")
    if not (isinstance(dependency, dict) and isinstance(repo := dependency.get("repo-id"), str)
            and isinstance(lock, dict) and isinstance(commit := lock.get("commit"), str)):
        raise bad
    return LockEntry(repo, commit)


def _entry(raw: object, path: Path | str) -> LockEntry:
    bad = LockFileError(f"lock file {path}: malformed entry {raw!r:.120}; regenerate it with "
                        "`kernelhub lock`")
    if isinstance(raw, dict) and set(raw) == {"dependency", "lock"}:
        return _ecosystem_entry(raw, bad)
    if not isinstance(raw, dict) or not isinstance(raw.get("repo_id"), str):
        raise bad
    if not isinstance(sha := raw.get("sha"), str):
        raise bad
    hashes: dict[str, str] = {}
    if not isinstance(variants := raw.get("variants") or {}, dict):
        raise bad
    for variant, lock in variants.items():
        if not isinstance(lock, dict) or not isinstance(lock.get("hash"), str):
            raise bad
        if lock.get("hash_type", GIT_LFS_CONCAT) != GIT_LFS_CONCAT:
            raise LockFileError(f"lock file {path}: {raw['repo_id']} {variant}: unknown "
                                f"hash_type {lock.get('hash_type')!r}")
        hashes[variant] = lock["hash"]
    ours = raw.get(OURS) or {}
    meta = ours.get("metadata-sha256", {}) if isinstance(ours, dict) else {}
    if not isinstance(meta, dict) or not all(isinstance(v, str) for v in meta.values()):
        raise bad
    return LockEntry(raw["repo_id"], sha, hashes, dict(meta))


def read_lock(path: Path) -> dict[str, LockEntry]:
    """Every entry of the lock file at ``path``, by repository id."""
    try:
        raw = Path(path).read_bytes()
    except FileNotFoundError:
        raise LockFileError(
            f"lock file {path} does not exist; create it with `kernelhub lock`, or pass "
            "lockfile= to the locked load"
        ) from None
    except OSError as e:
        raise LockFileError(f"lock file {path} is not readable ({e.strerror}); fix or "
                            "regenerate it") from None
    return parse_lock(raw, path)


def parse_lock(raw: bytes, path: Path | str) -> dict[str, LockEntry]:
    """Every entry of lock-file bytes read from ``path`` (named in errors), by repository id."""
    try:
        data = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError) as e:
        raise LockFileError(f"lock file {path} is not readable JSON ({type(e).__name__}); "
                            "fix or regenerate it") from None
    if isinstance(data, dict):
        return {k: LockEntry(k, v) for k, v in data.items() if isinstance(k, str)}
    if isinstance(data, list):
        found: dict[str, LockEntry] = {}
        for entry in (_entry(e, path) for e in data):
            if (seen := found.get(entry.repo_id)) is not None and seen.sha != entry.sha:
                raise LockFileError(
                    f"lock file {path} pins {shown_name(entry.repo_id)} to two commits "
                    f"({seen.sha[:12]}, {entry.sha[:12]}); a locked load takes one pin per "
                    "repository, so lock one version of it")
            found.setdefault(entry.repo_id, entry)
        return found
    raise LockFileError(
        f"lock file {path} must hold a JSON list of {{\"repo_id\": …, \"sha\": …}} entries "
        f"or an object of repo id → commit, not a {type(data).__name__}"
    )


def lock_entry(repo_id: str, lockfile: Path | None) -> LockEntry:
    """The entry for ``repo_id`` in ``lockfile`` (default ``./kernels.lock``), checked."""
    path = Path(lockfile) if lockfile is not None else Path.cwd() / LOCKFILE_NAME
    return pick_entry(repo_id, read_lock(path), path)


def pick_entry(repo_id: str, entries: dict[str, LockEntry], path: Path | str) -> LockEntry:
    """The entry for ``repo_id`` among a lock file's ``entries``, checked."""
    if repo_id not in entries:
        raise LockFileError(
            f"lock file {path} has no entry for {repo_id}; it pins: "
            f"{', '.join(sorted(map(shown_name, entries))) or 'nothing'}. Add it to the project's kernel "
            "dependencies and run `kernelhub lock`."
        )
    entry = entries[repo_id]
    if not is_commit_id(entry.sha):
        raise LockFileError(
            f"lock file {path} pins {repo_id} to {entry.sha!r}, which is not a full commit "
            "id (40 or 64 hex); a lock must name a commit (a branch or tag moves)"
        )
    return entry


def distribution_lock(module_name: str) -> tuple[dict[str, LockEntry], str] | None:
    """The ``kernels.lock`` in the package metadata of the installed distribution that
    provides ``module_name``'s top-level package, parsed, with where it was found; None
    where there is none. The ecosystem's build hook copies a project's lock file there,
    so a library installed as a wheel carries its pins with it."""
    import importlib.metadata

    package = module_name.partition(".")[0]
    for name in importlib.metadata.packages_distributions().get(package, []):
        dist = importlib.metadata.distribution(name)
        text = dist.read_text(LOCKFILE_NAME)
        if text is not None:
            where = f"{LOCKFILE_NAME} of the installed distribution {name}"
            return parse_lock(text.encode("utf-8"), where), where
    return None


def write_lock(path: Path, entries: list[LockEntry]) -> None:
    """Write ``entries`` atomically (a reader sees the old file or the new one)."""
    text = json.dumps([e.to_json() for e in entries], indent=2) + "\n"
    tmp = Path(f"{path}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)




# -- the project's dependencies ----------------------------------------------------


def project_dependencies(project_dir: Path) -> dict[str, int | str]:
    """Kernel dependencies of a project's ``pyproject.toml``: repo id → version.

    Read from the ecosystem's ``[tool.kernels.dependencies]`` (int majors) and
    kernelhub's ``[tool.kernelhub.dependencies]`` (any version in the one grammar);
    a repository in both must agree.
    """
    from .tomlfile import tomllib  # the lock itself is JSON: loading a locked kernel reads no TOML

    path = Path(project_dir) / "pyproject.toml"
    try:
        data = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise LockFileError(f"{path} does not exist; a project declares its kernels there "
                            "under [tool.kernels.dependencies]") from None
    except (OSError, ValueError) as e:
        raise LockFileError(f"{path} is not readable TOML: {e}") from None
    tool = data.get("tool", {})
    found: dict[str, int | str] = {}
    for table in ("kernels", "kernelhub"):
        deps = tool.get(table, {}).get("dependencies", {})
        if not isinstance(deps, dict):
            raise LockFileError(f"{path}: [tool.{table}.dependencies] must be a table of "
                                "\"org/name\" = version")
        for repo_id, version in deps.items():
            if isinstance(version, bool) or not isinstance(version, int | str):
                raise LockFileError(f"{path}: [tool.{table}.dependencies] {repo_id!r} = "
                                    f"{version!r}: expected an int major or a version string")
            if repo_id in found and str(found[repo_id]) != str(version):
                raise LockFileError(f"{path}: {repo_id} is {found[repo_id]!r} in one table and "
                                    f"{version!r} in the other; keep one")
            found[repo_id] = version
    if not found:
        raise LockFileError(f"{path} declares no kernels: add [tool.kernels.dependencies] "
                            "with entries such as \"kernels-community/activation\" = 1")
    return found
