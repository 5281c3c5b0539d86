"""Published benchmark results, as the pages read them.

Where ``kernelhub benchmark --publish`` stores results is the loader's format (helper
formats-loader defines it); until it lands this reads :data:`RESULTS_DIR` — JSON files
in the shape the ecosystem's ``kernels benchmark`` submits (``BenchmarkResult.to_payload``:
``results`` with ``workload`` and ``timingResults``, ``machineInfo``, ``kernelCommitSha``)
— one file per machine and run. The path is this one constant; files that are not in
that shape are listed as unreadable, never guessed at.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from kernelhub.hub.git import GitRepo

from .repos import RepoStore

RESULTS_DIR = "benchmarks/results"


@dataclass(frozen=True)
class Timing:
    workload: str
    mean_ms: float
    std_ms: float
    verified: bool | None
    ref_mean_ms: float | None


@dataclass
class BenchmarkRun:
    path: str
    machine: str
    """``GPU / CPU · backend · torch``: what the run measured on."""
    timings: list[Timing] = field(default_factory=list)
    problem: str | None = None


def read_runs(store: RepoStore, repo: GitRepo, commit: str) -> list[BenchmarkRun]:
    files = [e for e in store.entries(repo, commit, f"{RESULTS_DIR}/", recursive=True)
             if e.kind == "file" and e.path.endswith(".json")]
    runs = []
    for entry, data in zip(files, repo.read_blobs([e.oid for e in files]), strict=True):
        runs.append(parse_run(entry.path, data))
    return runs


def parse_run(path: str, data: bytes) -> BenchmarkRun:
    try:
        payload = json.loads(data)
        machine = _machine(payload["machineInfo"])
        timings = [_timing(r) for r in payload["results"]]
    except (ValueError, KeyError, TypeError) as exc:
        return BenchmarkRun(path, "unknown", problem=f"not a benchmark result ({exc})")
    return BenchmarkRun(path, machine, timings)


def _machine(info: dict[str, Any]) -> str:
    device = info.get("gpu") or "no GPU"
    cpu = info.get("cpu")
    parts = [str(device) if device not in ("", "N/A", "None") else str(cpu),
             str(info.get("backend", "")), f"torch {info.get('pytorchVersion', '?')}"]
    return " · ".join(p for p in parts if p)


def _timing(result: dict[str, Any]) -> Timing:
    t = result["timingResults"]
    ref = t.get("ref_mean_ms", result.get("refMeanMs"))
    return Timing(str(result["workload"]), float(t["mean_ms"]), float(t.get("std_ms", 0.0)),
                  result.get("verified"), float(ref) if ref is not None else None)
