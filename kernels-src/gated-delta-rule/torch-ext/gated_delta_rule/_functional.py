"""The two entry points, with the signatures the Transformers modeling code calls.

Both accept and ignore the extra keyword arguments the models forward (attention
kwargs such as ``position_ids``), refuse packed sequences (``cu_seqlens``), which the
kernels do not keep apart, and default ``scale`` to ``key_dim ** -0.5`` as the models'
fallbacks do. Gradients, where an input needs one, come from ``_autograd``.
"""

from __future__ import annotations

from typing import Any

import torch

from ._autograd import ChunkGatedDeltaRule, needs_grad
from ._ops import ops


def _refuse_packed(name: str, cu_seqlens: Any) -> None:
    if cu_seqlens is not None:
        raise ValueError(
            f"{name}: packed sequences (cu_seqlens) are not supported by this kernel; "
            "pass one padded batch instead"
        )


def _scale(key: torch.Tensor, scale: float | None) -> float:
    return float(key.shape[-1]) ** -0.5 if scale is None else float(scale)


def chunk_gated_delta_rule(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    g: torch.Tensor,
    beta: torch.Tensor,
    chunk_size: int = 64,
    initial_state: torch.Tensor | None = None,
    output_final_state: bool = False,
    use_qk_l2norm_in_kernel: bool = False,
    scale: float | None = None,
    cu_seqlens: torch.Tensor | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The gated delta rule over a whole sequence, ``chunk_size`` tokens per step."""
    _refuse_packed("chunk_gated_delta_rule", cu_seqlens)
    args = (query, key, value, g, beta, _scale(key, scale), initial_state, use_qk_l2norm_in_kernel)
    if needs_grad(query, key, value, g, beta, initial_state):
        out, state = ChunkGatedDeltaRule.apply(*args, chunk_size)
    else:
        out, state = ops.chunk_gated_delta_rule_fwd(*args, chunk_size)
    return out, state if output_final_state else None


def fused_recurrent_gated_delta_rule(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    g: torch.Tensor,
    beta: torch.Tensor,
    initial_state: torch.Tensor | None = None,
    output_final_state: bool = False,
    use_qk_l2norm_in_kernel: bool = False,
    scale: float | None = None,
    cu_seqlens: torch.Tensor | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The gated delta rule one token at a time (decode)."""
    _refuse_packed("fused_recurrent_gated_delta_rule", cu_seqlens)
    args = (query, key, value, g, beta, _scale(key, scale), initial_state, use_qk_l2norm_in_kernel)
    if needs_grad(query, key, value, g, beta, initial_state):
        out, state = ChunkGatedDeltaRule.apply(*args, 64)
    else:
        out, state = ops.recurrent_gated_delta_rule_fwd(*args)
    return out, state if output_final_state else None


# Read by kernelize when it wraps these functions in pure layers: both have gradients
# (``_autograd``); torch.compile is left to PyTorch, since the backward's recompute
# calls autograd itself.
for _func in (chunk_gated_delta_rule, fused_recurrent_gated_delta_rule):
    _func.has_backward = True  # type: ignore[attr-defined]
    _func.can_torch_compile = False  # type: ignore[attr-defined]
del _func
