"""Fake (meta) implementations, so the ops trace under torch.compile.

Every op only writes its ``out`` argument and returns nothing, so the fake
implementation has nothing to compute: shape checks happen in the real kernel.
"""

from __future__ import annotations

import torch

from ._ops import add_op_namespace_prefix

GATED_OPS = ("silu_and_mul", "mul_and_silu", "gelu_and_mul", "gelu_tanh_and_mul")
UNARY_OPS = ("silu", "gelu", "gelu_tanh", "gelu_fast", "gelu_new", "gelu_quick")


def _writes_out_only(out: torch.Tensor, x: torch.Tensor) -> None:
    return None


def _fatrelu_writes_out_only(out: torch.Tensor, x: torch.Tensor, threshold: float = 0.0) -> None:
    return None


for _name in GATED_OPS + UNARY_OPS:
    torch.library.register_fake(add_op_namespace_prefix(_name), _writes_out_only)
torch.library.register_fake(add_op_namespace_prefix("fatrelu_and_mul"), _fatrelu_writes_out_only)
