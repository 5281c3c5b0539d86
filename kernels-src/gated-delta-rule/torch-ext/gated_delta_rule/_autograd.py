"""Gradients for training (Transformers maps ``chunk_gated_delta_rule`` for TRAINING).

The forward runs the kernel and keeps only its inputs; the backward recomputes the
chunked form in differentiable PyTorch (``_recompute``) and lets autograd take its
gradient. That trades a second forward for not storing per-chunk states, and keeps one
definition of the maths for both passes' shapes and dtypes; a fused backward kernel can
replace the recompute without changing this interface.
"""

from __future__ import annotations

from typing import Any

import torch

from ._ops import ops
from ._recompute import chunked_gated_delta_rule


def needs_grad(*tensors: torch.Tensor | None) -> bool:
    """Whether autograd must track this call."""
    return torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in tensors)


class ChunkGatedDeltaRule(torch.autograd.Function):
    """Kernel forward, recomputing backward; returns (out, final_state)."""

    @staticmethod
    def forward(  # type: ignore[override]
        ctx: Any,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        g: torch.Tensor,
        beta: torch.Tensor,
        scale: float,
        initial_state: torch.Tensor | None,
        l2norm: bool,
        chunk_size: int,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        ctx.save_for_backward(q, k, v, g, beta, initial_state)
        ctx.config = (scale, l2norm, chunk_size)
        return ops.chunk_gated_delta_rule_fwd(
            q, k, v, g, beta, scale, initial_state, l2norm, chunk_size
        )

    @staticmethod
    def backward(  # type: ignore[override]
        ctx: Any, grad_out: torch.Tensor | None, grad_state: torch.Tensor | None
    ) -> tuple[torch.Tensor | None, ...]:
        saved = ctx.saved_tensors
        scale, l2norm, chunk_size = ctx.config
        needs = (*ctx.needs_input_grad[:5], ctx.needs_input_grad[6])  # the tensor arguments
        inputs = [
            t.detach().requires_grad_(need) if t is not None else None
            for t, need in zip(saved, needs, strict=True)
        ]
        wanted = [t for t in inputs if t is not None and t.requires_grad]
        pairs = (
            [
                (r, g)
                for r, g in zip(
                    recomputed(inputs, scale, l2norm, chunk_size),
                    (grad_out, grad_state),
                    strict=True,
                )
                if g is not None
            ]
            if wanted
            else []
        )
        grads = dict.fromkeys(map(id, inputs))
        if pairs:
            found = torch.autograd.grad(
                [r for r, _ in pairs], wanted, [g.to(r.dtype) for r, g in pairs], allow_unused=True
            )
            grads.update(zip(map(id, wanted), found, strict=True))
        result = [
            None if t is None or grads[id(t)] is None else grads[id(t)].to(t.dtype) for t in inputs
        ]
        return (*result[:5], None, result[5], None, None)


def recomputed(
    inputs: list[torch.Tensor | None], scale: float, l2norm: bool, chunk_size: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """The forward again, in differentiable PyTorch, with autograd recording."""
    q, k, v, g, beta, initial_state = inputs
    assert q is not None and k is not None and v is not None and g is not None and beta is not None
    with torch.enable_grad():
        return chunked_gated_delta_rule(q, k, v, g, beta, scale, initial_state, l2norm, chunk_size)
