"""Drop-in layers: ``kernelize`` swaps a model layer's ``forward`` for one of these.

They are pure layers (no ``__init__``, no state or methods of their own, only
``forward``), because their ``forward`` runs on the replaced layer's instance
and reads its attributes: ``weight`` and ``variance_epsilon`` for Llama/Qwen3
style ``*RMSNorm``, ``weight`` and ``eps`` for Gemma's. Inputs the kernel does
not take (a weight of another dtype than the activations) run the exact
PyTorch formula of that model instead, so swapping never changes what a model
computes beyond float32 summation order.

``RMSNormMLP`` is a fused kernel for module fusion: it runs on a module laid
out like :class:`RMSNormMLPLayout` (a post-attention norm and a SwiGLU MLP).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ._functional import gemma_rms_norm, rms_norm, silu_mul


def _llama_reference(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """LlamaRMSNorm.forward, for dtype combinations the kernel does not take."""
    hidden = x.to(torch.float32)
    variance = hidden.pow(2).mean(-1, keepdim=True)
    hidden = hidden * torch.rsqrt(variance + eps)
    return weight * hidden.to(x.dtype)


def _gemma_reference(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """GemmaRMSNorm.forward, for dtype combinations the kernel does not take."""
    hidden = x.float()
    hidden = hidden * torch.rsqrt(hidden.pow(2).mean(-1, keepdim=True) + eps)
    return (hidden * (1.0 + weight.float())).type_as(x)


def _llama_rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    if weight.dtype != x.dtype:
        return _llama_reference(x, weight, eps)
    return rms_norm(x, weight, eps)


class RMSNorm(nn.Module):
    """weight * x / sqrt(mean(x**2) + variance_epsilon) (Llama, Qwen3, Mistral, ...)."""

    has_backward: bool = True
    can_torch_compile: bool = True

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return _llama_rms_norm(hidden_states, self.weight, self.variance_epsilon)


class GemmaRMSNorm(nn.Module):
    """(1 + weight) * x / sqrt(mean(x**2) + eps), in float32, rounded once (Gemma)."""

    has_backward: bool = True
    can_torch_compile: bool = True

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        if self.weight.dtype != hidden_states.dtype:
            return _gemma_reference(hidden_states, self.weight, self.eps)
        return gemma_rms_norm(hidden_states, self.weight, self.eps)


class RMSNormMLPLayout(nn.Module):
    """The module structure :class:`RMSNormMLP` runs on (module fusion's companion class).

    Fusion gathers two neighbouring modules of a decoder layer under these
    attribute names:

    * ``post_attention_layernorm``: an RMSNorm holding ``weight`` and
      ``variance_epsilon`` (Llama/Qwen3 style);
    * ``mlp``: a SwiGLU MLP holding ``gate_proj``, ``up_proj`` and ``down_proj``
      (``nn.Linear``) and ``act_fn``, computing
      ``down_proj(act_fn(gate_proj(x)) * up_proj(x))``.

    ``required_attributes`` lists what each child must have, so a loader can
    check a candidate pair before fusing. Its own ``forward`` is the unfused
    PyTorch composition, the fallback wherever the kernel does not apply.
    """

    required_attributes: dict[str, tuple[str, ...]] = {
        "post_attention_layernorm": ("weight", "variance_epsilon"),
        "mlp": ("gate_proj", "up_proj", "down_proj"),
    }

    def __init__(self, post_attention_layernorm: nn.Module, mlp: nn.Module) -> None:
        super().__init__()
        self.post_attention_layernorm = post_attention_layernorm
        self.mlp = mlp

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return self.mlp(self.post_attention_layernorm(hidden_states))


def _activation_times_up(mlp: nn.Module, gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    """act_fn(gate) * up, fused when act_fn is SiLU (every Llama-style MLP)."""
    act_fn = getattr(mlp, "act_fn", None)
    if (
        act_fn is None
        or isinstance(act_fn, nn.SiLU)
        or type(act_fn).__name__
        in (
            "SiLU",
            "SiLUActivation",
        )
    ):
        return silu_mul(gate, up)
    return act_fn(gate) * up


class RMSNormMLP(nn.Module):
    """mlp(post_attention_layernorm(x)) with the rms_norm and silu_mul kernels.

    Runs on a module laid out like :class:`RMSNormMLPLayout`. The three
    projections stay PyTorch matmuls; the norm and the SwiGLU activation run
    as one pass each instead of four and three eager ops.
    """

    has_backward: bool = True
    can_torch_compile: bool = True

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        norm = self.post_attention_layernorm
        mlp = self.mlp
        normed = _llama_rms_norm(hidden_states, norm.weight, norm.variance_epsilon)
        gate = F.linear(normed, mlp.gate_proj.weight, mlp.gate_proj.bias)
        up = F.linear(normed, mlp.up_proj.weight, mlp.up_proj.bias)
        return mlp.down_proj(_activation_times_up(mlp, gate, up))
