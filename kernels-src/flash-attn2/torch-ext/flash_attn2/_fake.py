"""Fake (meta) implementations, so the ops trace under torch.compile.

Shape and dtype checks happen in the real kernel; the fakes only describe the
result: ``attention`` returns ``[batch, heads_q, seq_q, head_dim_v]`` in the
query's dtype (laid out as the CPU op lays it out), and ``attention_out`` only writes its ``out`` argument.
"""

from __future__ import annotations

import torch

from ._ops import add_op_namespace_prefix


@torch.library.register_fake(add_op_namespace_prefix("attention"))
def _attention_fake(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    attn_mask: torch.Tensor | None,
    scale: float,
    causal: bool,
    window_left: int,
    window_right: int,
    softcap: float,
) -> torch.Tensor:
    # The real op's layout (attention_common.cpp, empty_output): a transposed
    # [B, Sq, Hq, Dv] buffer where q is one, else contiguous, as torch's CPU sdpa lays
    # out its result (a shape the op hands to sdpa returns sdpa's tensor).
    if q.transpose(1, 2).is_contiguous():
        return q.new_empty((q.shape[0], q.shape[2], q.shape[1], v.shape[3])).transpose(1, 2)
    return q.new_empty((q.shape[0], q.shape[1], q.shape[2], v.shape[3]))


@torch.library.register_fake(add_op_namespace_prefix("attention_out"))
def _attention_out_fake(
    out: torch.Tensor,
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    attn_mask: torch.Tensor | None,
    scale: float,
    causal: bool,
    window_left: int,
    window_right: int,
    softcap: float,
) -> None:
    return None
