"""Published benchmark results, as the pages read them.

Two places hold them, and both are read:

* where ``kernelhub benchmark --publish`` commits them (the loader's format,
  :mod:`kernelhub.benchmark.results`): the repository's ``benchmarks`` branch,
  ``results/<kernel commit>/<variant>/<machine>.json`` with the publisher's PNG beside it;
  a page at a kernel commit shows the runs of that commit;
* ``benchmarks/results/*.json`` in the kernel commit itself: the ecosystem's payload
  (``BenchmarkResult.to_payload``, what ``kernels benchmark --output`` writes) committed
  by hand — the ecosystem's own ``kernels benchmark --upload`` posts it to the public
  Hub's ``/api/kernels/<id>/benchmarks`` instead (a fixed huggingface.co address, never a
  file in the repository), so this is the only way a repository carries one.

Every document is parsed by the loader's one reader (:func:`parse_document`), which
accepts both shapes; a file it refuses is listed with why, never guessed at. A run is
named by the commit and path that hold it, so its plot URL names immutable bytes.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from kernelhub.benchmark.results import (
    RESULTS_BRANCH,
    RESULTS_DIR,
    BenchmarkDocumentError,
    BenchmarkRun,
    machine_summary,
    parse_document,
)
from kernelhub.hub.git import GitRepo
from kernelhub.value_types import replace

from .errors import ApiError
from .repos import Entry, RepoStore

ECOSYSTEM_DIR = "benchmarks/results"
"""Where a kernel commit may carry the ecosystem's payloads."""
MAX_DOCUMENT = 1 << 20
"""A document larger than this (1 MiB; a real one is a few KiB) is listed, not read."""


@dataclass(frozen=True)
class PublishedRun:
    commit: str
    """The commit holding the document: the results branch's head, or the kernel commit."""
    path: str
    variant: str | None
    """The variant benchmarked (from the path or the document); None: not recorded."""
    run: BenchmarkRun | None = None
    problem: str | None = None
    plot: str | None = None
    """The publisher's PNG beside the document, if there is one."""

    @property
    def machine(self) -> str:
        return machine_summary(self.run.machine) if self.run is not None else "unknown"

    @property
    def failed(self) -> list[str]:
        """Workloads whose output did not match the reference."""
        return [r.workload for r in self.run.results if r.verified is False] if self.run else []


@dataclass(frozen=True)
class Benchmarks:
    runs: list[PublishedRun]
    others: list[str]
    """The other kernel commits the results branch holds runs for, by commit id."""


def read_benchmarks(store: RepoStore, repo: GitRepo, commit: str) -> Benchmarks:
    """The runs published for kernel commit ``commit``, in both places."""
    found: list[tuple[str, Entry]] = []
    others: list[str] = []
    head = repo.resolve_commit(f"refs/heads/{RESULTS_BRANCH}")
    pngs: set[str] = set()
    if head is not None:
        mine = f"{RESULTS_DIR}/{commit}/"
        for e in store.entries(repo, head, f"{RESULTS_DIR}/", recursive=True):
            if e.path.startswith(mine) and e.kind == "file":
                if e.path.endswith(".json"):
                    found.append((head, e))
                elif e.path.endswith(".png"):
                    pngs.add(e.path)
            elif e.kind == "directory" and e.path.count("/") == 1 and e.path != mine[:-1]:
                others.append(e.path.split("/")[1])
    found += [(commit, e) for e in store.entries(repo, commit, f"{ECOSYSTEM_DIR}/", recursive=True)
              if e.kind == "file" and e.path.endswith(".json")]
    runs = list(_parse_all(repo, found, pngs))
    return Benchmarks(runs, sorted(others))


def read_run(store: RepoStore, repo: GitRepo, repo_id: str, commit: str, path: str
             ) -> BenchmarkRun:
    """The run in the document at ``commit:path``, for its plot; 404 when there is none."""
    where = f"{repo_id}@{commit[:12]}:{path}"
    if not (path.startswith(f"{RESULTS_DIR}/") or path.startswith(f"{ECOSYSTEM_DIR}/")) \
            or not path.endswith(".json"):
        raise ApiError(404, f"{where} is not a published benchmark result")
    entry = store.file(repo, repo_id, commit, path)
    (published,) = _parse_all(repo, [(commit, entry)], set())
    run = published.run
    if run is None:
        raise ApiError(404, f"{where}: {published.problem}")
    if "repoId" in run.kernel or "path" in run.kernel:
        return run
    # The ecosystem's payload names no repository; the plot's title should.
    return replace(run, kernel={**run.kernel, "repoId": repo_id})


def _parse_all(repo: GitRepo, found: list[tuple[str, Entry]], pngs: set[str]
               ) -> Iterator[PublishedRun]:
    small = [(c, e) for c, e in found if e.size <= MAX_DOCUMENT]
    blobs = dict(zip([e.oid for _, e in small], repo.read_blobs([e.oid for _, e in small]),
                     strict=True))
    for commit, entry in found:
        parts = entry.path.split("/")
        variant = parts[2] if parts[0] == RESULTS_DIR and len(parts) == 4 else None
        png = entry.path[:-len(".json")] + ".png"
        plot = png if png in pngs else None
        if entry.oid not in blobs:
            yield PublishedRun(commit, entry.path, variant, problem=f"larger than "
                               f"{MAX_DOCUMENT >> 20} MiB, not read", plot=plot)
            continue
        try:
            run = parse_document(blobs[entry.oid], entry.path)
        except BenchmarkDocumentError as exc:
            yield PublishedRun(commit, entry.path, variant, problem=str(exc), plot=plot)
            continue
        yield PublishedRun(commit, entry.path, variant or run.kernel.get("variant"), run,
                           plot=plot)
