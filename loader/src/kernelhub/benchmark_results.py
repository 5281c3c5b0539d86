"""Benchmark results: the document ``kernelhub benchmark`` writes, and where a hub keeps it.

The document extends the ecosystem's benchmark payload (``results[].workload``,
``timingResults``, ``verified``; ``machineInfo``; ``kernelCommitSha``;
``benchmarkScriptPath``/``Sha``) with what a reader needs to compare runs: the reference's
timing per workload (``refTimingResults``), the kernel (``repoId``, ``revision``,
``commit``, ``variant``) and the machine in full (``machineInfo.cpuFeatures``,
``python``, ``system``).

Published results live in the kernel's own hub repository, on the branch
:data:`RESULTS_BRANCH` (so no version branch or release tag moves), one directory per
benchmarked build::

    results/<commit>/<variant>/<machine>.json   the document
    results/<commit>/<variant>/<machine>.png    its plot

``<commit>`` is the kernel commit that was loaded, ``<machine>`` a readable slug of the
backend and processor plus 8 hex of a hash over ``machineInfo`` (two machines never
share a file; the same machine overwrites its own older result for that build).
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from .records import Record, field

RESULTS_BRANCH = "benchmarks"
RESULTS_DIR = "results"
SCHEMA = "kernelhub-benchmark/1"


class Timing(Record, frozen=True):
    """Per-call wall time of one callable over ``iterations`` calls (milliseconds)."""

    mean_ms: float
    std_ms: float
    min_ms: float
    max_ms: float
    q1_ms: float
    q3_ms: float
    iqr_ms: float
    outliers: int
    iterations: int

    @classmethod
    def of(cls, times_ms: list[float]) -> Timing:
        ordered = sorted(times_ms)
        n = len(ordered)
        mean = sum(ordered) / n
        std = (sum((t - mean) ** 2 for t in ordered) / n) ** 0.5
        q1, q3 = _percentile(ordered, 25), _percentile(ordered, 75)
        iqr = q3 - q1
        outliers = sum(1 for t in ordered if t < q1 - 1.5 * iqr or t > q3 + 1.5 * iqr)
        return cls(round(mean, 4), round(std, 4), round(ordered[0], 4), round(ordered[-1], 4),
                   round(q1, 4), round(q3, 4), round(iqr, 4), outliers, n)

    def to_json(self) -> dict[str, Any]:
        return {key: getattr(self, key) for key in self._fields}


def _percentile(ordered: list[float], p: float) -> float:
    if len(ordered) == 1:
        return ordered[0]
    idx = (len(ordered) - 1) * p / 100.0
    lower = int(idx)
    upper = min(lower + 1, len(ordered) - 1)
    return ordered[lower] * (1 - (idx - lower)) + ordered[upper] * (idx - lower)


class WorkloadResult(Record, frozen=True):
    workload: str
    """``<Class>.<workload>``."""
    timing: Timing
    reference: Timing | None = None
    verified: bool | None = None
    """None: the class has no verify for this workload."""
    mismatch: str | None = None
    """Why verification failed (largest difference, shapes), when it did."""

    @property
    def speedup(self) -> float | None:
        if self.reference is None or self.timing.mean_ms <= 0:
            return None
        return self.reference.mean_ms / self.timing.mean_ms

    def to_json(self) -> dict[str, Any]:
        entry: dict[str, Any] = {"workload": self.workload, "timingResults": self.timing.to_json()}
        if self.verified is not None:
            entry["verified"] = self.verified
        if self.reference is not None:
            entry["refTimingResults"] = self.reference.to_json()
        if self.mismatch is not None:
            entry["mismatch"] = self.mismatch
        return entry


class BenchmarkRun(Record, frozen=True):
    """One run of a repository's benchmarks against one loaded variant."""

    results: tuple[WorkloadResult, ...]
    machine: dict[str, Any]
    kernel: dict[str, Any]
    """repoId (or path), revision, commit, variant, kernelCommitSha."""
    script_sha: str
    scripts: tuple[str, ...] = field(default_factory=tuple)

    @property
    def all_verified(self) -> bool:
        return all(r.verified is not False for r in self.results)

    def to_json(self) -> dict[str, Any]:
        return {"schema": SCHEMA, "results": [r.to_json() for r in self.results],
                "machineInfo": self.machine, **self.kernel,
                "benchmarkScriptPath": "benchmarks", "benchmarkScriptSha": self.script_sha,
                "benchmarkScripts": list(self.scripts)}

    def dumps(self) -> str:
        return json.dumps(self.to_json(), indent=2) + "\n"


def machine_slug(machine: dict[str, Any]) -> str:
    """``cpu-intel-xeon-platinum-8481c-1a2b3c4d``: readable, and unique per machine info."""
    digest = hashlib.sha256(json.dumps(machine, sort_keys=True).encode()).hexdigest()[:8]
    label = f"{machine.get('backend', '')}-{machine.get('gpu') or machine.get('cpu', '')}"
    words = re.sub(r"[^a-z0-9]+", "-", label.lower()).strip("-")[:48].strip("-")
    return f"{words or 'machine'}-{digest}"


def result_dir(commit: str, variant: str) -> str:
    """Where a build's results live on :data:`RESULTS_BRANCH`."""
    return f"{RESULTS_DIR}/{commit}/{variant}"
