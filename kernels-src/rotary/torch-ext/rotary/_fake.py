"""Fake (meta) implementations, so the ops trace under torch.compile.

They mirror the C++ ops' output layout exactly (``opcheck`` compares strides):
``rotary`` allocates with ``empty_like`` of the input, made contiguous first when
its last dimension is strided. The in-place and ``out`` ops return nothing.
"""

from __future__ import annotations

import torch

from ._ops import add_op_namespace_prefix


def _unit_last_stride(t: torch.Tensor) -> bool:
    return t.size(-1) <= 1 or t.stride(-1) == 1


def _fresh_like(t: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(t if _unit_last_stride(t) else t.contiguous())


@torch.library.register_fake(add_op_namespace_prefix("rotary"))
def _rotary_fake(
    q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, conj: bool = False
) -> tuple[torch.Tensor, torch.Tensor]:
    return _fresh_like(q), _fresh_like(k)


@torch.library.register_fake(add_op_namespace_prefix("apply_rotary"))
def _apply_rotary_fake(
    q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor
) -> None:
    return None


@torch.library.register_fake(add_op_namespace_prefix("apply_rotary_out"))
def _apply_rotary_out_fake(
    q_out: torch.Tensor,
    k_out: torch.Tensor,
    q: torch.Tensor,
    k: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    conj: bool = False,
) -> None:
    return None
