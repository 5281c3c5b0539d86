"""The backward of ``rotary``: a rotation's inverse is the rotation by ``-sin``.

For q and k the gradient is the same op with ``conj`` flipped and the two halves of
sin swapped: the transpose of ``[[c1, -s1], [s2, c2]]`` is ``[[c1, s2], [-s1, c2]]``,
which is the conjugate rotation only when both halves hold the same angles (as
Transformers' tables do); the swap keeps the gradient exact for any table. cos and sin (which
Transformers computes from positions, so they rarely need gradients) get theirs
from the product rule, summed over the heads and over any broadcast batch:
with ``y1 = x1*c1 - x2*s1`` and ``y2 = x2*c2 + x1*s2`` (signs of s flipped when
``conj``), ``dc1 = g1*x1``, ``dc2 = g2*x2``, ``ds1 = -g1*x2``, ``ds2 = g2*x1``.
"""

from __future__ import annotations

from typing import Any

import torch

from ._ops import add_op_namespace_prefix, ops


def _setup_context(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
    q, k, cos, sin, conj = inputs
    ctx.conj = conj
    ctx.table_grads = ctx.needs_input_grad[2] or ctx.needs_input_grad[3]
    ctx.save_for_backward(q, k, cos, sin)


def _table_grads(
    x: torch.Tensor, g: torch.Tensor, table: torch.Tensor, conj: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    """Gradients of cos and sin from one rotated tensor, in the shape of the table."""
    half = table.size(-1) // 2
    x1, x2 = x[..., :half], x[..., half : 2 * half]
    g1, g2 = g[..., :half], g[..., half : 2 * half]
    sign = -1.0 if conj else 1.0
    d_cos = torch.cat([g1 * x1, g2 * x2], dim=-1).sum(dim=1)  # over heads
    d_sin = torch.cat([-sign * g1 * x2, sign * g2 * x1], dim=-1).sum(dim=1)
    if table.dim() == 2:  # [seq, rot]: shared by the whole batch
        return d_cos.sum(dim=0), d_sin.sum(dim=0)
    if table.size(0) == 1:
        return d_cos.sum(dim=0, keepdim=True), d_sin.sum(dim=0, keepdim=True)
    return d_cos, d_sin


def _backward(
    ctx: Any, grad_q: torch.Tensor | None, grad_k: torch.Tensor | None
) -> tuple[torch.Tensor | None, ...]:
    q, k, cos, sin = ctx.saved_tensors
    grad_q = torch.zeros_like(q) if grad_q is None else grad_q
    grad_k = torch.zeros_like(k) if grad_k is None else grad_k
    half = sin.size(-1) // 2
    sin_swapped = torch.cat((sin[..., half:], sin[..., :half]), dim=-1)
    dq, dk = ops.rotary(grad_q, grad_k, cos, sin_swapped, not ctx.conj)
    d_cos = d_sin = None
    if ctx.table_grads:
        cq, sq = _table_grads(q, grad_q, cos, ctx.conj)
        ck, sk = _table_grads(k, grad_k, cos, ctx.conj)
        d_cos, d_sin = cq + ck, sq + sk
    return dq, dk, d_cos, d_sin, None


torch.library.register_autograd(
    add_op_namespace_prefix("rotary"), _backward, setup_context=_setup_context
)
