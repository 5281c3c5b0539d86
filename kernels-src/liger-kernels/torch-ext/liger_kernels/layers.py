"""The layer ``kernelize`` and Transformers' ``use_kernels=True`` install.

``LigerRMSNorm`` is a pure layer (no ``__init__`` or state of its own, only ``forward``):
its ``forward`` runs on the replaced ``*RMSNorm`` instance and reads that layer's
``weight`` and ``variance_epsilon``, the attributes Llama, Qwen2/3 and Mistral norms have.
A weight of another dtype than the activations runs the model's own formula, so swapping
never changes what a model computes beyond float32 summation order.
"""

from __future__ import annotations

import torch
from torch import nn

from ._functional import llama_rms_norm_reference, rms_norm


class LigerRMSNorm(nn.Module):
    """weight * x / sqrt(mean(x**2) + variance_epsilon) (Llama, Qwen2/3, Mistral, ...)."""

    weight: torch.Tensor
    variance_epsilon: float

    has_backward: bool = True
    can_torch_compile: bool = True

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        if self.weight.dtype != hidden_states.dtype:
            return llama_rms_norm_reference(hidden_states, self.weight, self.variance_epsilon)
        return rms_norm(hidden_states, self.weight, self.variance_epsilon)
