"""The gated RMSNorm of gated delta nets (Qwen3.5, Qwen3-Next, Kimi Linear, ...) and
Mamba-2 style mixers (Falcon-H1): ``rms_norm(x) * weight * act(gate)``, or with the gate
applied first, ``rms_norm(x * act(gate)) * weight``, per group of columns.

The kernel computes in float32 and rounds once. The models' own forwards differ in where
they round reduced-precision values (Qwen3.5 rounds ``x * rstd`` to the input dtype
before the weight, Kimi Linear keeps float32 throughout): the kernel's single rounding is
the exact result rounded, so it is within one unit in the last place of either.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ._ops import ops

ACTIVATIONS = ("silu", "sigmoid")


def reference(x: torch.Tensor, gate: torch.Tensor | None, weight: torch.Tensor, eps: float,
              group_size: int = 0, norm_before_gate: bool = True,
              activation: str = "silu") -> torch.Tensor:
    """The kernel's computation in PyTorch ops (float32, float64 for float64 inputs,
    rounded once): the oracle the tests hold the forward and the fused backward to."""
    act = F.silu if activation == "silu" else torch.sigmoid
    wide = torch.float64 if x.dtype == torch.float64 else torch.float32
    values = x.to(wide)
    if gate is not None and not norm_before_gate:
        values = values * act(gate.to(wide))
    shape = values.shape
    group = group_size or shape[-1]
    grouped = values.reshape(*shape[:-1], shape[-1] // group, group)
    grouped = grouped * torch.rsqrt(grouped.pow(2).mean(-1, keepdim=True) + eps)
    values = weight.to(wide) * grouped.reshape(shape)
    if gate is not None and norm_before_gate:
        values = values * act(gate.to(wide))
    return values.to(x.dtype)


def rms_norm_gated(x: torch.Tensor, gate: torch.Tensor | None, weight: torch.Tensor,
                   eps: float = 1e-6, group_size: int = 0, norm_before_gate: bool = True,
                   activation: str = "silu") -> torch.Tensor:
    """The gated norm of ``x`` ([..., hidden]) with ``gate`` (x's shape and dtype, or None),
    ``weight`` [hidden] of x's dtype, over groups of ``group_size`` columns (0: the row);
    ``activation`` is ``"silu"`` or ``"sigmoid"``. CPU tensors; differentiable."""
    return ops.rms_norm_gated(x, gate, weight, eps, group_size, norm_before_gate, activation)
