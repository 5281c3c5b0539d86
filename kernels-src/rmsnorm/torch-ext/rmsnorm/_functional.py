"""The public functions: Python wrappers that choose the op for the call.

A call that needs gradients goes to a functional op with autograd; ``out=``
calls go to the ``*_out`` ops (no autograd, as in PyTorch).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from . import _buffers, _widen
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


GEMV_MAX_ROWS = 4
"""Rows of x up to which :func:`swiglu_mlp` streams the weights in its own op, once for all
rows. Such a product does 2 flops per weight per row, so a few rows are bound by memory
bandwidth, where one pass over the weights is all that matters; with more rows the
arithmetic grows and a blocked matrix product (oneDNN / MKL through ``F.linear``) wins."""


def _rows(x: torch.Tensor) -> int:
    return x.numel() // x.shape[-1] if x.shape[-1] else 0


def swiglu_mlp(
    x: torch.Tensor,
    w_gate: torch.Tensor,
    w_up: torch.Tensor,
    w_down: torch.Tensor,
    residual: torch.Tensor | None = None,
) -> torch.Tensor:
    """``down(silu(x w_gate^T) * (x w_up^T))`` (``+ residual``): a Llama-style MLP.

    Weights in ``nn.Linear``'s layout (``[out, in]``). On CPU without gradients, up to
    :data:`GEMV_MAX_ROWS` rows (a decode step) run as one op that streams each weight once
    for all rows and never materialises gate and up; more rows run the matrix products of
    ``F.linear`` with ``silu_mul`` in place between them and the residual added by the
    down projection itself (``addmm``). Products are rounded to the dtype where PyTorch's
    matmuls round them, ``silu(gate) * up`` once (as :func:`silu_mul`). In bfloat16 on a
    CPU without native bfloat16 products, those products run widened (:mod:`._widen`).
    """
    return fused_swiglu(x, (w_gate, w_up, w_down), (None, None, None), residual)


Biases = tuple[torch.Tensor | None, torch.Tensor | None, torch.Tensor | None]


def fused_swiglu(
    x: torch.Tensor,
    weights: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
    biases: Biases,
    residual: torch.Tensor | None = None,
    residual_is_scratch: bool = False,
) -> torch.Tensor:
    """:func:`swiglu_mlp` with optional biases (gate, up, down), for the layers.

    ``residual_is_scratch``: the caller owns ``residual`` (a fresh sum that nothing else
    reads), so without gradients the down projection may accumulate into it in place."""
    w_gate, w_up, w_down = weights
    grad = _needs_grad(x, *weights, *(b for b in biases if b is not None),
                       *(() if residual is None else (residual,)))
    if (x.device.type == "cpu" and not grad and _rows(x) <= GEMV_MAX_ROWS
            and all(b is None for b in biases)):
        return ops.swiglu_mlp(x, w_gate, w_up, w_down, residual)
    if _widen.widens(x, w_gate):
        gate = _widen.linear(x, w_gate, biases[0])
        act = silu_mul(gate, _widen.linear(x, w_up, biases[1]), out=gate)
        return _widen.linear(act, w_down, biases[2], residual)
    gate = F.linear(x, w_gate, biases[0])
    up = F.linear(x, w_up, biases[1])
    act = silu_mul(gate, up) if grad else silu_mul(gate, up, out=gate)
    if residual is None:
        return F.linear(act, w_down, biases[2])
    flat_act = act.reshape(-1, act.shape[-1])
    if residual_is_scratch and not grad and biases[2] is None and residual.is_contiguous():
        residual.view(-1, residual.shape[-1]).addmm_(flat_act, w_down.t())
        return residual
    base = residual.reshape(-1, residual.shape[-1])
    if biases[2] is not None:
        base = base + biases[2]
    return torch.addmm(base, flat_act, w_down.t()).view(residual.shape)


def add_rms_norm(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(rms_norm(x + residual, weight, eps), x + residual)``, both new tensors, one pass.

    The residual add and the norm of every pre-norm decoder layer, without touching
    ``residual`` (unlike :func:`fused_add_rms_norm`, which updates it in place). On CPU
    without gradients both come from the output pool (``_buffers``)."""
    out = _pooled_out(x, residual, weight) if x.device.type == "cpu" else None
    if out is None:
        normed, summed = ops.add_rms_norm(x, residual, weight, eps)
        return normed, summed
    summed = _buffers.empty(tuple(x.shape), x)
    ops.add_rms_norm_out(out, summed, x, residual, weight, eps)
    return out, summed


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
