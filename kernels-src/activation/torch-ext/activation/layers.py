"""Drop-in layers: ``kernelize`` swaps a model layer's ``forward`` for one of these.

They are "pure" layers (no ``__init__``, no state of their own, only ``forward``),
because their ``forward`` runs on the replaced layer's instance: ``FatreluAndMul``
reads the ``threshold`` attribute that the model's own layer carries.
The kernels have no backward yet, so ``has_backward`` is False; fake
implementations are registered, so they trace under ``torch.compile``.
"""

from __future__ import annotations

import torch
from torch import nn

from . import _buffers
from ._ops import ops


def _gated_out(x: torch.Tensor) -> torch.Tensor:
    return _buffers.empty((*x.shape[:-1], x.shape[-1] // 2), x)


def _same_out(x: torch.Tensor) -> torch.Tensor:
    return _buffers.empty(tuple(x.shape), x)


class SiluAndMul(nn.Module):
    """silu(x[..., :d]) * x[..., d:]"""

    has_backward: bool = False
    can_torch_compile: bool = True

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = _gated_out(x)
        ops.silu_and_mul(out, x)
        return out


class MulAndSilu(nn.Module):
    """x[..., :d] * silu(x[..., d:])"""

    has_backward: bool = False
    can_torch_compile: bool = True

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = _gated_out(x)
        ops.mul_and_silu(out, x)
        return out


class GeluAndMul(nn.Module):
    """gelu(x[..., :d]) * x[..., d:] (exact erf gelu)"""

    has_backward: bool = False
    can_torch_compile: bool = True

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = _gated_out(x)
        ops.gelu_and_mul(out, x)
        return out


class GeluTanhAndMul(nn.Module):
    """gelu_tanh(x[..., :d]) * x[..., d:]"""

    has_backward: bool = False
    can_torch_compile: bool = True

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = _gated_out(x)
        ops.gelu_tanh_and_mul(out, x)
        return out


class FatreluAndMul(nn.Module):
    """where(a > self.threshold, a, 0) * x[..., d:], a = x[..., :d]

    ``threshold`` is the replaced layer's attribute (0.0 where it has none).
    """

    has_backward: bool = False
    can_torch_compile: bool = True

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = _gated_out(x)
        ops.fatrelu_and_mul(out, x, float(getattr(self, "threshold", 0.0)))
        return out


class FastGELU(nn.Module):
    """0.5 * x * (1 + tanh(x * 0.7978845608 * (1 + 0.044715 * x * x)))"""

    has_backward: bool = False
    can_torch_compile: bool = True

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = _same_out(x)
        ops.gelu_fast(out, x)
        return out


class NewGELU(nn.Module):
    """0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x**3)))"""

    has_backward: bool = False
    can_torch_compile: bool = True

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = _same_out(x)
        ops.gelu_new(out, x)
        return out


class QuickGELU(nn.Module):
    """x * sigmoid(1.702 * x)"""

    has_backward: bool = False
    can_torch_compile: bool = True

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = _same_out(x)
        ops.gelu_quick(out, x)
        return out


class Silu(nn.Module):
    """x * sigmoid(x)"""

    has_backward: bool = False
    can_torch_compile: bool = True

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = _same_out(x)
        ops.silu(out, x)
        return out


class Gelu(nn.Module):
    """0.5 * x * (1 + erf(x / sqrt(2)))"""

    has_backward: bool = False
    can_torch_compile: bool = True

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = _same_out(x)
        ops.gelu(out, x)
        return out


class GeluTanh(nn.Module):
    """0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x**3)))"""

    has_backward: bool = False
    can_torch_compile: bool = True

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = _same_out(x)
        ops.gelu_tanh(out, x)
        return out


__all__ = [
    "FastGELU",
    "FatreluAndMul",
    "Gelu",
    "GeluAndMul",
    "GeluTanh",
    "GeluTanhAndMul",
    "MulAndSilu",
    "NewGELU",
    "QuickGELU",
    "Silu",
    "SiluAndMul",
]
