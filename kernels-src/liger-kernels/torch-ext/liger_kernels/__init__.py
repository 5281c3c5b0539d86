"""Liger's RMSNorm for PyTorch, as Transformers 5.25 maps it (``kernels-community/liger-kernels``
version 4, layer ``LigerRMSNorm``, for every ``RMSNorm`` layer).

:func:`rms_norm` computes Llama's norm in one pass per row, rounded as Transformers'
``LlamaRMSNorm`` rounds (``weight * (x * rstd).to(dtype)``, the norm in float32), so a
layer swapped for :class:`layers.LigerRMSNorm` computes the same numbers up to the order
of the float32 sum. It is differentiable.
"""

from __future__ import annotations

from . import _autograd, _fake, layers
from ._functional import rms_norm

__all__ = ["layers", "rms_norm"]

# Imported for their side effects: the fake implementation and the autograd formula.
del _autograd, _fake
