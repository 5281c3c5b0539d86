"""The public function and the formula it shares with the layer's fallback and backward."""

from __future__ import annotations

import torch

from ._ops import ops


def llama_rms_norm_reference(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """LlamaRMSNorm.forward in PyTorch ops: what the kernel computes, and what runs for
    inputs it does not take (a weight of another dtype than the activations)."""
    hidden = x.to(torch.float32)
    variance = hidden.pow(2).mean(-1, keepdim=True)
    hidden = hidden * torch.rsqrt(variance + eps)
    return weight * hidden.to(x.dtype)


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """weight * x / sqrt(mean(x**2, -1) + eps) over the last dimension, in one pass."""
    return ops.rms_norm(x, weight, eps)
