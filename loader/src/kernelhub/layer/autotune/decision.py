"""What one call site runs for one shape bucket, and when that is measured again.

A decision is *settled* — later processes use it without measuring — when one of its
measurements was both

* *clear*: the ratio is more than :data:`MARGIN` away from 1.0x, and
* *quiet*: the spread is at most :data:`NOISE_LIMIT` and the contention (where the system
  reports it) at most :data:`CONTENTION_LIMIT`.

A noisy measurement is repeated at once with twice, then four times the rounds. A
decision still close or noisy is stored as *provisional*: the next processes that use it
measure it again and keep each side's best time over all measurements (load only slows a
block down, so best-of converges on the quiet speed), until it is clear and quiet or
:data:`MAX_MEASUREMENTS` measurements were taken. A decision that reached that bound
without one quiet measurement was taken under load throughout; it is measured once more
when it is older than :data:`RECHECK_AFTER_S`, and again a period later, until a quiet
measurement settles it for good.

So a decision taken under load (seen: a norm at 0.08x whose kernel rounds were all
slowed, spread 747%; fp32 decode attention at 0.32x) is corrected by a quieter process;
a true coin toss costs a bounded number of measurements; a clear decision taken on a
quiet machine costs later processes nothing. What a decision depends on — the machine,
torch, the kernel build, the PyTorch code it replaces — is part of its key
(:mod:`~kernelhub.layer.autotune.call_site`), so a change there is measured anew.
"""

from __future__ import annotations

import time

from ...value_types import Record
from .timing import Timing

MARGIN = 0.10
"""Ratios within 10% of 1.0x (0.91x-1.10x) are close calls: either choice costs less
than the run-to-run noise of a model."""

NOISE_LIMIT = 0.25
"""A spread above 25% is noise: on a quiet machine the two best rounds of a side agree
within a few percent."""

CONTENTION_LIMIT = 0.10
"""A measurement during which torch's threads waited for a CPU more than 10% of the
time met load that can shift a ratio by as much as :data:`MARGIN` (on a quiet machine
they wait well under 1%)."""

MAX_MEASUREMENTS = 3
"""A provisional decision is settled after this many measurements (first included)."""

RECHECK_AFTER_S = 24 * 3600.0
"""A decision settled without any quiet measurement is measured again once it is older
than a day: a machine busy at one time is rarely busy all day, and one measurement a
day per shape bucket costs a model a second or two."""


class Decision(Record, frozen=True):
    """What one call site runs for one shape bucket, why, and how sure that is."""

    use_kernel: bool
    reason: str
    kernel_s: float | None = None
    pytorch_s: float | None = None
    max_error: float | None = None
    rounds: int = 0
    """Interleaved timing rounds behind ``kernel_s``/``pytorch_s``, over all measurements."""
    spread: float | None = None
    """The last measurement's spread (None: recorded before quality was kept)."""
    measurements: int = 1
    settled: bool = False
    """False for a timed decision still in doubt: later processes measure it again."""
    contention: float | None = None
    """The last measurement's contention (None: not reported, or not recorded)."""
    quiet: bool = False
    """Whether any measurement behind it was quiet (a settled decision without one is
    measured again after :data:`RECHECK_AFTER_S`)."""
    measured_at: float = 0.0
    """Unix time of the last measurement (0: not recorded)."""

    @property
    def chosen(self) -> str:
        return "kernel" if self.use_kernel else "pytorch"

    @property
    def timed(self) -> bool:
        return self.kernel_s is not None and self.pytorch_s is not None

    def needs_retiming(self, now: float | None = None) -> bool:
        """Whether the process about to use this decision must measure it again."""
        if not self.timed:
            return False  # wrong or raising: a property of the build, not of the load
        if not self.settled:
            return self.measurements < MAX_MEASUREMENTS
        if self.quiet:
            return False
        return (time.time() if now is None else now) - self.measured_at > RECHECK_AFTER_S


def is_close(ratio: float) -> bool:
    """Whether ``ratio`` (PyTorch time / kernel time) is within :data:`MARGIN` of 1.0x."""
    return 1.0 / (1.0 + MARGIN) <= ratio <= 1.0 + MARGIN


def is_noisy(spread: float | None, contention: float | None = None) -> bool:
    """Whether a measurement met load: its best rounds disagree (``spread``; None: not
    recorded), or its threads waited for a CPU (``contention``; None: not reported)."""
    return (spread is None or spread > NOISE_LIMIT
            or (contention is not None and contention > CONTENTION_LIMIT))


def noisy(timing: Timing) -> bool:
    """:func:`is_noisy` of one measurement."""
    return is_noisy(timing.spread, timing.contention)


def timed_decision(timing: Timing, last: Timing, max_error: float,
                   previous: Decision | None = None, now: float | None = None) -> Decision:
    """The decision for a correct kernel from ``timing`` (every round of this process's
    attempts; ``last``: the final attempt, which says what the machine was like), merged
    with ``previous`` measurements of the same key: each side keeps its best time over all
    of them."""
    kernel_s, pytorch_s = timing.best("kernel"), timing.best("pytorch")
    rounds, measurements, quiet = timing.rounds, 1, not noisy(last)
    if previous is not None and previous.kernel_s is not None and previous.pytorch_s is not None:
        kernel_s, pytorch_s = min(kernel_s, previous.kernel_s), min(pytorch_s, previous.pytorch_s)
        rounds += previous.rounds
        measurements += previous.measurements
        quiet = quiet or previous.quiet
    ratio = pytorch_s / kernel_s if kernel_s > 0 else float("inf")
    settled = (not is_close(ratio) and quiet) or measurements >= MAX_MEASUREMENTS
    spread, contention = last.spread, last.contention
    doubt = " and ".join(what for what, yes in (
        ("a close call", is_close(ratio)),
        ("measured under load", not quiet)) if yes)
    load = f", threads waited for a CPU {contention:.0%} of the time" if contention is not None else ""
    quality = (f"best of {rounds} interleaved rounds in {measurements} measurement"
               f"{'s' if measurements > 1 else ''}, spread {spread:.0%}{load}")
    if not settled:
        quality += f"; {doubt}, measured again by the next process"
    elif not quiet:
        quality += "; measured under load, measured again after a day"
    correct = f"correct (max error {max_error:.2g})"
    if kernel_s <= pytorch_s:
        reason = f"{correct} and {ratio:.2f}x PyTorch's speed ({quality})"
    else:
        reason = f"{correct} but slower: {ratio:.2f}x PyTorch's speed ({quality})"
    return Decision(kernel_s <= pytorch_s, reason, kernel_s, pytorch_s, max_error, rounds,
                    spread, measurements, settled, contention, quiet,
                    time.time() if now is None else now)
