"""Fake (meta) implementations, so the ops trace under torch.compile.

Each describes only the outputs: fresh contiguous tensors of the input's shape
(the real ops return contiguous results whatever the input layout), or nothing
for the ``*_out`` ops, which write their ``out`` argument. Shape checks happen
in the real kernel.
"""

from __future__ import annotations

import torch

from ._ops import add_op_namespace_prefix


def _fresh(t: torch.Tensor) -> torch.Tensor:
    return torch.empty(t.shape, dtype=t.dtype, device=t.device)


@torch.library.register_fake(add_op_namespace_prefix("rms_norm"))
def _rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float, unit_offset: bool = False):
    return _fresh(x)


@torch.library.register_fake(add_op_namespace_prefix("rms_norm_out"))
def _rms_norm_out(out, x, weight, eps: float, unit_offset: bool = False) -> None:
    return None


@torch.library.register_fake(add_op_namespace_prefix("rms_norm_backward"))
def _rms_norm_backward(grad_out, x, weight, eps: float, unit_offset: bool = False):
    return _fresh(x), _fresh(weight)


@torch.library.register_fake(add_op_namespace_prefix("fused_add_rms_norm"))
def _fused_add_rms_norm(x, residual, weight, eps: float):
    return _fresh(x)


@torch.library.register_fake(add_op_namespace_prefix("fused_add_rms_norm_out"))
def _fused_add_rms_norm_out(out, x, residual, weight, eps: float) -> None:
    return None


@torch.library.register_fake(add_op_namespace_prefix("add_rms_norm"))
def _add_rms_norm(x, residual, weight, eps: float):
    return _fresh(x), _fresh(x)


@torch.library.register_fake(add_op_namespace_prefix("silu_mul"))
def _silu_mul(gate, up):
    return _fresh(gate)


@torch.library.register_fake(add_op_namespace_prefix("silu_mul_out"))
def _silu_mul_out(out, gate, up) -> None:
    return None


@torch.library.register_fake(add_op_namespace_prefix("add_rms_norm_out"))
def _add_rms_norm_out(out, summed, x, residual, weight, eps: float) -> None:
    return None


@torch.library.register_fake(add_op_namespace_prefix("swiglu_mlp"))
def _swiglu_mlp(x, w_gate, w_up, w_down, residual=None):
    return _fresh(x)


@torch.library.register_fake(add_op_namespace_prefix("rms_norm_gated"))
def _rms_norm_gated(x, gate, weight, eps: float, group_size: int = 0,
                    norm_before_gate: bool = True, activation: str = "silu"):
    return _fresh(x)


@torch.library.register_fake(add_op_namespace_prefix("rms_norm_gated_backward"))
def _rms_norm_gated_backward(grad_out, x, gate, weight, eps: float, group_size: int,
                             norm_before_gate: bool, activation: str):
    grad_gate = _fresh(x) if gate is not None else x.new_empty((0,))
    return _fresh(x), grad_gate, _fresh(weight)
