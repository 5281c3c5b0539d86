"""Backward formulas, registered with ``torch.library.register_autograd``.

rms_norm and add_rms_norm differentiate through the ``rms_norm_backward``
kernel (one pass per row for ``grad_x``, per-thread accumulators for
``grad_weight``); rms_norm_gated through ``rms_norm_gated_backward`` (dx, dgate
and the weight's row sums in one pass per row). silu_mul's backward is elementwise and cheap next to the
matmuls around it in an MLP, so it is written with PyTorch ops. The in-place
and ``out=`` ops have no autograd, like PyTorch's own ``out=`` functions; the
Python wrappers route gradient-requiring calls to the functional ops.
"""

from __future__ import annotations

import torch

from ._ops import add_op_namespace_prefix, ops


def _rms_norm_setup(ctx, inputs, output) -> None:
    x, weight, eps, *rest = inputs
    ctx.save_for_backward(x, weight)
    ctx.eps = eps
    ctx.unit_offset = bool(rest[0]) if rest else False


def _rms_norm_backward(ctx, grad: torch.Tensor):
    x, weight = ctx.saved_tensors
    grad_x, grad_weight = ops.rms_norm_backward(grad, x, weight, ctx.eps, ctx.unit_offset)
    return grad_x, grad_weight, None, None


def _add_rms_norm_setup(ctx, inputs, output) -> None:
    _x, _residual, weight, eps = inputs
    ctx.save_for_backward(output[1], weight)
    ctx.eps = eps


def _add_rms_norm_backward(ctx, grad_out: torch.Tensor, grad_sum: torch.Tensor):
    summed, weight = ctx.saved_tensors
    grad_x, grad_weight = ops.rms_norm_backward(grad_out, summed, weight, ctx.eps, False)
    grad_x = grad_x + grad_sum
    return grad_x, grad_x, grad_weight, None


def _silu_mul_setup(ctx, inputs, output) -> None:
    ctx.save_for_backward(*inputs)


def _silu_mul_backward(ctx, grad: torch.Tensor):
    gate, up = ctx.saved_tensors
    compute = torch.promote_types(gate.dtype, torch.float32)
    g, a, b = grad.to(compute), gate.to(compute), up.to(compute)
    sig = torch.sigmoid(a)
    grad_gate = g * b * sig * (1 + a * (1 - sig))
    grad_up = g * a * sig
    return grad_gate.to(gate.dtype), grad_up.to(up.dtype)


torch.library.register_autograd(
    add_op_namespace_prefix("rms_norm"), _rms_norm_backward, setup_context=_rms_norm_setup
)
torch.library.register_autograd(
    add_op_namespace_prefix("add_rms_norm"),
    _add_rms_norm_backward,
    setup_context=_add_rms_norm_setup,
)
torch.library.register_autograd(
    add_op_namespace_prefix("silu_mul"), _silu_mul_backward, setup_context=_silu_mul_setup
)


def _rms_norm_gated_setup(ctx, inputs, output) -> None:
    x, gate, weight, eps, *rest = inputs
    ctx.save_for_backward(x, gate, weight)
    ctx.settings = (eps, *rest)


def _rms_norm_gated_backward(ctx, grad: torch.Tensor):
    """The fused gradients: one C++ pass per row gives dx and dgate, and the weight's
    gradient sums per-thread rows in a fixed order (no second derivative, as before)."""
    x, gate, weight = ctx.saved_tensors
    grad_x, grad_gate, grad_weight = ops.rms_norm_gated_backward(
        grad, x, gate, weight, *ctx.settings)
    return (grad_x, grad_gate if gate is not None else None, grad_weight,
            None, None, None, None)


torch.library.register_autograd(
    add_op_namespace_prefix("rms_norm_gated"), _rms_norm_gated_backward,
    setup_context=_rms_norm_gated_setup,
)
