"""Fake (meta) implementations, so the ops trace under torch.compile."""

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


torch.library.register_fake(add_op_namespace_prefix("moe_experts"), _experts)
torch.library.register_fake(add_op_namespace_prefix("moe_router"), _router)
