"""``attention_forward``: the signature of Transformers' attention interface.

Drop-in for ``transformers.integrations.sdpa_attention.sdpa_attention_forward``:
the same inputs (``[B, H, S, D]`` query/key/value, Transformers' 4-D bool or
additive mask) and the same decisions (causal only for a multi-token query with
no mask; a static-cache prefill crops the keys to the query length), returning
``(attn_output [B, S, H, D], None)``. GQA needs no repeated key/value heads.
"""

from __future__ import annotations

from typing import Any

import torch

from .interface import attention


def _position_bias_mask(
    position_bias: torch.Tensor,
    attention_mask: torch.Tensor | None,
    is_causal: bool,
    query: torch.Tensor,
    key: torch.Tensor,
) -> torch.Tensor:
    """A learned bias folded into the additive mask, as Transformers' sdpa path does."""
    if attention_mask is None:
        if not is_causal:
            return position_bias
        q_len, k_len = query.shape[2], key.shape[2]
        keep = torch.ones(q_len, k_len, dtype=torch.bool, device=key.device).tril()
        return position_bias.masked_fill(~keep, float("-inf"))
    if attention_mask.dtype == torch.bool:
        return position_bias.masked_fill(~attention_mask, float("-inf"))
    return position_bias + attention_mask


def attention_forward(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float | None = None,
    dropout: float = 0.0,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """Transformers' attention interface on this kernel.

    ``is_causal`` comes from ``kwargs`` or ``module.is_causal`` (default True);
    ``softcap`` and ``position_bias`` kwargs are honoured; a sliding window comes
    in ``attention_mask``, as for sdpa (Transformers builds it into the mask);
    ``dropout`` > 0 raises ``NotImplementedError`` (inference kernel).
    """
    if dropout and module.training:
        raise NotImplementedError(
            f"flash_attn2 (kernelhub) does not support dropout={dropout!r} in training: "
            "this is an inference kernel; use eager or sdpa attention to train with dropout"
        )
    q_len = query.shape[2]
    is_causal = kwargs.get("is_causal")
    is_causal = getattr(module, "is_causal", True) if is_causal is None else is_causal
    is_causal = bool(q_len > 1 and attention_mask is None and is_causal)
    if is_causal and key.shape[2] > q_len:
        # A prefill into an empty static cache: the keys past the query length are
        # padding (Transformers' sdpa path crops them the same way).
        key, value = key[:, :, :q_len], value[:, :, :q_len]
    position_bias = kwargs.get("position_bias")
    mask = attention_mask
    if position_bias is not None:
        mask = _position_bias_mask(position_bias, attention_mask, is_causal, query, key)
        is_causal = False
    softcap = kwargs.get("softcap") or 0.0
    # For Transformers' query (a transposed [B, S, H, D] projection) the op returns a
    # transposed [B, S, H, D] buffer, so the contiguous() of its sdpa path is a no-op here,
    # and a shape the CPU op hands to sdpa comes back as sdpa's own tensor.
    out = attention(query, key, value, mask, scale=scaling, causal=is_causal, softcap=softcap)
    return out.transpose(1, 2).contiguous(), None


# An inference kernel: the Transformers integration keeps its own attention when training.
attention_forward.has_backward = False  # type: ignore[attr-defined]
