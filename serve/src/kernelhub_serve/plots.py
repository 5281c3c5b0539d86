"""Benchmark plots for the pages: SVG drawn on the server from the published document,
by the same drawing as ``kernelhub benchmark``'s PNG (:func:`render_plot`), so no script
runs in the page and a plot never depends on an image someone uploaded.
"""

from __future__ import annotations

from collections.abc import Callable

from kernelhub.benchmark.plots import render_plot
from kernelhub.benchmark.results import BenchmarkRun

_memo: dict[tuple[str, str, str], bytes] = {}


def plot_svg(repo_id: str, commit: str, path: str, read: Callable[[], BenchmarkRun]) -> bytes:
    """The chart of the run ``read`` returns; memoised per (repository, commit, path): a
    commit never changes."""
    key = (repo_id, commit, path)
    if key not in _memo:
        if len(_memo) > 256:
            _memo.clear()
        _memo[key] = render_plot(read(), "svg")
    return _memo[key]
