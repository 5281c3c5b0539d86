"""The PNG plot of a benchmark run, drawn with matplotlib (the ``benchmark`` extra).

One horizontal bar pair per workload — the kernel's mean time next to the reference's,
with the min-max range as an error bar — and the speedup written beside it; the title
names the kernel and variant, the footer the machine. A workload whose output did not
match the reference is drawn in red and marked, so a fast wrong kernel cannot pass for a
fast one. Server-side rendering (Agg): no display is needed.
"""

from __future__ import annotations

from pathlib import Path

from .benchmark_results import BenchmarkRun
from .errors import KernelHubError


def save_plot(run: BenchmarkRun, path: Path) -> Path:
    try:
        import matplotlib

        matplotlib.use("Agg")
        from matplotlib import pyplot as plt
    except ImportError:
        raise KernelHubError("plots need matplotlib: pip install 'kernelhub[benchmark]', or "
                             "pass --no-plots") from None
    results = list(run.results)
    height = 1.2 + 0.55 * len(results)
    fig, ax = plt.subplots(figsize=(9, height), dpi=110)
    try:
        rows = range(len(results))
        kernel = [r.timing.mean_ms for r in results]
        spans = [[r.timing.mean_ms - r.timing.min_ms for r in results],
                 [r.timing.max_ms - r.timing.mean_ms for r in results]]
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
            right = max(r.timing.max_ms, r.reference.mean_ms if r.reference else 0.0)
            ax.text(right * 1.08, i, note, va="center", fontsize=8)
        ax.set_yticks(list(rows), [r.workload for r in results], fontsize=8)
        ax.invert_yaxis()
        ax.set_xscale("log")  # workloads differ by orders of magnitude
        low = min(r.timing.min_ms for r in results)
        high = max(max(r.timing.max_ms, r.reference.mean_ms if r.reference else 0.0)
                   for r in results)
        ax.set_xlim(low / 2, high * 4)
        ax.set_xlabel("mean time per call (ms, log scale, lower is better); speedup = "
                      "reference / kernel")
        kernel_info = run.kernel
        where = kernel_info.get("repoId") or kernel_info.get("path", "")
        ax.set_title(f"{where} — {kernel_info.get('variant', '')}", fontsize=10)
        fig.text(0.01, 0.005, f"{run.machine.get('cpuFeatures', '')} | "
                 f"{run.machine.get('system', '')}", fontsize=6, color="#555555")
        ax.legend(fontsize=8, loc="lower right")
        fig.tight_layout(rect=(0, 0.03, 1, 1))
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, format="png")
    finally:
        plt.close(fig)
    return path
