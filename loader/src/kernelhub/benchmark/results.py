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

:func:`parse_document` reads a published document back (``kernelhub serve`` draws its
plots from it), and also the ecosystem's bare payload (what ``kernels benchmark
--output`` writes), since a repository may carry those.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from typing import Any

from ..errors import KernelHubError
from ..value_types import Record, field

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

    @classmethod
    def from_json(cls, raw: object, where: str) -> Timing:
        """``timingResults`` as either side writes it; the quartiles and outlier count
        default to 0, as in the ecosystem's ``TimingResults``."""
        if not isinstance(raw, dict):
            raise BenchmarkDocumentError(f"{where}: timings must be an object")
        values: dict[str, Any] = {}
        for key in cls._fields:
            value = raw.get(key, 0 if key in _OPTIONAL_TIMINGS else None)
            if key in ("outliers", "iterations"):
                if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                    raise BenchmarkDocumentError(f"{where}: {key} must be a count, not {value!r:.40}")
            elif (isinstance(value, bool) or not isinstance(value, int | float)
                  or not math.isfinite(value) or value < 0):
                raise BenchmarkDocumentError(f"{where}: {key} must be a time in ms, not "
                                             f"{value!r:.40}")
            values[key] = value
        return cls(**values)


_OPTIONAL_TIMINGS = frozenset({"q1_ms", "q3_ms", "iqr_ms", "outliers"})


class BenchmarkDocumentError(KernelHubError, ValueError):
    """A benchmark document is not in either shape (kernelhub's or the ecosystem's)."""


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


_KERNEL_KEYS = ("repoId", "path", "revision", "commit", "variant", "kernelCommitSha")


def parse_document(data: bytes, where: str) -> BenchmarkRun:
    """A published benchmark document: kernelhub's (:meth:`BenchmarkRun.to_json`) or the
    ecosystem's payload (``BenchmarkResult.to_payload``: no reference timings, the kernel
    named only by ``kernelCommitSha``). The bytes come from a hub: every value is checked,
    and anything else is a :class:`BenchmarkDocumentError` naming ``where``."""
    try:
        doc = json.loads(data)
    except (ValueError, RecursionError):
        raise BenchmarkDocumentError(f"{where} is not JSON") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("results"), list):
        raise BenchmarkDocumentError(f"{where} is not a benchmark document (no results list)")
    if doc.get("schema", SCHEMA) != SCHEMA:
        raise BenchmarkDocumentError(f"{where} has schema {doc['schema']!r:.40}; this "
                                     f"kernelhub reads {SCHEMA}")
    machine = doc.get("machineInfo")
    if not isinstance(machine, dict) or not all(
            isinstance(v, str | int | float | None) for v in machine.values()):
        raise BenchmarkDocumentError(f"{where}: machineInfo must be an object of values")
    results = []
    for i, raw in enumerate(doc["results"]):
        at = f"{where}: results[{i}]"
        if not isinstance(raw, dict) or not isinstance(raw.get("workload"), str):
            raise BenchmarkDocumentError(f"{at} must be an object with a workload name")
        verified, mismatch = raw.get("verified"), raw.get("mismatch")
        if verified is not None and not isinstance(verified, bool):
            raise BenchmarkDocumentError(f"{at}: verified must be true or false")
        reference = raw.get("refTimingResults")
        results.append(WorkloadResult(
            raw["workload"], Timing.from_json(raw.get("timingResults"), at),
            None if reference is None else Timing.from_json(reference, f"{at} reference"),
            verified, mismatch if isinstance(mismatch, str) else None))
    if not results:
        raise BenchmarkDocumentError(f"{where} holds no results")
    kernel = {k: doc[k] for k in _KERNEL_KEYS if isinstance(doc.get(k), str)}
    scripts = doc.get("benchmarkScripts")
    return BenchmarkRun(
        tuple(results), dict(machine), kernel, str(doc.get("benchmarkScriptSha") or ""),
        tuple(s for s in scripts if isinstance(s, str)) if isinstance(scripts, list) else ())


_NO_GPU = ("N/A", "None")
"""What ``machineInfo.gpu`` says on a machine without one (both runners write "N/A")."""


def machine_summary(machine: dict[str, Any]) -> str:
    """``NVIDIA H100 · cuda · torch 2.13.0``, or the CPU where there is no GPU: the line a
    plot or a page names a run's machine with."""
    gpu = machine.get("gpu")
    device = gpu if gpu and gpu not in _NO_GPU else machine.get("cpu") or "unknown"
    parts = [str(device), str(machine.get("backend") or ""),
             f"torch {machine.get('pytorchVersion') or '?'}"]
    return " · ".join(p for p in parts if p)


def machine_slug(machine: dict[str, Any]) -> str:
    """``cpu-intel-xeon-platinum-8481c-1a2b3c4d``: readable, and unique per machine info."""
    digest = hashlib.sha256(json.dumps(machine, sort_keys=True).encode()).hexdigest()[:8]
    gpu = machine.get("gpu")
    device = gpu if gpu and gpu not in _NO_GPU else machine.get("cpu", "")
    label = f"{machine.get('backend', '')}-{device}"
    words = re.sub(r"[^a-z0-9]+", "-", label.lower()).strip("-")[:48].strip("-")
    return f"{words or 'machine'}-{digest}"


def result_dir(commit: str, variant: str) -> str:
    """Where a build's results live on :data:`RESULTS_BRANCH`."""
    return f"{RESULTS_DIR}/{commit}/{variant}"
