"""Download counts per variant, shared by every serve process of a hub.

A download is a GET of a variant's ``build/<variant>/metadata.json`` from its first byte:
every loader (kernelhub's, the ecosystem's ``kernels``, ``snapshot_download`` of a
variant) fetches that file once per cold load of the variant, and a warm load fetches
nothing, so one count is one machine loading the variant cold. HEADs, revalidations
(304) and resumed ranges are not downloads. Files nginx answers from its cache never
reach serve and are not counted (nginx's access log has them).

Counting must be cheap and safe with several processes over one hub directory: each
download appends one line (the variant's name) to ``<org>/<name>.log`` under
``.kernelhub-serve/downloads/``, holding that repository's file lock only for the
append. Reading the counts adds the log to the totals file (``<org>/<name>.json``); once
the log is long, the reader folds it into the totals (written whole, then renamed into
place) and empties it, under the same lock, so no count is lost or counted twice.
"""

from __future__ import annotations

import json
import logging
import os
import re
import tempfile
from collections import Counter
from pathlib import Path

from filelock import FileLock
from kernelhub.formats.metadata import METADATA_FILE

log = logging.getLogger(__name__)

DIR = ".kernelhub-serve/downloads"
FOLD_AT = 64 * 1024
"""Fold the log into the totals once it is this many bytes (a few thousand downloads)."""
_COUNTED = re.compile(r"build/([A-Za-z0-9][A-Za-z0-9._+-]{0,254})/" + re.escape(METADATA_FILE))


def counted_variant(path: str) -> str | None:
    """The variant a file download counts for, or None when it is not a counted file."""
    match = _COUNTED.fullmatch(path)
    return match.group(1) if match else None


class DownloadCounts:
    def __init__(self, hub_root: Path, fold_at: int = FOLD_AT) -> None:
        self.root = hub_root / DIR
        self.fold_at = fold_at

    def record(self, repo_id: str, path: str) -> None:
        """Count a download of ``path`` if it is a variant's counted file. Never fails the
        download: a count that cannot be written is logged and dropped."""
        variant = counted_variant(path)
        if variant is None:
            return
        base = self._base(repo_id)
        try:
            base.parent.mkdir(parents=True, exist_ok=True)
            with self._lock(base), open(base.with_suffix(".log"), "a", encoding="utf-8") as out:
                out.write(variant + "\n")
        except OSError as exc:
            log.warning("cannot count a download of %s (%s): %s", repo_id, variant,
                        exc.strerror or exc)

    def counts(self, repo_id: str) -> dict[str, int]:
        """Downloads per variant, all time (a variant never downloaded is absent)."""
        base = self._base(repo_id)
        logfile = base.with_suffix(".log")
        if not logfile.exists() and not base.with_suffix(".json").exists():
            return {}
        try:
            with self._lock(base):
                totals = self._totals(base)
                try:
                    data = logfile.read_text(encoding="utf-8", errors="replace")
                except FileNotFoundError:
                    data = ""
                totals.update(v for v in data.split("\n") if counted_variant(f"build/{v}/"
                                                                              "metadata.json"))
                if len(data) >= self.fold_at:
                    self._write_totals(base, totals)
                    logfile.write_text("", encoding="utf-8")
        except OSError as exc:
            log.warning("cannot read the download counts of %s: %s", repo_id,
                        exc.strerror or exc)
            return {}
        return dict(totals)

    def total(self, repo_id: str) -> int:
        return sum(self.counts(repo_id).values())

    def _base(self, repo_id: str) -> Path:
        org, name = repo_id.split("/")
        return self.root / org / name  # both parts already checked by kernelhub_serve.names

    @staticmethod
    def _lock(base: Path) -> FileLock:
        return FileLock(str(base.with_suffix(".lock")), timeout=30)

    @staticmethod
    def _totals(base: Path) -> Counter[str]:
        try:
            raw = json.loads(base.with_suffix(".json").read_text(encoding="utf-8"))
        except FileNotFoundError:
            return Counter()
        except ValueError:
            log.warning("%s is not JSON; counting %s from zero", base.with_suffix(".json"),
                        base.name)
            return Counter()
        if not isinstance(raw, dict):
            return Counter()
        return Counter({k: v for k, v in raw.items() if isinstance(k, str)
                        and isinstance(v, int) and v >= 0})

    @staticmethod
    def _write_totals(base: Path, totals: Counter[str]) -> None:
        fd, tmp = tempfile.mkstemp(dir=base.parent, prefix=f".{base.name}.")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                json.dump(dict(sorted(totals.items())), out)
            os.replace(tmp, base.with_suffix(".json"))
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
