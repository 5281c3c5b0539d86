"""Meta implementations, so the ops trace under torch.compile (FakeTensor runs them).

They mirror the C++ ops' output layout exactly (``opcheck`` compares strides):
``rotary`` allocates with ``empty_like`` of the input, made contiguous first when
its last dimension is strided. The in-place and ``out`` ops return nothing, so torch
derives their fakes itself.

Registered as a ``Meta`` kernel through a ``torch.library.Library`` rather than with
``torch.library.register_fake``: that walks ``sys.modules`` with ``inspect`` to name its
caller, about 5 ms of every load, where this costs microseconds and serves FakeTensor,
``opcheck`` and ``torch.compile`` alike.
"""

from __future__ import annotations

import torch

from ._ops import add_op_namespace_prefix


def _unit_last_stride(t: torch.Tensor) -> bool:
    return t.size(-1) <= 1 or t.stride(-1) == 1


def _fresh_like(t: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(t if _unit_last_stride(t) else t.contiguous())


def _rotary_meta(
    q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, conj: bool = False
) -> tuple[torch.Tensor, torch.Tensor]:
    return _fresh_like(q), _fresh_like(k)


_LIB = torch.library.Library(add_op_namespace_prefix("").removesuffix("::"), "IMPL")
"""Kept for the life of the module: a Library's registrations end with it."""
_LIB.impl("rotary", _rotary_meta, "Meta")
