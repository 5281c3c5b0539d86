"""Flash-style attention: blocked, online softmax, never materialising Sq x Sk.

Three entry points over one op:

* :func:`attention` — torch's layout ``[batch, heads, seq, head_dim]``;
* :func:`flash_attn_func` / :func:`flash_attn_varlen_func` — FlashAttention-2's
  signatures and layouts (``[batch, seq, heads, head_dim]``, packed varlen);
* :func:`attention_forward` — Transformers' attention-interface signature.

Causal masks are bottom-right aligned when ``seq_q != seq_k`` (FlashAttention-2's
convention, so a decode step sees its whole KV cache); grouped-query attention
needs ``heads_q`` to be a multiple of ``heads_kv``; float32, bfloat16 and float16
are computed in float32 (bfloat16 products, accumulated in float32, where the CPU
has avx512_bf16 or AMX). Rows that see no key are zeros.
"""

from __future__ import annotations

from . import _fake
from ._ops import ops
from .interface import attention, flash_attn_func, flash_attn_varlen_func
from .transformers_interface import attention_forward

__all__ = [
    "attention",
    "attention_dispatch_decisions",
    "attention_forward",
    "cpu_capability",
    "flash_attn_func",
    "flash_attn_varlen_func",
    "set_attention_dispatch",
    "set_cpu_capability",
]

# Registered for its side effect: fake (meta) implementations for torch.compile.
del _fake


def cpu_capability() -> str:
    """The loops the CPU op runs: ``DEFAULT``, ``AVX2``, ``AVX512``, ``AVX512_BF16`` (bf16
    inputs multiplied in bf16, where the CPU has avx512_bf16) or ``BRGEMM_BF16`` (bf16
    products by oneDNN's brgemm: AMX tiles, chosen where the CPU has them)."""
    return ops.cpu_capability()


def set_cpu_capability(capability: str) -> str:
    """Run the CPU op on other compiled loops (one this CPU supports).

    For tests and benchmarks that compare the loops; returns the previous choice.
    """
    return ops.set_cpu_capability(capability)


def set_attention_dispatch(mode: str) -> str:
    """How the CPU op chooses, per shape, between these loops and torch's own sdpa where
    both compute the same attention (no mask, softcap or window; causal with Sq == Sk or
    one query): ``"auto"`` (the default; the first call of a shape bucket times both and
    the faster runs from then on), ``"kernel"`` (always these loops: bitwise repeatable
    run to run) or ``"torch"``. The environment variable ``FLASH_ATTN2_DISPATCH`` sets the
    initial mode. Returns the previous mode."""
    return ops.set_attention_dispatch(mode)


def attention_dispatch_decisions() -> list[str]:
    """The choices ``"auto"`` made in this process, one line per shape bucket: the shape,
    what runs, and both best times."""
    return list(ops.attention_dispatch_decisions())
