"""Timing for the kernels' benchmark scripts (``kernels-src/*/benchmarks/benchmark.py``).

Every kernel's benchmark compares candidates (our op, eager, torch.compile, a copy) in one
run, often on a machine other processes share. Two rules keep those same-run ratios fair,
and they live here once: time on torch's own thread count (``benchmark.Timer`` defaults
to one thread), and take each candidate's best block over rounds in which the candidates
take turns (load from other processes only ever slows a block down, and a burst then hits
every candidate alike). torch is imported by the functions, not by this module.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any


def best_seconds(fn: Callable[[], Any], min_run_time: float, warm: bool = True) -> float:
    """The fastest timed block of ``fn`` (seconds per call), after one untimed call
    (allocations, first touch) unless ``warm`` is False."""
    import torch
    from torch.utils import benchmark

    if warm:
        fn()
    timer = benchmark.Timer(stmt="fn()", globals={"fn": fn},
                            num_threads=torch.get_num_threads())
    return float(min(timer.blocked_autorange(min_run_time=min_run_time).times))


def interleaved(candidates: Mapping[str, Callable[[], Any]], min_run_time: float,
                rounds: int = 5) -> dict[str, float]:
    """Each candidate's best block over ``rounds`` rounds in which the candidates take
    turns."""
    best = {key: best_seconds(fn, min_run_time / rounds) for key, fn in candidates.items()}
    for _ in range(rounds - 1):
        for key, fn in candidates.items():
            best[key] = min(best[key], best_seconds(fn, min_run_time / rounds, warm=False))
    return best
