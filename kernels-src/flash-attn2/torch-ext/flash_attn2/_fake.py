"""Meta implementations, so the ops trace under torch.compile (FakeTensor runs them).

Shape and dtype checks happen in the real kernel; the meta kernel only describes the
result: ``attention`` returns ``[batch, heads_q, seq_q, head_dim_v]`` in the query's
dtype, laid out as the CPU op lays it out. ``attention_out`` only writes its ``out``
argument and returns nothing, so torch derives its fake itself.

Registered as a ``Meta`` kernel through a ``torch.library.Library`` rather than with
``torch.library.register_fake``: that walks ``sys.modules`` with ``inspect`` to name its
caller, about 5 ms of every load, where this costs microseconds and serves FakeTensor,
``opcheck`` and ``torch.compile`` alike.
"""

from __future__ import annotations

import torch

from ._ops import add_op_namespace_prefix


def _attention_meta(
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


_LIB = torch.library.Library(add_op_namespace_prefix("").removesuffix("::"), "IMPL")
"""Kept for the life of the module: a Library's registrations end with it."""
_LIB.impl("attention", _attention_meta, "Meta")
