"""Meta implementations, so the ops trace under torch.compile (FakeTensor runs them).

Checks happen in the real kernel; the meta kernels only describe the results: the output
``[batch, seq, value_heads, value_dim]`` in the dtype of ``v`` and the float32 state
``[batch, value_heads, key_dim, value_dim]``; the conv gives ``[batch, keep, channels]`` in
the dtype of ``x``.

Registered as ``Meta`` kernels through one ``torch.library.Library`` rather than with
``torch.library.register_fake``: that walks ``sys.modules`` with ``inspect`` to name its
caller (milliseconds of every load), where this costs microseconds and serves FakeTensor,
``opcheck`` and ``torch.compile`` alike.
"""

from __future__ import annotations

import torch

from ._ops import add_op_namespace_prefix, ops


def _results(k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    batch, seq, heads, value_dim = v.shape
    out = v.new_empty((batch, seq, heads, value_dim))
    state = v.new_empty((batch, heads, k.shape[3], value_dim), dtype=torch.float32)
    return out, state


def _chunk_meta(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    g: torch.Tensor,
    beta: torch.Tensor,
    scale: float,
    initial_state: torch.Tensor | None,
    use_qk_l2norm: bool,
    chunk_size: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    return _results(k, v)


def _recurrent_meta(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    g: torch.Tensor,
    beta: torch.Tensor,
    scale: float,
    initial_state: torch.Tensor | None,
    use_qk_l2norm: bool,
) -> tuple[torch.Tensor, torch.Tensor]:
    return _results(k, v)


def _conv_meta(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    state: torch.Tensor | None,
    keep: int,
) -> torch.Tensor:
    return x.new_empty((x.shape[0], keep, x.shape[2]))


_LIB = torch.library.Library(add_op_namespace_prefix("").removesuffix("::"), "IMPL")
"""Kept for the life of the module: a Library's registrations end with it."""
_LIB.impl("chunk_gated_delta_rule_fwd", _chunk_meta, "Meta")
_LIB.impl("recurrent_gated_delta_rule_fwd", _recurrent_meta, "Meta")
# The conv op exists in CPU builds only.
if hasattr(ops, "causal_conv1d_silu"):
    _LIB.impl("causal_conv1d_silu", _conv_meta, "Meta")
