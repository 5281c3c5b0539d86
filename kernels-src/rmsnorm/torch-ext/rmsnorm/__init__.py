"""RMSNorm kernels for PyTorch: rms_norm, fused add + rms_norm, the gated norm of gated
delta nets and Mamba-2 (``rms_norm_gated``), SwiGLU's silu_mul and the
decoder-layer fusions around them (``swiglu_mlp``, ``layers.MLP``, ``layers.DecoderLayer``).

Reduced-precision inputs (bf16/fp16) are computed in float32 and rounded the
way Transformers' ``LlamaRMSNorm`` rounds (``weight * normed.to(dtype)``), so a
layer swapped for :class:`layers.RMSNorm` gives the same numbers up to the
order of the float32 sum. Every function accepts ``out=`` to write a
preallocated tensor (no autograd then, as in PyTorch).
"""

from __future__ import annotations

from . import _autograd, _fake, layers
from ._functional import (
    add_rms_norm,
    cpu_capability,
    fused_add_rms_norm,
    gemma_rms_norm,
    rms_norm,
    set_cpu_capability,
    silu_mul,
    swiglu_mlp,
)
from ._gated import rms_norm_gated

__all__ = [
    "add_rms_norm",
    "cpu_capability",
    "fused_add_rms_norm",
    "gemma_rms_norm",
    "layers",
    "rms_norm",
    "rms_norm_gated",
    "set_cpu_capability",
    "silu_mul",
    "swiglu_mlp",
]

# Imported for their side effects: fake implementations and autograd formulas.
del _autograd, _fake
