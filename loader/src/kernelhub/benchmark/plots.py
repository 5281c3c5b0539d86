"""The plot of a benchmark run, drawn with matplotlib (the ``benchmark`` extra): the PNG
``kernelhub benchmark`` writes and publishes, and the SVG ``kernelhub serve`` draws on
its pages from a published document — one drawing, so both show the same thing.

One horizontal bar pair per workload — the kernel's mean time next to the reference's,
with the min-max range as an error bar — and the speedup written beside it; the title
names the kernel and variant, the footer the machine. A workload whose output did not
match the reference is drawn in red and marked, so a fast wrong kernel cannot pass for a
fast one. Drawn on a bare ``Figure`` with the Agg canvas (no display, no pyplot state),
one plot at a time: matplotlib's text layout is not thread-safe (its mathtext parser, which
lays out the log axis's tick labels, fails when two threads use it at once), and a server
draws from a thread pool.
"""

from __future__ import annotations

import io
import math
import re
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import KernelHubError
from ..lazy_names import deferred
from .results import BenchmarkRun, WorkloadResult, machine_summary

if TYPE_CHECKING:
    import matplotlib
    from matplotlib import figure as mpl_figure
    from matplotlib.backends import backend_agg
else:  # the optional ``benchmark`` extra, imported by the first plot
    matplotlib = deferred("matplotlib")
    mpl_figure = deferred("matplotlib.figure")
    backend_agg = deferred("matplotlib.backends.backend_agg")

_drawing = threading.Lock()
LEGEND_ROW_POINTS = 20.0
"""How far the title sits above the axes: room for the one-line legend (8 pt text)."""


def save_plot(run: BenchmarkRun, path: Path) -> Path:
    """Write the run's PNG plot to ``path``."""
    data = render_plot(run, "png")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def render_plot(run: BenchmarkRun, fmt: str = "png") -> bytes:
    """The run's plot as ``png`` or ``svg`` bytes (SVG text stays text: small and sharp
    on a phone)."""
    try:
        rc_context = matplotlib.rc_context
    except ImportError:
        raise KernelHubError("plots need matplotlib: pip install 'kernelhub[benchmark]', or "
                             "pass --no-plots") from None
    with _drawing, rc_context({"svg.fonttype": "none"}):
        out = io.BytesIO()
        draw_figure(run).savefig(out, format=fmt)
        return out.getvalue()


def draw_figure(run: BenchmarkRun) -> mpl_figure.Figure:
    """The run's figure, laid out (callers hold the drawing lock: see the module doc)."""
    results = sorted(run.results, key=lambda r: _natural(r.workload))
    fig = mpl_figure.Figure(figsize=(9, 1.2 + 0.55 * len(results)), dpi=110)
    backend_agg.FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    rows = range(len(results))
    kernel = [r.timing.mean_ms for r in results]
    spans = [[max(r.timing.mean_ms - r.timing.min_ms, 0.0) for r in results],
             [max(r.timing.max_ms - r.timing.mean_ms, 0.0) for r in results]]
    colours = ["#c0392b" if r.verified is False else "#2e86c1" for r in results]
    ax.barh([i + 0.2 for i in rows], kernel, height=0.38, color=colours, xerr=spans,
            error_kw={"elinewidth": 0.8, "alpha": 0.6}, label="kernel")
    refs = [(i, r.reference) for i, r in enumerate(results) if r.reference is not None]
    if refs:
        ax.barh([i - 0.2 for i, _ in refs], [t.mean_ms for _, t in refs], height=0.38,
                color="#aab7b8", label="reference (verify_*)")
    for i, r in enumerate(results):
        note = "output does not match" if r.verified is False else (
            f"{r.speedup:.2f}x" if r.speedup is not None else "")
        ax.text(_right(r) * 1.08, i, note, va="center", fontsize=8)
    ax.set_yticks(list(rows), [r.workload for r in results], fontsize=8)
    ax.invert_yaxis()
    times = [t for r in results for t in (r.timing.min_ms, r.timing.mean_ms) if t > 0]
    if times:  # workloads differ by orders of magnitude; a zero cannot go on a log axis
        ax.set_xscale("log")
        ax.set_xlim(min(times) / 2, max(_right(r) for r in results) * 4)
    ax.set_xlabel("mean time per call (ms, log scale, lower is better)"
                  + ("; speedup = reference / kernel" if refs else ""))
    info = run.kernel
    where = info.get("repoId") or info.get("path") or (
        f"kernel {info['kernelCommitSha'][:12]}" if info.get("kernelCommitSha") else "")
    # The title sits one legend-row above the axes; the legend fills that row. A long
    # title (repository and variant) then passes over the legend instead of through it.
    ax.set_title(" — ".join(p for p in (where, info.get("variant", "")) if p), fontsize=10,
                 loc="left", pad=LEGEND_ROW_POINTS)
    machine = run.machine
    footer = (f"{machine['cpuFeatures']} | {machine.get('system', '')}"
              if machine.get("cpuFeatures") else machine_summary(machine))
    fig.text(0.01, 0.005, footer, fontsize=6, color="#555555")
    ax.legend(fontsize=8, loc="lower right", bbox_to_anchor=(1, 1), ncol=2, frameon=False,
              borderaxespad=0.2)  # in the row between the bars and the title
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    return fig


def _natural(name: str) -> list[str | int]:
    """``tokens_32`` before ``tokens_512``: digit runs compare as numbers."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


def _right(result: WorkloadResult) -> float:
    """Where a workload's bars end: its slowest call or its reference, whichever is later."""
    return max(result.timing.max_ms, result.timing.mean_ms,
               result.reference.mean_ms if result.reference else 0.0)


def render_comparison(points: Mapping[str, Mapping[str, Mapping[str, float]]],
                      versions: Sequence[str], title: str, fmt: str = "svg") -> bytes:
    """A kernel's workloads across versions: one panel per workload, the versions along
    x (in the order given, oldest first), the mean time per call up y, one line per
    machine (``points[machine][workload][version]``, in ms) in one colour on every panel.
    A version a machine has no run for leaves a gap in its line, never a guess."""
    try:
        rc_context = matplotlib.rc_context
    except ImportError:
        raise KernelHubError("plots need matplotlib: pip install 'kernelhub[benchmark]'"
                             ) from None
    workloads = sorted({w for per in points.values() for w in per}, key=_natural)
    if not workloads or not versions:
        raise KernelHubError(f"{title}: no benchmark results to compare")
    with _drawing, rc_context({"svg.fonttype": "none"}):
        cols = min(3, len(workloads))
        rows = -(-len(workloads) // cols)
        fig = mpl_figure.Figure(figsize=(3.6 * cols + 0.6, 2.6 * rows + 1.4), dpi=110)
        backend_agg.FigureCanvasAgg(fig)
        axes = fig.subplots(rows, cols, squeeze=False)
        xs = range(len(versions))
        for i, workload in enumerate(workloads):
            ax = axes[i // cols][i % cols]
            for machine, per in sorted(points.items()):
                ys = [per.get(workload, {}).get(v, math.nan) for v in versions]
                ax.plot(xs, ys, marker="o", label=machine)
            ax.set_title(workload, fontsize=9)
            ax.set_xticks(list(xs), list(versions), fontsize=7, rotation=30)
            ax.tick_params(axis="y", labelsize=7)
            ax.set_ylabel("ms per call", fontsize=7)
            ax.set_ylim(bottom=0)
            ax.margins(x=0.12)
        for j in range(len(workloads), rows * cols):
            axes[j // cols][j % cols].set_visible(False)
        handles, labels = axes[0][0].get_legend_handles_labels()
        fig.suptitle(f"{title}: mean time per call by release (lower is better)",
                     fontsize=10, x=0.01, ha="left")
        fig.legend(handles, labels, loc="lower left", fontsize=7, frameon=False,
                   ncol=max(1, min(3, len(labels))), bbox_to_anchor=(0.01, 0.0))
        legend_rows = -(-len(labels) // max(1, min(3, len(labels))))
        fig.tight_layout(rect=(0, 0.04 + 0.035 * legend_rows, 1, 0.95))
        out = io.BytesIO()
        fig.savefig(out, format=fmt)
        return out.getvalue()
