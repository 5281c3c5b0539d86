"""The fake (meta) implementation, so the op traces under torch.compile: a fresh
contiguous tensor of x's shape, as the real op returns whatever x's layout."""

from __future__ import annotations

import torch

from ._ops import add_op_namespace_prefix


@torch.library.register_fake(add_op_namespace_prefix("rms_norm"))
def _rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    return torch.empty(x.shape, dtype=x.dtype, device=x.device)
