"""Benchmark plots, drawn on the server with matplotlib as SVG (no script in the page).

One horizontal bar chart per run: mean time per workload with its standard deviation,
and the reference implementation's mean beside it where the run measured one. SVG text
stays text (``svg.fonttype = none``), so the plot is small and sharp on a phone.
"""

from __future__ import annotations

import io
import re

from .bench_results import BenchmarkRun

_memo: dict[tuple[str, str, str], bytes] = {}


def plot_svg(repo_id: str, commit: str, run: BenchmarkRun) -> bytes:
    """The run's chart; memoised per (repository, commit, file): a commit never changes."""
    key = (repo_id, commit, run.path)
    if key not in _memo:
        if len(_memo) > 256:
            _memo.clear()
        _memo[key] = _draw(run)
    return _memo[key]


def _natural(name: str) -> list[object]:
    """``tokens_32`` before ``tokens_512``: digit runs compare as numbers."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


def _draw(run: BenchmarkRun) -> bytes:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    timings = sorted(run.timings, key=lambda t: _natural(t.workload))
    height = 1.2 + 0.45 * max(len(timings), 1)
    fig = Figure(figsize=(7.5, height))
    ax = fig.add_subplot()
    names = [t.workload for t in timings]
    ys = list(range(len(timings)))
    ours = [t.mean_ms for t in timings]
    has_ref = any(t.ref_mean_ms is not None for t in timings)
    width = 0.38 if has_ref else 0.7
    ax.barh([y - (width / 2 if has_ref else 0) for y in ys], ours, height=width,
            xerr=[t.std_ms for t in timings], color="#3b6ea8", label="kernel")
    if has_ref:
        ax.barh([y + width / 2 for y in ys], [t.ref_mean_ms or 0 for t in timings],
                height=width, color="#c8c8c8", label="reference")
        ax.legend(loc="lower right", frameon=False)
    ax.set_yticks(ys, names)
    ax.invert_yaxis()
    ax.set_xlabel("mean time (ms), lower is better")
    ax.set_title(run.machine, fontsize=10)
    for spine in ("top", "right"):
        ax.spines[spine].set_visible(False)
    fig.tight_layout()
    out = io.BytesIO()
    with matplotlib.rc_context({"svg.fonttype": "none"}):
        fig.savefig(out, format="svg")
    return out.getvalue()
