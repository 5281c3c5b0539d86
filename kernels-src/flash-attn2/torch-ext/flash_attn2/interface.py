"""The Python entry points: torch's layout and FlashAttention-2's signatures.

FlashAttention-2 options this kernel cannot honour (dropout, ALiBi, returning the
probabilities, paged KV caches) raise ``NotImplementedError`` naming the option,
rather than silently computing something else.
"""

from __future__ import annotations

import math

import torch

from ._ops import ops


def _window(window_size: tuple[int, int] | list[int]) -> tuple[int, int]:
    left, right = (int(w) for w in window_size)
    return left, right


def _unsupported(**options: object) -> None:
    for name, value in options.items():
        if value:
            raise NotImplementedError(
                f"flash_attn2 (kernelhub) does not support {name}={value!r}: this is an "
                "inference kernel without it; leave it at its default or use another "
                "attention implementation"
            )


def attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attn_mask: torch.Tensor | None = None,
    *,
    scale: float | None = None,
    causal: bool = False,
    window_size: tuple[int, int] = (-1, -1),
    softcap: float = 0.0,
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    """Attention in torch's layout: q ``[B, Hq, Sq, D]``, k/v ``[B, Hkv, Sk, D(v)]``.

    ``attn_mask`` is bool (True = attend) or additive float, broadcastable to
    ``[B, Hq, Sq, Sk]``. ``window_size = (left, right)`` limits each query to keys
    ``[i + Sk - Sq - left, i + Sk - Sq + right]`` (-1 = unbounded). ``softcap > 0``
    applies ``softcap * tanh(score / softcap)``. With ``out`` (``[B, Hq, Sq, Dv]``,
    any strides, e.g. a transposed ``[B, Sq, Hq, Dv]`` buffer) the result is written
    there and no new tensor is allocated. Without it the result is laid out as torch's
    CPU sdpa lays out its own (a transposed ``[B, Sq, Hq, Dv]`` buffer where the query is
    one, else contiguous): where the CPU op hands a shape to sdpa, that is sdpa's own
    tensor, with nothing allocated or copied around it.
    """
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else float(scale)
    left, right = _window(window_size)
    if out is None:
        return ops.attention(query, key, value, attn_mask, scale, causal, left, right, softcap)
    ops.attention_out(out, query, key, value, attn_mask, scale, causal, left, right, softcap)
    return out


def flash_attn_func(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    dropout_p: float = 0.0,
    softmax_scale: float | None = None,
    causal: bool = False,
    window_size: tuple[int, int] = (-1, -1),
    softcap: float = 0.0,
    alibi_slopes: torch.Tensor | None = None,
    deterministic: bool = False,
    return_attn_probs: bool = False,
) -> torch.Tensor:
    """FlashAttention-2's ``flash_attn_func``: q ``[B, Sq, Hq, D]``, k/v ``[B, Sk, Hkv, D]``.

    Returns ``[B, Sq, Hq, Dv]``. ``deterministic`` is accepted and always holds:
    the forward pass has a fixed reduction order.
    """
    _unsupported(
        dropout_p=dropout_p,
        alibi_slopes=alibi_slopes is not None,
        return_attn_probs=return_attn_probs,
    )
    return attention(
        q.transpose(1, 2),
        k.transpose(1, 2),
        v.transpose(1, 2),
        scale=softmax_scale,
        causal=causal,
        window_size=window_size,
        softcap=softcap,
    ).transpose(1, 2)


def flash_attn_varlen_func(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    cu_seqlens_q: torch.Tensor,
    cu_seqlens_k: torch.Tensor,
    max_seqlen_q: int,
    max_seqlen_k: int,
    dropout_p: float = 0.0,
    softmax_scale: float | None = None,
    causal: bool = False,
    window_size: tuple[int, int] = (-1, -1),
    softcap: float = 0.0,
    alibi_slopes: torch.Tensor | None = None,
    deterministic: bool = False,
    return_attn_probs: bool = False,
    block_table: torch.Tensor | None = None,
) -> torch.Tensor:
    """FlashAttention-2's varlen form: sequences packed as q ``[total_q, Hq, D]``.

    Sequence ``i`` is rows ``cu_seqlens_q[i]:cu_seqlens_q[i+1]`` of q (and likewise
    of k/v with ``cu_seqlens_k``); each attends only within itself, causal masks
    bottom-right aligned per sequence. Returns ``[total_q, Hq, Dv]``.
    """
    _unsupported(
        dropout_p=dropout_p,
        alibi_slopes=alibi_slopes is not None,
        return_attn_probs=return_attn_probs,
        block_table=block_table is not None,
    )
    if cu_seqlens_q.numel() != cu_seqlens_k.numel():
        raise ValueError(
            f"cu_seqlens_q and cu_seqlens_k must describe the same number of sequences, got "
            f"{cu_seqlens_q.numel()} and {cu_seqlens_k.numel()} offsets"
        )
    out = q.new_empty((q.shape[0], q.shape[1], v.shape[-1]))
    starts_q = cu_seqlens_q.tolist()
    starts_k = cu_seqlens_k.tolist()
    for i in range(len(starts_q) - 1):
        q0, q1, k0, k1 = starts_q[i], starts_q[i + 1], starts_k[i], starts_k[i + 1]
        if q1 == q0:
            continue

        def heads_first(t: torch.Tensor, a: int, b: int) -> torch.Tensor:
            return t[a:b].unsqueeze(0).transpose(1, 2)  # [1, H, s, D], a view

        attention(
            heads_first(q, q0, q1),
            heads_first(k, k0, k1),
            heads_first(v, k0, k1),
            scale=softmax_scale,
            causal=causal,
            window_size=window_size,
            softcap=softcap,
            out=heads_first(out, q0, q1),
        )
    return out


# An inference kernel: kernelize and the Transformers integration keep PyTorch when
# training (the ecosystem's default for a kernel that says nothing is "has a backward").
flash_attn_func.has_backward = False  # type: ignore[attr-defined]
flash_attn_varlen_func.has_backward = False  # type: ignore[attr-defined]
