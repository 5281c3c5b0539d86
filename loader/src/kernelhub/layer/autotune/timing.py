"""How autotuning times a kernel against PyTorch, and what a measurement says about itself.

A decision is often taken on a machine other processes share. Load only ever slows a
timed block down, so the timing follows the rules of :mod:`kernelhub.benchmark.timing`: the
kernel and PyTorch take turns round by round (a burst hits both alike), each side's
estimate is its best block, and blocks run on torch's own thread count (what the model
runs on).

Each measurement also reports two signs of load, which
:mod:`~kernelhub.layer.autotune.decision` uses to decide whether to trust it:

* its *spread*: how far each side's second-best round lies above its best, on the
  noisier side. A best block that another round reproduces is the machine's quiet
  speed; one that stands alone may not be. (The median would measure the load itself,
  which best-of already discounts.)
* its *contention*: the share of the measurement during which this process's threads
  were ready to run but waited for a CPU (Linux's per-thread ``run_delay``), per torch
  thread. Steady load slows every round alike, so it leaves the spread small, yet it
  can slow the two sides unequally (a 2-thread kernel waits for its slower thread, a
  1-thread PyTorch op does not); the scheduler's own account sees it. None where the
  system does not report it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from ...benchmark import timing as benchmarking
from ...lazy_names import deferred
from ...value_types import Record

if TYPE_CHECKING:
    import torch
else:
    torch = deferred("torch")

TIME_BUDGET_S = 0.05
"""Per side and :data:`ROUNDS` rounds of a measurement (a retry with more rounds gets
proportionally more)."""

ROUNDS = 5
"""Interleaved rounds of a first measurement."""

NOISY_RETRIES = 2
"""In-process re-measurements (with twice the rounds each time) of a noisy measurement."""

Call = Callable[[], object]
"""One side of a measurement: the kernel or PyTorch, bound to copies of the inputs."""


class Timing(Record, frozen=True):
    """Per-round best blocks (seconds per call) of each side, and the contention met."""

    kernel: tuple[float, ...]
    pytorch: tuple[float, ...]
    contention: float | None = None
    """Share of the wall time this process's torch threads waited for a CPU (None:
    not reported by the system)."""

    @property
    def rounds(self) -> int:
        return len(self.kernel)

    def best(self, side: str) -> float:
        return min(self.kernel if side == "kernel" else self.pytorch)

    @property
    def spread(self) -> float:
        """How far the second-best round lies above the best one, on the noisier side."""
        return max(_spread(self.kernel), _spread(self.pytorch))

    @property
    def ratio(self) -> float:
        """PyTorch's best time over the kernel's: above 1.0 the kernel is faster."""
        kernel = self.best("kernel")
        return self.best("pytorch") / kernel if kernel > 0 else float("inf")

    def __add__(self, other: Timing) -> Timing:
        known = [c for c in (self.contention, other.contention) if c is not None]
        return Timing(self.kernel + other.kernel, self.pytorch + other.pytorch,
                      max(known) if known else None)


def _spread(blocks: tuple[float, ...]) -> float:
    if len(blocks) < 2:
        return float("inf")  # nothing reproduces the one block
    best, second = sorted(blocks)[:2]
    return second / best - 1.0 if best > 0 else 0.0


def cpu_wait() -> Mapping[str, int] | None:
    """Nanoseconds each thread of this process has waited for a CPU so far (thread id →
    ``run_delay`` of ``/proc/self/task/<id>/schedstat``); None where not available."""
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return None
    waited = {}
    for tid in tasks:
        try:
            with open(f"/proc/self/task/{tid}/schedstat") as f:
                waited[tid] = int(f.read().split()[1])
        except (OSError, ValueError, IndexError):
            continue  # a thread that ended meanwhile
    return waited or None


def contention(before: Mapping[str, int] | None, after: Mapping[str, int] | None,
               wall_s: float, threads: int) -> float | None:
    """The share of ``wall_s`` that ``threads`` threads spent waiting for a CPU between
    two :func:`cpu_wait` readings (threads that started in between count from zero)."""
    if before is None or after is None or wall_s <= 0 or threads <= 0:
        return None
    waited_ns = sum(max(0, ns - before.get(tid, 0)) for tid, ns in after.items())
    return waited_ns / 1e9 / wall_s / threads


def measure(kernel: Call, pytorch: Call, rounds: int = ROUNDS) -> Timing:
    """One interleaved measurement of two zero-argument calls (the seam tests script)."""
    before, start = cpu_wait(), time.perf_counter()
    blocks = benchmarking.interleaved_blocks({"kernel": kernel, "pytorch": pytorch},
                                TIME_BUDGET_S * rounds / ROUNDS, rounds)
    wall = time.perf_counter() - start
    return Timing(tuple(blocks["kernel"]), tuple(blocks["pytorch"]),
                  contention(before, cpu_wait(), wall, torch.get_num_threads()))


def robust_timing(kernel: Call, pytorch: Call, noisy: Callable[[Timing], bool]
                  ) -> tuple[Timing, Timing]:
    """(every round measured, the last attempt): a measurement repeated with twice the
    rounds while ``noisy`` says it met load.

    Each side's best block over all attempts is its estimate; the last attempt says what
    the machine was like when the decision was taken.
    """
    last = measure(kernel, pytorch, ROUNDS)
    total = last
    for attempt in range(NOISY_RETRIES):
        if not noisy(last):
            break
        last = measure(kernel, pytorch, ROUNDS * 2 ** (attempt + 1))
        total = total + last
    return total, last
