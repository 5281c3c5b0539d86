"""The table's ``Linear`` entry: a bfloat16 model's projections computed widened on CPUs
without native bfloat16 products (issue 31).

There, PyTorch's bfloat16 GEMM runs ~8 GFLOP/s per core, and every family's bfloat16
prefill is dominated by it: its MLPs, its attention, gated-delta and Mamba projections,
its shared experts. rmsnorm's ``layers.Linear`` is ``nn.Linear``'s forward with products
of many rows computed in float32 block by block and rounded once, and (from rmsnorm 1.4.0)
a decode step's few rows by a streaming bfloat16 product that sums in float32 (1.3.0 left
them to PyTorch's product); its fused ``MLP``/``DecoderLayer`` widen their own
prefill products the same way, so the two compose.

Transformers registers no layer name for ``nn.Linear``, and marking torch's class for
good would put every ``nn.Linear`` of every model in front of every kernelize (the
ecosystem's, and ours with ``use_fallback=False``, which would refuse the unmapped name).
So the mark is held only while the table's own kernelize runs (:func:`linear_marked`),
for instances of exactly ``nn.Linear`` (subclasses are quantised or adapter-wrapped
projections with forwards of their own).

The entry stays only for bfloat16 models on CPUs without AVX512_BF16/AMX; what is widened
and why is said once per process. A name the user gave explicitly in a ``KernelConfig`` is
theirs: kept as given (``{"Linear": None}`` turns the widening off).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, MutableMapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from ...layer.decorators import CONDITION_ATTR, LAYER_NAME_ATTR
from ...lazy_names import deferred
from .machine import Decline, drop_declined

if TYPE_CHECKING:
    from torch import nn
else:
    nn = deferred("torch.nn")

logger = logging.getLogger("kernelhub.transformers")

WIDEN_NAME = "Linear"
"""The table's name for ``nn.Linear`` (a KernelConfig key like any other)."""

NATIVE_BF16 = tuple(
    Decline((WIDEN_NAME,), f"CPUs with {flag} multiply bfloat16 natively (oneDNN), so "
            "bfloat16 products there are not widened to float32", with_flags=(flag,))
    for flag in ("avx512_bf16", "amx_bf16"))
"""Where nothing is widened. Not measured here (the project's CPU has neither): the
widening stands on the AVX2 measurement only, so it is held back wherever the CPU has
native bfloat16 products."""

WIDENED = (
    "Linear: bfloat16 projections of prefill-sized inputs (4 rows or more) run in float32, "
    "rounded once, on this CPU (no AVX512_BF16/AMX: PyTorch's bfloat16 GEMM runs ~8 GFLOP/s "
    "per core there, 6.4-8.5x slower than widened from 64 rows; rmsnorm benchmarks/widen.py); "
    "decode steps (1-11 rows) run rmsnorm's streaming bfloat16 product, summed in float32 "
    "(2.6-3.1x PyTorch's at 1 row; benchmarks/gemv.py; rmsnorm 1.3.0 kept PyTorch's) "
    "(kernels-community/rmsnorm layers.Linear)")

_told: set[str] = set()


def _is_bfloat16(model: Any) -> bool:
    return str(getattr(model, "dtype", None)) == "torch.bfloat16"


def settle_widening(entries: MutableMapping[str, Any], explicit: set[str], model: Any,
                    device: str) -> bool:
    """Keep the ``Linear`` entry only where it widens something (a bfloat16 model on a CPU
    without native bfloat16 products, or the user named it), saying so once; whether it
    stays."""
    if WIDEN_NAME not in entries:
        return False
    if WIDEN_NAME in explicit:
        return True
    if device != "cpu" or not _is_bfloat16(model):
        del entries[WIDEN_NAME]  # nothing to widen: no message
        return False
    if drop_declined(entries, explicit, model, device, NATIVE_BF16):
        return False
    if WIDENED not in _told:
        _told.add(WIDENED)
        logger.info(WIDENED)
    return True


def _exactly_linear(module: object) -> bool:
    return type(module) is nn.Linear


@contextmanager
def linear_marked() -> Iterator[None]:
    """``nn.Linear`` registers ``Linear`` (for instances of exactly that class) while the
    block runs; a mark someone else put there is left as it is."""
    if LAYER_NAME_ATTR in nn.Linear.__dict__:
        yield
        return
    setattr(nn.Linear, LAYER_NAME_ATTR, WIDEN_NAME)
    setattr(nn.Linear, CONDITION_ATTR, staticmethod(_exactly_linear))
    try:
        yield
    finally:
        delattr(nn.Linear, LAYER_NAME_ATTR)
        delattr(nn.Linear, CONDITION_ATTR)
