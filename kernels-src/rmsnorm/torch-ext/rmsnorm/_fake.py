"""Meta implementations, so the ops trace under torch.compile (FakeTensor runs them).

Each describes only the outputs: fresh contiguous tensors of the input's shape (the real
ops return contiguous results whatever the input layout). The ``*_out`` ops write their
``out`` arguments and return nothing, so torch derives their fakes itself. Shape checks
happen in the real kernel.

Registered as ``Meta`` kernels through one ``torch.library.Library`` rather than with
``torch.library.register_fake``: that walks ``sys.modules`` with ``inspect`` to name its
caller, about 5 ms of every load, where these cost microseconds and serve FakeTensor,
``opcheck`` and ``torch.compile`` alike.
"""

from __future__ import annotations

import torch

from ._ops import add_op_namespace_prefix


def _fresh(t: torch.Tensor) -> torch.Tensor:
    return torch.empty(t.shape, dtype=t.dtype, device=t.device)


def _rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float, unit_offset: bool = False):
    return _fresh(x)


def _rms_norm_backward(grad_out, x, weight, eps: float, unit_offset: bool = False):
    return _fresh(x), _fresh(weight)


def _fused_add_rms_norm(x, residual, weight, eps: float):
    return _fresh(x)


def _add_rms_norm(x, residual, weight, eps: float):
    return _fresh(x), _fresh(x)


def _silu_mul(gate, up):
    return _fresh(gate)


def _swiglu_mlp(x, w_gate, w_up, w_down, residual=None):
    return _fresh(x)


def _linear(x, weight, bias=None, residual=None):
    return x.new_empty((*x.shape[:-1], weight.shape[0]))


def _rms_norm_gated(x, gate, weight, eps: float, group_size: int = 0,
                    norm_before_gate: bool = True, activation: str = "silu"):
    return _fresh(x)


def _rms_norm_gated_backward(grad_out, x, gate, weight, eps: float, group_size: int,
                             norm_before_gate: bool, activation: str):
    grad_gate = _fresh(x) if gate is not None else x.new_empty((0,))
    return _fresh(x), grad_gate, _fresh(weight)


_LIB = torch.library.Library(add_op_namespace_prefix("").removesuffix("::"), "IMPL")
"""Kept for the life of the module: a Library's registrations end with it."""
_LIB.impl("rms_norm", _rms_norm, "Meta")
_LIB.impl("rms_norm_backward", _rms_norm_backward, "Meta")
_LIB.impl("fused_add_rms_norm", _fused_add_rms_norm, "Meta")
_LIB.impl("add_rms_norm", _add_rms_norm, "Meta")
_LIB.impl("silu_mul", _silu_mul, "Meta")
_LIB.impl("swiglu_mlp", _swiglu_mlp, "Meta")
_LIB.impl("linear", _linear, "Meta")
_LIB.impl("rms_norm_gated", _rms_norm_gated, "Meta")
_LIB.impl("rms_norm_gated_backward", _rms_norm_gated_backward, "Meta")
