"""The backward of ``rms_norm``, registered with ``torch.library.register_autograd``.

Written with PyTorch ops in float32 (float64 for float64 inputs): training runs the
kernel's forward and this formula's backward, which is the derivative of the rounding
the forward does (``weight * normed.to(dtype)``, so the weight's gradient sees the
rounded normalized values, as autograd through LlamaRMSNorm does).
"""

from __future__ import annotations

import torch

from ._ops import add_op_namespace_prefix


def _setup(ctx, inputs, output) -> None:
    x, weight, eps = inputs
    ctx.save_for_backward(x, weight)
    ctx.eps = eps


def _backward(ctx, grad: torch.Tensor):
    x, weight = ctx.saved_tensors
    compute = torch.promote_types(x.dtype, torch.float32)
    xf = x.to(compute)
    rstd = torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + ctx.eps)
    normed = xf * rstd
    g = grad.to(compute)
    grad_weight = (g * normed.to(x.dtype).to(compute)).reshape(-1, x.shape[-1]).sum(0)
    g_normed = g * weight.to(compute)
    grad_x = rstd * (g_normed - normed * (g_normed * normed).mean(-1, keepdim=True))
    return grad_x.to(x.dtype), grad_weight.to(weight.dtype), None


torch.library.register_autograd(
    add_op_namespace_prefix("rms_norm"), _backward, setup_context=_setup
)
