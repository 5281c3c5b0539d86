"""Autotuning decisions: in this process, and on disk as one JSON record per key.

``<cache>/autotune/<2 hex>/<sha256 of the key>.json`` holds ``{"key": {…}, "decision":
{…}, "models": […]}``: the key's fields in clear (what the CLI reports), a
:class:`~kernelhub.layer.autotune.decision.Decision`, and the names of the models whose
calls used it. Records are written atomically (temp file + rename) and changed under a
file lock. Unknown or missing decision fields fall back to their defaults, so records
written by an older kernelhub still read (and, lacking a measurement quality, count as
provisional).
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from ... import settings
from ...lazy_names import deferred
from ...value_types import Record, asdict, fields
from .decision import Decision

if TYPE_CHECKING:
    import filelock
else:  # taken only to change a record; reading decisions takes no lock
    filelock = deferred("filelock")

Key = dict[str, str | int]
"""What a decision depends on (device, torch, threads, kernel build, reference, bucket …)."""

_in_process: dict[str, Decision] = {}
"""Disk key → decision, for this process (the disk is read once per key)."""


class StoredDecision(Record, frozen=True):
    """One stored decision: its key's fields, the decision, the models that used it."""

    digest: str
    key: Key
    decision: Decision
    models: tuple[str, ...] = ()


def remembered(digest: str) -> Decision | None:
    """This process's decision for ``digest``, if it has one."""
    return _in_process.get(digest)


def remember(digest: str, decision: Decision) -> None:
    _in_process[digest] = decision


def forget_in_process(digests: set[str] | None = None) -> None:
    """Drop this process's copies of ``digests`` (None: all); the disk is not touched."""
    if digests is None:
        _in_process.clear()
    for digest in digests or ():
        _in_process.pop(digest, None)


def autotune_dir() -> Path:
    return settings.cache_dir() / "autotune"


def record_path(digest: str) -> Path:
    return autotune_dir() / digest[:2] / f"{digest}.json"


def _parse(path: Path) -> StoredDecision | None:
    """The record at ``path``; None when absent or damaged (decide again)."""
    try:
        data = json.loads(path.read_text())
        stored, key, models = data["decision"], data["key"], data.get("models", [])
        decision = Decision(**{name: stored[name] for name in fields(Decision) if name in stored})
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    if not isinstance(key, dict) or not isinstance(models, list):
        return None
    return StoredDecision(path.stem, key, decision,
                          tuple(m for m in models if isinstance(m, str)))


def read_record(digest: str) -> StoredDecision | None:
    return _parse(record_path(digest))


def write_record(record: StoredDecision) -> None:
    """Atomically (temp file + rename): concurrent processes never see half a record."""
    path = record_path(record.digest)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        with os.fdopen(fd, "w") as f:
            json.dump({"key": record.key, "decision": asdict(record.decision),
                       "models": list(record.models)}, f, indent=1)
        os.replace(tmp, path)
    except OSError:
        pass  # a read-only cache only costs the next process a re-measurement


def update_record(current: StoredDecision,
                  change: Callable[[StoredDecision], StoredDecision | None]) -> StoredDecision:
    """Apply ``change`` to the stored record (``current`` where none is stored) under a
    lock, so processes updating one record at once each add their part; ``change``
    returns None to keep it. A cache that cannot be locked or written changes only this
    process's copy."""
    path = record_path(current.digest)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with filelock.FileLock(f"{path}.lock", timeout=10):
            stored = _parse(path) or current
            changed = change(stored)
            if changed is None:
                return stored
            write_record(changed)
            return changed
    except (OSError, filelock.Timeout):
        return change(current) or current


def remove_records(digests: set[str] | None = None, name: str | None = None,
                   model: str | None = None) -> list[str]:
    """Delete the records of ``digests`` (None: any) whose call site is ``name`` and
    that ``model`` used (None: any); returns the digests removed."""
    removed = []
    for path in autotune_dir().glob("*/*.json"):
        if not _is_record(path):  # only files this module names: the cache may be shared
            continue
        if digests is not None and path.stem not in digests:
            continue
        if name is not None or model is not None:
            record = _parse(path)
            if record is None or not _matches(record, name, model):
                continue
        try:
            path.unlink()
        except FileNotFoundError:
            continue  # another process removed it first
        removed.append(path.stem)
    return removed


def _is_record(path: Path) -> bool:
    """Whether ``path`` is named as :func:`record_path` names a record."""
    digest = path.stem
    return (len(digest) == 64 and set(digest) <= set("0123456789abcdef")
            and path.parent.name == digest[:2])


def _matches(record: StoredDecision, name: str | None, model: str | None) -> bool:
    return ((name is None or record.key.get("name") == name)
            and (model is None or model in record.models))


def stored_records(name: str | None = None, model: str | None = None,
                   root: Path | None = None) -> list[StoredDecision]:
    """The records on disk (only call site ``name`` / used by ``model`` where given),
    oldest first."""
    paths = []
    for path in (root or autotune_dir()).glob("*/*.json"):
        try:
            paths.append((path.stat().st_mtime, path))
        except OSError:
            continue  # removed meanwhile
    records = []
    for _, path in sorted(paths):
        record = _parse(path)
        if record is not None and _matches(record, name, model):
            records.append(record)
    return records
