"""Fake (meta) implementations, so the ops trace under torch.compile.

Each describes only the outputs: fresh contiguous tensors (the real ops return
contiguous results whatever the input layout), or nothing for ``layer_norm_out``,
which writes its ``out`` argument. Shape checks happen in the real kernel.
"""

from __future__ import annotations

import torch

from ._ops import add_op_namespace_prefix


def _fresh(t: torch.Tensor, shape=None) -> torch.Tensor:
    return torch.empty(t.shape if shape is None else shape, dtype=t.dtype, device=t.device)


@torch.library.register_fake(add_op_namespace_prefix("layer_norm"))
def _layer_norm(x, weight, bias, eps: float):
    return _fresh(x)


@torch.library.register_fake(add_op_namespace_prefix("layer_norm_out"))
def _layer_norm_out(out, x, weight, bias, eps: float) -> None:
    return None


@torch.library.register_fake(add_op_namespace_prefix("layer_norm_backward"))
def _layer_norm_backward(grad_out, x, weight, bias, eps: float):
    hidden = x.shape[-1:]
    return _fresh(x), _fresh(x, hidden), _fresh(x, hidden)
