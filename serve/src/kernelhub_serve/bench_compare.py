"""Benchmark comparison across releases and machines: for each release (``v<semver>`` tag,
oldest first), the runs published for its commit (:mod:`.bench_results`, both places),
as mean time per workload per machine — drawn as one figure by the loader's
:func:`render_comparison`.

A machine is its device and backend (``machine_summary`` without the torch version, so a
machine stays one line while releases move torch); where one machine has several runs
of a release (several variants), the fastest counts, since that is the best a loader on
that machine can get from the release.
"""

from __future__ import annotations

from dataclasses import dataclass

from kernelhub.benchmark.plots import render_comparison
from kernelhub.benchmark.results import RESULTS_BRANCH, machine_summary
from kernelhub.hub.git import GitRepo

from .bench_results import read_benchmarks
from .hubview import list_refs
from .repos import RepoStore

Points = dict[str, dict[str, dict[str, float]]]
"""machine → workload → release → mean ms per call."""


@dataclass(frozen=True)
class Comparison:
    releases: tuple[str, ...]
    points: Points
    key: tuple[object, ...]
    """What the figure depends on: every release's commit and the results branch's head."""

    @property
    def empty(self) -> bool:
        return not self.points


def compare_releases(store: RepoStore, repo: GitRepo) -> Comparison:
    releases = [r for r in list_refs(store, repo) if r.kind == "release"][::-1]  # oldest first
    points: Points = {}
    shown: list[str] = []
    for release in releases:
        found = False
        for published in read_benchmarks(store, repo, release.commit).runs:
            if published.run is None:
                continue
            machine = machine_summary(published.run.machine).split(" · torch ")[0]
            for result in published.run.results:
                if result.verified is False:
                    continue  # a wrong answer has no speed worth comparing
                per = points.setdefault(machine, {}).setdefault(result.workload, {})
                mean = result.timing.mean_ms
                per[release.name] = min(mean, per.get(release.name, mean))
                found = True
        if found:
            shown.append(release.name)
    head = repo.resolve_commit(f"refs/heads/{RESULTS_BRANCH}")
    key = (tuple((r.name, r.commit) for r in releases), head)
    return Comparison(tuple(shown), points, key)


_memo: dict[tuple[str, tuple[object, ...]], bytes] = {}


def comparison_svg(repo_id: str, comparison: Comparison) -> bytes:
    """The figure, memoised per repository and state (releases, results branch)."""
    memo_key = (repo_id, comparison.key)
    if memo_key not in _memo:
        if len(_memo) > 64:
            _memo.clear()
        _memo[memo_key] = render_comparison(comparison.points, comparison.releases, repo_id)
    return _memo[memo_key]
