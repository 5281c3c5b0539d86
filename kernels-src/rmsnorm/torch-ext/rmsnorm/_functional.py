"""The public functions: Python wrappers that choose the op for the call.

A call that needs gradients goes to a functional op with autograd; ``out=``
calls go to the ``*_out`` ops (no autograd, as in PyTorch).
"""

from __future__ import annotations

import torch

from . import _buffers
from ._ops import ops


def _needs_grad(*tensors: torch.Tensor) -> bool:
    return torch.is_grad_enabled() and any(t.requires_grad for t in tensors)


def _pooled_out(x: torch.Tensor, *tensors: torch.Tensor) -> torch.Tensor | None:
    """An output like ``x`` for a call without gradients, so it runs the ``*_out`` op: the
    functional ops carry the autograd wrapper, which costs more than the kernel for one
    token. Large outputs come from the pool (see ``_buffers``). None under autograd or
    ``torch.compile`` tracing: those use the functional op."""
    if _needs_grad(x, *tensors) or torch.compiler.is_compiling():
        return None
    return _buffers.empty(tuple(x.shape), x)


def _no_grad_for_out(name: str, *tensors: torch.Tensor) -> None:
    if _needs_grad(*tensors):
        raise RuntimeError(
            f"{name}(out=...) does not support autograd (like PyTorch's out= functions); "
            "call it without out= when gradients are needed"
        )


def rms_norm(
    x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6, out: torch.Tensor | None = None
) -> torch.Tensor:
    """weight * x / sqrt(mean(x**2, -1) + eps), over the last dimension of ``x``."""
    if out is None:
        out = _pooled_out(x, weight)
        if out is None:
            return ops.rms_norm(x, weight, eps)
    _no_grad_for_out("rms_norm", x, weight)
    ops.rms_norm_out(out, x, weight, eps)
    return out


def gemma_rms_norm(
    x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6, out: torch.Tensor | None = None
) -> torch.Tensor:
    """(1 + weight) * x / sqrt(mean(x**2, -1) + eps), computed in float32, rounded once.

    Gemma stores its norm weight as an offset from one.
    """
    if out is None:
        out = _pooled_out(x, weight)
        if out is None:
            return ops.rms_norm(x, weight, eps, True)
    _no_grad_for_out("gemma_rms_norm", x, weight)
    ops.rms_norm_out(out, x, weight, eps, True)
    return out


def fused_add_rms_norm(
    x: torch.Tensor,
    residual: torch.Tensor,
    weight: torch.Tensor,
    eps: float = 1e-6,
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    """residual <- x + residual (in place); returns rms_norm(residual, weight, eps).

    One pass over the data instead of three. With gradients required, the sum
    goes through the differentiable functional op and is copied into
    ``residual``, so autograd sees the in-place update.
    """
    if out is not None:
        _no_grad_for_out("fused_add_rms_norm", x, residual, weight)
        ops.fused_add_rms_norm_out(out, x, residual, weight, eps)
        return out
    if _needs_grad(x, residual, weight):
        normed, summed = ops.add_rms_norm(x, residual, weight, eps)
        residual.copy_(summed)
        return normed
    out = _pooled_out(x, residual, weight)
    if out is not None:
        ops.fused_add_rms_norm_out(out, x, residual, weight, eps)
        return out
    return ops.fused_add_rms_norm(x, residual, weight, eps)


def silu_mul(gate: torch.Tensor, up: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """silu(gate) * up: the SwiGLU activation of Llama-style MLPs, in one pass."""
    if out is None:
        out = _pooled_out(gate, up)
        if out is None:
            return ops.silu_mul(gate, up)
    _no_grad_for_out("silu_mul", gate, up)
    ops.silu_mul_out(out, gate, up)
    return out


def cpu_capability() -> str:
    """The vector loops the CPU ops run: ``DEFAULT``, ``AVX2``, ``AVX512`` or
    ``AVX512_BF16`` (AVX-512 rounding bf16 results with the CPU's VCVTNEPS2BF16)."""
    return ops.cpu_capability()


def set_cpu_capability(capability: str) -> str:
    """Run the CPU ops on other compiled loops (one this CPU supports).

    For tests and benchmarks that compare the loops; returns the previous choice.
    All copies give bit-identical results (same summation order, no FMA).
    """
    return ops.set_cpu_capability(capability)
