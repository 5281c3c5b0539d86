"""``kernels.lock``: the kernel ecosystem's lock-file formats, and kernelhub's hashes beside
them — the one lock module (writing a project's lock and prefetching what it pins are
:func:`kernelhub.api.lock_project` and :func:`kernelhub.api.download_locked`).

``kernelhub lock`` writes two files (see docs/decisions.md, "Lock files both ways"):

* ``kernels.lock``, the list kernels 0.17+ writes and reads (``KernelLocks``: a pin per
  dependency, no hashes; their parser refuses any key it does not know, at every level)::

    [{"dependency": {"repo-id": "org/name", "version": 1}, "lock": {"commit": "<sha>"}}]

  A dependency the project asks for by a version spec the ecosystem cannot express
  (kernelhub's ``">=1.2,<2"``) is written as ``"revision": "<the locked commit>"``.
  Every ``kernel-depends`` entry of a locked kernel (any variant's, recursively; see
  :mod:`kernelhub.lock_tree`) has a pin of its own, keyed by the dependency exactly as
  declared (``{"repo-id": "acme/scale", "version": 1}``), since their locked loads look
  each one up so.
* ``kernelhub.lock`` (:data:`HASHES_NAME`) beside it: the same pins with, per variant, the
  hashes a kernelhub load checks — the list kernels before 0.17 wrote and read::

    [{"repo_id": "org/name", "sha": "<commit id>",
      "variants": {"<variant>": {"hash": "sha256-<hex>", "hash_type": "git_lfs_concat"}},
      "kernelhub": {"metadata-sha256": {"<variant>": "<hex>"}}}]

  ``kernelhub lock --format kernelhub`` writes this list alone to ``kernels.lock`` (one
  file; kernels 0.17+ cannot read it).

* ``variants[v].hash`` (``git_lfs_concat``): sha256 over the variant's files sorted by
  their path (relative to ``build/<v>/``, UTF-8 bytes), each path followed by the raw
  bytes of the file's git blob id (or, for a file stored with Git LFS, its sha256).
* ``kernelhub["metadata-sha256"][v]``: the sha256 of the variant's ``metadata.json``.
  Since every other file is checked against that metadata's digests before import, it
  pins the whole variant whatever the hub's storage (LFS or not).

Reading takes either list (and the older ``{"org/name": "<sha>"}`` object, pins without
hashes); the hashes in a ``kernelhub.lock`` beside the file are joined to its pins, and
one that names another commit than the pin is refused as stale. A pin must be a full
commit id: a branch or tag moves, which defeats locking.

A locked load checks the lock on the bytes it imports
(:class:`kernelhub.load.validators.LockValidator`), and takes the kernel's dependencies
from the same lock (:class:`LockPins`), each checked as the kernel is. The lock holds one
commit per repository: one that pins two is refused.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from . import user_files
from .errors import LockFileError
from .lazy_names import deferred
from .value_types import Record, field, replace
from .versions import is_commit_id, shown_name

if TYPE_CHECKING:
    from importlib import metadata as importlib_metadata

    from .deps import KernelDependency
else:  # the lock itself is JSON: loading a locked kernel reads no TOML
    importlib_metadata = deferred("importlib.metadata")

LOCKFILE_NAME = "kernels.lock"
HASHES_NAME = "kernelhub.lock"
"""kernelhub's hashes for the pins of the ``kernels.lock`` beside it."""
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
    hub: str | None = None
    """The hub the pin came from (a LocalHub path or a Hub-API URL, as messages name it;
    kernelhub's addition): a locked load through a search path that has this hub reads
    the pin from it (docs/decisions.md, issue 30)."""

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {
            "repo_id": self.repo_id,
            "sha": self.sha,
            "variants": {v: {"hash": h, "hash_type": GIT_LFS_CONCAT}
                         for v, h in sorted(self.variant_hashes.items())},
        }
        ours: dict[str, object] = {}
        if self.metadata_sha256:
            ours["metadata-sha256"] = dict(sorted(self.metadata_sha256.items()))
        if self.hub is not None:
            ours["hub"] = self.hub
        if ours:
            out[OURS] = ours
        return out

    def to_ecosystem_json(self, version: int | str | None) -> dict[str, object]:
        """The entry as kernels 0.17+ writes it: a major stays a major; any other version
        (a kernelhub spec, a branch) becomes the commit it locked, which their resolver
        takes as a revision."""
        wanted: dict[str, object] = (
            {"version": version} if isinstance(version, int) and not isinstance(version, bool)
            else {"revision": self.sha})
        return {"dependency": {"repo-id": self.repo_id, **wanted}, "lock": {"commit": self.sha}}

    def key(self) -> tuple[object, ...]:
        """The pin and every hash, hashable: what a load's memo keys it by (a tuple costs
        a locked load less than the entry's JSON)."""
        return (self.repo_id, self.sha, tuple(sorted(self.variant_hashes.items())),
                tuple(sorted(self.metadata_sha256.items())), self.hub)


class LockPins(Record, frozen=True):
    """A whole lock file's pins and where they were read: a locked load takes the kernel
    from here and its ``kernel-depends`` too, so what loads is what was locked and
    hashed, never a fresh resolution of a dependency's version."""

    entries: dict[str, LockEntry]
    where: str
    """The lock file (or distribution) the pins came from, as errors name it."""

    def pick(self, repo_id: str) -> LockEntry:
        """The checked pin of ``repo_id`` (:func:`pick_entry`)."""
        return pick_entry(repo_id, self.entries, self.where)

    def key(self) -> tuple[object, ...]:
        """Every pin and hash, as a load's memo keys them: another lock loads again."""
        return tuple(self.entries[r].key() for r in sorted(self.entries))


def _malformed(raw: object, path: Path | str) -> LockFileError:
    """The error for an entry that is not one (made only when raised: a lock's entries are
    read on every locked load)."""
    return LockFileError(f"lock file {path}: malformed entry {raw!r:.120}; regenerate it "
                         "with `kernelhub lock`")


def _ecosystem_entry(raw: dict[str, object], path: Path | str) -> LockEntry:
    """An entry of the ``KernelLocks`` list kernels 0.17+ writes: the pin, no hashes."""
    dependency, lock = raw.get("dependency"), raw.get("lock")
    if not (isinstance(dependency, dict) and isinstance(repo := dependency.get("repo-id"), str)
            and isinstance(lock, dict) and isinstance(commit := lock.get("commit"), str)):
        raise _malformed(raw, path)
    return LockEntry(repo, commit)


def _entry(raw: object, path: Path | str) -> LockEntry:
    if isinstance(raw, dict) and set(raw) == {"dependency", "lock"}:
        return _ecosystem_entry(raw, path)
    if not isinstance(raw, dict) or not isinstance(raw.get("repo_id"), str):
        raise _malformed(raw, path)
    if not isinstance(sha := raw.get("sha"), str):
        raise _malformed(raw, path)
    hashes: dict[str, str] = {}
    if not isinstance(variants := raw.get("variants") or {}, dict):
        raise _malformed(raw, path)
    for variant, lock in variants.items():
        if not isinstance(lock, dict) or not isinstance(lock.get("hash"), str):
            raise _malformed(raw, path)
        if lock.get("hash_type", GIT_LFS_CONCAT) != GIT_LFS_CONCAT:
            raise LockFileError(f"lock file {path}: {raw['repo_id']} {variant}: unknown "
                                f"hash_type {lock.get('hash_type')!r}")
        hashes[variant] = lock["hash"]
    ours = raw.get(OURS) or {}
    meta = ours.get("metadata-sha256", {}) if isinstance(ours, dict) else {}
    if not isinstance(meta, dict) or not all(isinstance(v, str) for v in meta.values()):
        raise _malformed(raw, path)
    hub = ours.get("hub") if isinstance(ours, dict) else None
    if hub is not None and not isinstance(hub, str):
        raise _malformed(raw, path)
    return LockEntry(raw["repo_id"], sha, hashes, dict(meta), hub)


def read_lock(path: Path) -> dict[str, LockEntry]:
    """Every entry of the lock file at ``path``, by repository id."""
    path = user_files.user_path(path, "the lock file")
    try:
        raw = user_files.read_bounded(path)
    except FileNotFoundError:
        raise LockFileError(
            f"lock file {path} does not exist; create it with `kernelhub lock`, or pass "
            "lockfile= to the locked load"
        ) from None
    except OSError as e:
        raise LockFileError(f"lock file {path} is not readable ({e.strerror}); fix or "
                            "regenerate it") from None
    entries = parse_lock(raw, path)
    beside = path.with_name(HASHES_NAME)
    try:
        hashes = beside.read_bytes()
    except FileNotFoundError:
        return entries
    except OSError as e:
        raise LockFileError(f"{beside} is not readable ({e.strerror}); fix it, or regenerate "
                            "both files with `kernelhub lock`") from None
    return with_hashes(entries, parse_lock(hashes, beside), path, beside)


def with_hashes(pins: dict[str, LockEntry], hashed: dict[str, LockEntry], path: Path | str,
                beside: Path | str) -> dict[str, LockEntry]:
    """``pins`` (a ``kernels.lock``) with the hashes ``hashed`` (the ``kernelhub.lock``
    beside it) records for the same commits. A pin that already has hashes keeps them;
    hashes for another commit than the pin mean the two files were written apart, and
    are refused rather than dropped (dropping them would load unhashed)."""
    out = dict(pins)
    for repo_id, pin in pins.items():
        found = hashed.get(repo_id)
        if found is None or pin.variant_hashes or pin.metadata_sha256:
            continue
        if found.sha != pin.sha:
            raise LockFileError(
                f"{beside} records hashes for {shown_name(repo_id)} at {found.sha[:12]}, but "
                f"{path} pins {pin.sha[:12]}: the two were written apart. Run `kernelhub lock` "
                f"to rewrite both, or delete {beside} to load without kernelhub's hashes")
        out[repo_id] = replace(pin, variant_hashes=found.variant_hashes,
                               metadata_sha256=found.metadata_sha256, hub=found.hub)
    return out


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
                    f"({seen.sha[:12]}, {entry.sha[:12]}); a kernelhub locked load takes one commit "
                    "per repository: make every kernel ask for one version of it and run "
                    "`kernelhub lock` again")
            found.setdefault(entry.repo_id, entry)
        return found
    raise LockFileError(
        f"lock file {path} must hold a JSON list of {{\"repo_id\": …, \"sha\": …}} entries "
        f"or an object of repo id → commit, not a {type(data).__name__}"
    )


def read_pins(lockfile: Path | str | None) -> LockPins:
    """Every pin of ``lockfile`` (default ``./kernels.lock``) with its hashes."""
    path = Path(lockfile) if lockfile is not None else Path.cwd() / LOCKFILE_NAME
    return LockPins(read_lock(path), str(path))


def lock_entry(repo_id: str, lockfile: Path | None) -> LockEntry:
    """The entry for ``repo_id`` in ``lockfile`` (default ``./kernels.lock``), checked."""
    return read_pins(lockfile).pick(repo_id)


def pick_entry(repo_id: str, entries: dict[str, LockEntry], path: Path | str) -> LockEntry:
    """The entry for ``repo_id`` among a lock file's ``entries``, checked."""
    if repo_id not in entries:
        raise LockFileError(
            f"lock file {path} has no entry for {repo_id}; it pins: "
            f"{', '.join(sorted(map(shown_name, entries))) or 'nothing'}. Run `kernelhub lock` "
            "(it pins the project's kernel dependencies and every kernel they depend on), "
            "adding it to the project's kernel dependencies if it is one."
        )
    entry = entries[repo_id]
    if not is_commit_id(entry.sha):
        raise LockFileError(
            f"lock file {path} pins {repo_id} to {entry.sha!r}, which is not a full commit "
            "id (40 or 64 hex); a lock must name a commit (a branch or tag moves)"
        )
    return entry


def distribution_lock(module_name: str) -> LockPins | None:
    """The ``kernels.lock`` in the package metadata of the installed distribution that
    provides ``module_name``'s top-level package, parsed, with where it was found; None
    where there is none. The ecosystem's build hook copies a project's lock file there,
    so a library installed as a wheel carries its pins with it."""
    package = module_name.partition(".")[0]
    for name in importlib_metadata.packages_distributions().get(package, []):
        dist = importlib_metadata.distribution(name)
        text = dist.read_text(LOCKFILE_NAME)
        if text is not None:
            where = f"{LOCKFILE_NAME} of the installed distribution {name}"
            entries = parse_lock(text.encode("utf-8"), where)
            hashes = dist.read_text(HASHES_NAME)
            if hashes is not None:
                beside = f"{HASHES_NAME} of the installed distribution {name}"
                entries = with_hashes(entries, parse_lock(hashes.encode("utf-8"), beside),
                                      where, beside)
            return LockPins(entries, where)
    return None


LOCK_FORMATS = ("kernels", "kernelhub")
"""``kernels``: ``kernels.lock`` in the shape kernels 0.17+ reads, hashes in
``kernelhub.lock`` beside it (the default); ``kernelhub``: one hashed ``kernels.lock``."""


def write_lock(path: Path, entries: Sequence[LockEntry], *,
               versions: dict[str, int | str] | None = None,
               dependencies: Sequence[KernelDependency] = (), fmt: str = "kernels") -> list[Path]:
    """Write ``entries`` to ``path`` in format ``fmt`` (:data:`LOCK_FORMATS`; ``versions``:
    what the project asked for, by repository; ``dependencies``: the ``kernel-depends``
    entries the locked kernels declare, each pinned to its repository's entry under the
    dependency as declared, which is how the ecosystem's locked loads look it up) and
    return the files written. Each file is replaced atomically; the hashes go first, so a
    reader between the two sees hashes for the new pins next to the old pins, which it
    refuses as stale, never a pin unhashed."""
    path = Path(path)
    if fmt not in LOCK_FORMATS:
        raise LockFileError(f"unknown lock format {fmt!r}; use one of {', '.join(LOCK_FORMATS)}")
    hashed = [e.to_json() for e in entries]
    beside = path.with_name(HASHES_NAME)
    if fmt == "kernelhub":
        _replace(path, hashed)
        beside.unlink(missing_ok=True)  # hashes of an earlier lock: they would read as stale
        return [path]
    pins = _ecosystem_pins(entries, versions or {}, dependencies)
    _replace(beside, hashed)
    _replace(path, pins)
    return [path, beside]


def _ecosystem_pins(entries: Sequence[LockEntry], wanted: dict[str, int | str],
                    dependencies: Sequence[KernelDependency]) -> list[dict[str, object]]:
    """The ``KernelLocks`` list: a pin per project dependency (and per entry no declared
    dependency names), then one per distinct declared dependency — their parser refuses
    a dependency listed twice."""
    by_repo = {e.repo_id: e for e in entries}
    declared = {d.repo_id for d in dependencies}
    pins = [e.to_ecosystem_json(wanted.get(e.repo_id)) for e in entries
            if e.repo_id in wanted or e.repo_id not in declared]
    for dep in dependencies:
        if (entry := by_repo.get(dep.repo_id)) is None:
            raise LockFileError(f"cannot pin the dependency {dep}: no entry locks "
                                f"{shown_name(dep.repo_id)}; lock it with the kernels that "
                                "declare it (kernelhub.lock_tree.lock_tree)")
        pin: dict[str, object] = {"dependency": dep.to_json(), "lock": {"commit": entry.sha}}
        if pin not in pins:
            pins.append(pin)
    return pins


def _replace(path: Path, data: list[dict[str, object]]) -> None:
    """Write ``path`` atomically through a temporary file of this writer's own: with one
    shared name, two ``kernelhub lock`` runs at once moved each other's file away."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}-{threading.get_ident()}.tmp")
    try:  # written as any file the user makes (mkstemp's would be private, 0600)
        tmp.write_text(json.dumps(data, indent=2) + "\n")
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


# -- the project's dependencies ----------------------------------------------------


def project_dependencies(project_dir: Path) -> dict[str, int | str]:
    """Kernel dependencies of a project's ``pyproject.toml``: repo id → version.

    Read from the ecosystem's ``[tool.kernels.dependencies]`` (int majors) and
    kernelhub's ``[tool.kernelhub.dependencies]`` (any version in the one grammar);
    a repository in both must agree.
    """
    from . import tomlfile
    path = user_files.user_path(project_dir, "the project directory") / "pyproject.toml"
    try:
        data = tomlfile.parse_toml(user_files.read_bounded(path))
    except FileNotFoundError:
        raise LockFileError(f"{path} does not exist; a project declares its kernels there "
                            "under [tool.kernels.dependencies]") from None
    except OSError as e:
        raise LockFileError(f"{path} is not readable: {e.strerror or e}") from None
    except tomlfile.TomlError as e:
        raise LockFileError(f"{path}: {e}") from None
    tool = data.get("tool", {})
    found: dict[str, int | str] = {}
    for table in ("kernels", "kernelhub"):
        kernels = tool.get(table, {}) if isinstance(tool, dict) else None
        deps = kernels.get("dependencies", {}) if isinstance(kernels, dict) else None
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
