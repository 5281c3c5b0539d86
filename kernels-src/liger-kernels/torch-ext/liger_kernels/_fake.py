"""The meta implementation, so the op traces under torch.compile: a fresh contiguous
tensor of x's shape, as the real op returns whatever x's layout.

Registered as a ``Meta`` kernel through a ``torch.library.Library`` rather than with
``torch.library.register_fake``: that walks ``sys.modules`` with ``inspect`` to name its
caller, about 5 ms of every load, where this costs microseconds and serves FakeTensor,
``opcheck`` and ``torch.compile`` alike."""

from __future__ import annotations

import torch

from ._ops import add_op_namespace_prefix


def _rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    return torch.empty(x.shape, dtype=x.dtype, device=x.device)


_LIB = torch.library.Library(add_op_namespace_prefix("").removesuffix("::"), "IMPL")
"""Kept for the life of the module: a Library's registrations end with it."""
_LIB.impl("rms_norm", _rms_norm, "Meta")
