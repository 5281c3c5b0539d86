"""Timing for the kernels' benchmark scripts (``kernels-src/*/benchmarks/timing.py``)
and for autotuning's decisions (``kernelize(autotune=True)``, :mod:`kernelhub.layer.autotune.timing`).

Every kernel's benchmark compares candidates (our op, eager, torch.compile, a copy) in one
run, often on a machine other processes share. Two rules keep those same-run ratios fair,
and they live here once: time on torch's own thread count (``benchmark.Timer`` defaults
to one thread), and take each candidate's best block over rounds in which the candidates
take turns (load from other processes only ever slows a block down, and a burst then hits
every candidate alike). torch is imported by the functions, not by this module.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from .. import system
from ..lazy_names import deferred

if TYPE_CHECKING:
    import torch
    from torch.utils import benchmark
else:
    torch = deferred("torch")
    benchmark = deferred("torch.utils.benchmark")


def best_seconds(fn: Callable[[], Any], min_run_time: float, warm: bool = True) -> float:
    """The fastest timed block of ``fn`` (seconds per call), after one untimed call
    (allocations, first touch) unless ``warm`` is False."""
    if warm:
        fn()
    timer = benchmark.Timer(stmt="fn()", globals={"fn": fn},
                            num_threads=torch.get_num_threads())
    return float(min(timer.blocked_autorange(min_run_time=min_run_time).times))


def interleaved_blocks(candidates: Mapping[str, Callable[[], Any]], min_run_time: float,
                       rounds: int = 5) -> dict[str, list[float]]:
    """Each candidate's best block of every round (seconds per call), over ``rounds``
    rounds in which the candidates take turns: the minimum is the estimate, the spread
    of the rest says how much load the measurement met."""
    blocks: dict[str, list[float]] = {key: [] for key in candidates}
    for i in range(rounds):
        for key, fn in candidates.items():
            blocks[key].append(best_seconds(fn, min_run_time / rounds, warm=i == 0))
    return blocks


def interleaved(candidates: Mapping[str, Callable[[], Any]], min_run_time: float,
                rounds: int = 5) -> dict[str, float]:
    """Each candidate's best block over ``rounds`` rounds in which the candidates take
    turns."""
    return {key: min(times) for key, times in
            interleaved_blocks(candidates, min_run_time, rounds).items()}


def interleaved_thread_time(candidates: Mapping[str, Callable[[], Any]], rounds: int = 7,
                            calls: int = 1) -> dict[str, float]:
    """Each candidate's median over ``rounds`` turns of this thread's CPU time per call
    (``calls`` calls a turn). On a loaded machine wall time stretches by whatever else
    runs and CPU time does not; the caller pins torch to one thread, so the op's work is
    all on this thread."""
    samples: dict[str, list[float]] = {key: [] for key in candidates}
    for fn in candidates.values():
        fn()
    for _ in range(rounds):
        for key, fn in candidates.items():
            start = time.thread_time()
            for _ in range(calls):
                fn()
            samples[key].append((time.thread_time() - start) / calls)
    return {key: statistics.median(times) for key, times in samples.items()}


MODEL_TOKENS = (1, 128, 512, 2048)
"""Token counts of the model-shape tables (x hidden 4096 for norms and rotary, x
intermediate 11008 for activation): decode, short and long prompts."""

MODEL_HEADER = (f"  {'shape':<22}{'out= ms':>10}{'layer ms':>10}{'eager ms':>10}"
                f"{'compile':>10}{'copy ms':>10}{'out=/cmp':>10}{'layer/cmp':>10}{'%copy':>8}")
"""The columns of :func:`model_row`."""


def cpu_header() -> str:
    """The CPU a table ran on (with AVX-512/AMX presence), torch's loops and threads:
    machines of one kind differ, so every table says where it ran."""
    return (f"{system.cpu_summary()}; torch {torch.__version__} loops "
            f"{torch.backends.cpu.get_cpu_capability()}, {torch.get_num_threads()} threads")


def model_row(label: str, times: Mapping[str, float], moved_bytes: int, copy_bytes: int) -> str:
    """One row of a model-shape table: times (ms) of ``out=``, the layer, eager,
    torch.compile and a copy, torch.compile's time over ours, and our bandwidth as a share
    of the copy's."""
    out, layer, compiled = times["out="], times["layer"], times["compile"]
    copy_gbs = copy_bytes / times["copy"] / 1e9
    return (f"  {label:<22}" + "".join(f"{times[k] * 1e3:10.3f}" for k in
                                       ("out=", "layer", "eager", "compile", "copy"))
            + f"{compiled / out:9.2f}x{compiled / layer:9.2f}x"
            + f"{moved_bytes / out / 1e9 / copy_gbs:8.0%}")
