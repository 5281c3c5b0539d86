"""Drop-in layer: ``kernelize`` swaps a model layer's ``forward`` for this one.

A pure layer (no ``__init__``, no state or methods of its own, only
``forward``): its ``forward`` runs on the replaced layer's instance and reads
the attributes ``nn.LayerNorm`` has: ``weight``, ``bias`` (either may be None)
and ``eps``. Cases the kernel does not take (normalizing over more than the
last dimension, parameters of another dtype than the input) run
``torch.nn.functional.layer_norm`` instead, so swapping never changes what a
model computes beyond float32 summation order.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ._functional import layer_norm


class LayerNorm(nn.Module):
    """(x - mean) / sqrt(var + eps) * weight + bias over the last dimension."""

    has_backward: bool = True
    can_torch_compile: bool = True

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        weight = getattr(self, "weight", None)
        bias = getattr(self, "bias", None)
        shape = tuple(getattr(self, "normalized_shape", hidden_states.shape[-1:]))
        params = [p for p in (weight, bias) if p is not None]
        if len(shape) != 1 or any(p.dtype != hidden_states.dtype for p in params):
            return F.layer_norm(hidden_states, shape, weight, bias, self.eps)
        return layer_norm(hidden_states, weight, bias, self.eps)
