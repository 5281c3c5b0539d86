"""The backward formula, registered with ``torch.library.register_autograd``:
``layer_norm`` differentiates through the ``layer_norm_backward`` kernel (one
pass per row for ``grad_x``, per-thread accumulators for ``grad_weight`` and
``grad_bias``). ``layer_norm_out`` has no autograd, like PyTorch's ``out=``
functions."""

from __future__ import annotations

import torch

from ._ops import add_op_namespace_prefix, ops


def _setup(ctx, inputs, output) -> None:
    x, weight, bias, eps = inputs
    ctx.save_for_backward(x, weight, bias)
    ctx.eps = eps


def _backward(ctx, grad: torch.Tensor):
    x, weight, bias = ctx.saved_tensors
    grad_x, grad_weight, grad_bias = ops.layer_norm_backward(grad, x, weight, bias, ctx.eps)
    return (
        grad_x,
        grad_weight if weight is not None else None,
        grad_bias if bias is not None else None,
        None,
    )


torch.library.register_autograd(
    add_op_namespace_prefix("layer_norm"), _backward, setup_context=_setup
)
