"""The public functions: Python wrappers that choose the op for the call.

A call that needs gradients goes to the functional op with autograd; ``out=``
calls go to ``layer_norm_out`` (no autograd, as in PyTorch).
"""

from __future__ import annotations

import torch

from . import _buffers
from ._ops import ops


def layer_norm(
    x: torch.Tensor,
    weight: torch.Tensor | None = None,
    bias: torch.Tensor | None = None,
    eps: float = 1e-5,
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    """(x - mean) / sqrt(var + eps) * weight + bias over the last dimension of ``x``.

    The variance is the biased one, as ``torch.nn.functional.layer_norm``;
    weight and bias are optional (an ``nn.LayerNorm`` without affine terms).
    """
    tensors = [t for t in (x, weight, bias) if t is not None]
    needs_grad = torch.is_grad_enabled() and any(t.requires_grad for t in tensors)
    if out is None:
        # Without gradients the out= op runs (the functional op carries the autograd
        # wrapper, which costs more than the kernel for one token) on pooled memory.
        if needs_grad or torch.compiler.is_compiling():
            return ops.layer_norm(x, weight, bias, eps)
        out = _buffers.empty(tuple(x.shape), x)
    elif needs_grad:
        raise RuntimeError(
            "layer_norm(out=...) does not support autograd (like PyTorch's out= functions); "
            "call it without out= when gradients are needed"
        )
    ops.layer_norm_out(out, x, weight, bias, eps)
    return out


def cpu_capability() -> str:
    """The vector loops the CPU ops run: ``DEFAULT``, ``AVX2``, ``AVX512`` or
    ``AVX512_BF16`` (AVX-512 rounding bf16 results with the CPU's VCVTNE2PS2BF16)."""
    return ops.cpu_capability()


def set_cpu_capability(capability: str) -> str:
    """Run the CPU ops on other compiled loops (one this CPU supports).

    For tests and benchmarks that compare the loops; returns the previous choice.
    All copies give bit-identical results (same summation order, no FMA).
    """
    return ops.set_cpu_capability(capability)
