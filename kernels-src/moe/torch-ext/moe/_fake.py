"""Meta implementations, so the ops trace under torch.compile (FakeTensor runs them).

Registered as ``Meta`` kernels through one ``torch.library.Library`` rather than with
``torch.library.register_fake``: that walks ``sys.modules`` with ``inspect`` to name its
caller, about 5 ms of every load, where these cost microseconds and serve FakeTensor,
``opcheck`` and ``torch.compile`` alike.
"""

from __future__ import annotations

import torch

from ._ops import add_op_namespace_prefix


def _experts(hidden: torch.Tensor, top_k_index: torch.Tensor, top_k_weights: torch.Tensor,
             gate_up: torch.Tensor, down: torch.Tensor, activation: int,
             gate_up_bias: torch.Tensor | None = None, down_bias: torch.Tensor | None = None,
             transposed: bool = False, interleaved: bool = False, alpha: float = 1.702,
             limit: float = 7.0, gemm_rows: int = -1) -> torch.Tensor:
    return hidden.new_empty(hidden.shape)


def _router(hidden: torch.Tensor, weight: torch.Tensor, top_k: int, scoring: int,
            bias: torch.Tensor | None, softcap: float
            ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    tokens, experts = hidden.shape[0], weight.shape[0]
    logits_dtype = torch.float32 if scoring == 1 else hidden.dtype
    return (hidden.new_empty((tokens, experts), dtype=logits_dtype),
            hidden.new_empty((tokens, top_k)),
            hidden.new_empty((tokens, top_k), dtype=torch.long))


_LIB = torch.library.Library(add_op_namespace_prefix("").removesuffix("::"), "IMPL")
"""Kept for the life of the module: a Library's registrations end with it."""
_LIB.impl("moe_experts", _experts, "Meta")
_LIB.impl("moe_router", _router, "Meta")
