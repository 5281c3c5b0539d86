"""How ``kernelize(verify=True)`` times a kernel against PyTorch, and how far it trusts
the result.

A verification decision is often taken on a machine that other processes share. Load
only ever slows a timed block down, and it comes in bursts, so the timing follows the
rules of :mod:`kernelhub.benchmarking`: the kernel and PyTorch take turns round by
round (a burst hits both alike), each side's estimate is its best block, and blocks
run on torch's own thread count (what the model runs on).

A measurement also says how good it is: its rounds and its *spread* (how far each
side's second-best round lies above its best, on the noisier side: a best block that
another round reproduces is the machine's quiet speed, one that stands alone may not
be; the median would measure the machine's load instead, which best-of already
discounts). A decision is settled — later processes use it without measuring — only
when it is both

* *clear*: the ratio is more than :data:`MARGIN` away from 1.0x, and
* *quiet*: the spread is at most :data:`NOISE_LIMIT`.

A noisy measurement is repeated at once with twice, then four times the rounds (at
most :data:`NOISY_RETRIES` times; a quiet machine never pays for it). A decision still
close or noisy is cached as *provisional*: the next processes that use it measure it
again and keep each side's best time over all measurements, until it is clear and
quiet or :data:`MAX_MEASUREMENTS` measurements were taken. So a decision taken under
contention (seen: a norm at 0.08x whose kernel rounds were all slowed, spread 747%)
is corrected by a quieter process, a true coin toss costs a bounded number of
re-measurements, and a clear decision costs later processes nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..records import Record

TIME_BUDGET_S = 0.05
"""Per side and :data:`ROUNDS` rounds of a measurement (a retry with more rounds gets
proportionally more)."""

ROUNDS = 5
"""Interleaved rounds of a first measurement."""

MARGIN = 0.10
"""Ratios within 10% of 1.0x (0.91x-1.10x) are close calls."""

NOISE_LIMIT = 0.25
"""A spread above 25% is noise: on a quiet machine the two best rounds of a side agree
within a few percent."""

NOISY_RETRIES = 2
"""In-process re-measurements (with twice the rounds each time) of a noisy measurement."""

MAX_MEASUREMENTS = 3
"""A provisional decision is settled after this many measurements (first included)."""


class Timing(Record, frozen=True):
    """Per-round best blocks (seconds per call) of each side of one measurement."""

    kernel: tuple[float, ...]
    pytorch: tuple[float, ...]

    @property
    def rounds(self) -> int:
        return len(self.kernel)

    def best(self, side: str) -> float:
        return min(getattr(self, side))

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
        return Timing(self.kernel + other.kernel, self.pytorch + other.pytorch)


def _spread(blocks: tuple[float, ...]) -> float:
    if len(blocks) < 2:
        return float("inf")  # nothing reproduces the one block
    best, second = sorted(blocks)[:2]
    return second / best - 1.0 if best > 0 else 0.0


def is_close(ratio: float) -> bool:
    """Whether ``ratio`` (PyTorch time / kernel time) is within :data:`MARGIN` of 1.0x."""
    return 1.0 / (1.0 + MARGIN) <= ratio <= 1.0 + MARGIN


def is_noisy(spread: float | None) -> bool:
    """Whether a measurement with ``spread`` met load (None: quality not recorded)."""
    return spread is None or spread > NOISE_LIMIT


def is_settled(ratio: float, spread: float | None, measurements: int) -> bool:
    """Whether later processes may use a decision without measuring it again."""
    return (not is_close(ratio) and not is_noisy(spread)) or measurements >= MAX_MEASUREMENTS


def measure(kernel: Callable[[], Any], pytorch: Callable[[], Any], rounds: int = ROUNDS
            ) -> Timing:
    """One interleaved measurement of two zero-argument calls (the seam tests count)."""
    from ..benchmarking import interleaved_blocks

    blocks = interleaved_blocks({"kernel": kernel, "pytorch": pytorch},
                                TIME_BUDGET_S * rounds / ROUNDS, rounds)
    return Timing(tuple(blocks["kernel"]), tuple(blocks["pytorch"]))


def robust_timing(kernel: Callable[[], Any], pytorch: Callable[[], Any]) -> tuple[Timing, float]:
    """(every round measured, the spread of the last attempt): a measurement repeated
    with twice the rounds while it is noisy.

    Each side's best block over all attempts is its estimate; the spread is the last
    attempt's, which says what the machine was like when the decision was taken.
    """
    last = measure(kernel, pytorch, ROUNDS)
    total = last
    for attempt in range(NOISY_RETRIES):
        if not is_noisy(last.spread):
            break
        last = measure(kernel, pytorch, ROUNDS * 2 ** (attempt + 1))
        total = total + last
    return total, last.spread
