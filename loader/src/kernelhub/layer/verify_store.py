"""The verification decisions on disk: one JSON record per key, written atomically.

``<cache>/verify/<2 hex>/<sha256 of the key>.json`` holds ``{"key": {…}, "decision":
{…}}``: the key's fields in clear (what the CLI reports) and a :class:`Decision`.
Unknown or missing decision fields fall back to their defaults, so records written by
an older kernelhub still read (and, lacking a measurement quality, count as provisional).
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .. import settings
from ..records import Record, asdict, fields
from .verify_timing import MAX_MEASUREMENTS


class Decision(Record, frozen=True):
    """What one call site runs for one shape bucket, and why."""

    use_kernel: bool
    reason: str
    kernel_s: float | None = None
    pytorch_s: float | None = None
    max_error: float | None = None
    rounds: int = 0
    """Interleaved timing rounds behind ``kernel_s``/``pytorch_s``, over all measurements."""
    spread: float | None = None
    """The last measurement's spread (None: recorded before quality was kept)."""
    measurements: int = 1
    settled: bool = False
    """False for a timed decision still in doubt: later processes measure it again."""

    @property
    def chosen(self) -> str:
        return "kernel" if self.use_kernel else "pytorch"

    @property
    def needs_retiming(self) -> bool:
        return (self.kernel_s is not None and self.pytorch_s is not None and not self.settled
                and self.measurements < MAX_MEASUREMENTS)


def verify_dir() -> Path:
    return settings.cache_dir() / "verify"


def record_path(digest: str) -> Path:
    return verify_dir() / digest[:2] / f"{digest}.json"


def read_decision(path: Path) -> Decision | None:
    """The decision stored at ``path``; None when absent or damaged (decide again)."""
    try:
        stored = json.loads(path.read_text())["decision"]
        return Decision(**{name: stored[name] for name in fields(Decision) if name in stored})
    except (OSError, ValueError, KeyError, TypeError):
        return None


def write_decision(path: Path, key: dict[str, Any], decision: Decision) -> None:
    """Atomically (temp file + rename): concurrent processes never see half a record."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        with os.fdopen(fd, "w") as f:
            json.dump({"key": key, "decision": asdict(decision)}, f, indent=1)
        os.replace(tmp, path)
    except OSError:
        pass  # a read-only cache only costs the next process a re-measurement


def update_decision(path: Path, key: dict[str, Any], current: Decision,
                    change: Callable[[Decision], Decision | None]) -> Decision:
    """Apply ``change`` to the stored decision (``current`` where none is stored) under
    a lock, so processes updating one record at once each add their part; ``change``
    returns None to keep it. A cache that cannot be locked or written changes only this
    process's copy."""
    from filelock import FileLock, Timeout

    try:
        with FileLock(f"{path}.lock", timeout=10):
            stored = read_decision(path) or current
            changed = change(stored)
            if changed is None:
                return stored
            write_decision(path, key, changed)
            return changed
    except (OSError, Timeout):
        return change(current) or current


def remove_decisions(digests: set[str] | None = None, name: str | None = None) -> list[str]:
    """Delete the records of ``digests`` (None: any) whose call site is ``name`` (None:
    any); returns the digests removed."""
    removed = []
    for path in verify_dir().glob("*/*.json"):
        if digests is not None and path.stem not in digests:
            continue
        if name is not None and _stored_name(path) != name:
            continue
        try:
            path.unlink()
        except FileNotFoundError:
            continue  # another process removed it first
        removed.append(path.stem)
    return removed


def _stored_name(path: Path) -> str | None:
    try:
        name = json.loads(path.read_text())["key"]["name"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return name if isinstance(name, str) else None


def stored_decisions(root: Path | None = None) -> list[dict[str, Any]]:
    """Every decision on disk, as stored (``key`` fields and ``decision``), oldest first."""
    base = root or verify_dir()
    records = []
    for path in sorted(base.glob("*/*.json"), key=lambda p: p.stat().st_mtime):
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and "key" in data and "decision" in data:
            records.append(data)
    return records
