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
``MLP`` and ``DecoderLayer`` are the forwards of a model's own MLP and decoder-layer
classes, with the SwiGLU activation, the residual adds and the post-attention norm
fused around the matmuls. ``Linear`` is ``nn.Linear``'s, with bfloat16 products widened
to float32 where the CPU has no native bfloat16 products (:mod:`._widen`).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from . import _widen
from ._functional import add_rms_norm, fused_swiglu, gemma_rms_norm, rms_norm
from ._gated import ACTIVATIONS, rms_norm_gated
from ._ops import add_op_namespace_prefix

_HAS_CPU_KERNELS = torch._C._dispatch_has_kernel_for_dispatch_key(
    add_op_namespace_prefix("rms_norm_gated"), "CPU")
"""Whether this build has the CPU gated norm (a CUDA build has none); read once at import,
so torch.compile sees a constant."""


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


def _gated_settings(norm: nn.Module) -> tuple[int, bool, str] | None:
    """(group size, norm before gate, activation) where ``norm``'s attributes say all of
    its computation, else None (its own forward runs).

    Two layouts say it: the classes Transformers registers as ``RMSNormGated`` (Qwen3.5,
    Qwen3-Next, Kimi Linear, OLMo hybrid, ...) hold ``activation`` (silu or sigmoid) and
    gate after the norm over the whole row; Falcon-H1's holds ``norm_before_gate`` and
    ``n_groups`` (silu). A module with groups but neither (Mamba-2's ``group_size``,
    which gates first) does not say its order, so it keeps its forward.
    """
    activation = getattr(norm, "activation", None)
    groups = getattr(norm, "n_groups", None)
    if isinstance(activation, str):
        if groups is not None or hasattr(norm, "group_size") or activation not in ACTIVATIONS:
            return None
        return 0, True, activation
    before = getattr(norm, "norm_before_gate", None)
    if isinstance(before, bool) and isinstance(groups, int) and groups > 0:
        hidden = norm.weight.shape[-1]
        return (hidden // groups if hidden % groups == 0 else -1), before, "silu"
    return None


class RMSNormGated(nn.Module):
    """rms_norm(x) * weight * act(gate) (or the gate first, per group), in float32 rounded
    once: the ``RMSNormGated`` of gated delta nets and Falcon-H1's mixer norm.

    Reads ``weight``, ``variance_epsilon`` and the attributes that say the variant (see
    :func:`_gated_settings`). Runs the model's own forward for what the CPU kernel does
    not take: another device, a weight or gate of another dtype or shape, a variant the
    attributes do not state, a missing gate where the model needs one.
    """

    has_backward: bool = True
    can_torch_compile: bool = True

    def forward(self, hidden_states: torch.Tensor, gate: torch.Tensor | None = None
                ) -> torch.Tensor:
        settings = _gated_settings(self)
        weight = self.weight
        needs_gate = isinstance(getattr(self, "activation", None), str)  # its forward uses it
        if (settings is None or settings[0] < 0 or hidden_states.device.type != "cpu"
                or not _HAS_CPU_KERNELS or weight.dtype != hidden_states.dtype
                or (gate is None and needs_gate)
                or (gate is not None and (gate.shape != hidden_states.shape
                                          or gate.dtype != hidden_states.dtype))):
            return type(self).forward(self, hidden_states, gate)
        group, before, activation = settings
        return rms_norm_gated(hidden_states, gate, weight, self.variance_epsilon, group,
                              before, activation)


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


def _is_silu(act_fn: object) -> bool:
    """Whether an MLP's ``act_fn`` is SiLU (every Llama-style MLP's, as ACT2FN builds it)."""
    return act_fn is None or isinstance(act_fn, nn.SiLU) or type(act_fn).__name__ in (
        "SiLU", "SiLUActivation")


_PROJECTIONS = ("gate_proj", "up_proj", "down_proj")


def _swiglu_projections(mlp: nn.Module, x: torch.Tensor) -> list[nn.Linear] | None:
    """``[gate_proj, up_proj, down_proj]`` when ``mlp`` computes
    ``down_proj(silu(gate_proj(x)) * up_proj(x))`` with plain ``nn.Linear`` projections of
    ``x``'s dtype; None for anything else (another activation, a quantised or adapter-wrapped
    projection), which then runs its own forward."""
    projections = [getattr(mlp, name, None) for name in _PROJECTIONS]
    if not _is_silu(getattr(mlp, "act_fn", None)):
        return None
    if not all(type(p) is nn.Linear and p.weight.dtype == x.dtype for p in projections):
        return None
    return projections  # type: ignore[return-value]


def _mlp(mlp: nn.Module, x: torch.Tensor, residual: torch.Tensor | None = None,
         residual_is_scratch: bool = False) -> torch.Tensor:
    """``mlp(x)`` (``+ residual``), fused where ``mlp`` is a plain SwiGLU MLP."""
    projections = _swiglu_projections(mlp, x)
    if projections is None:
        out = mlp(x)
        return out if residual is None else residual + out
    gate, up, down = projections
    return fused_swiglu(x, (gate.weight, up.weight, down.weight),
                        (gate.bias, up.bias, down.bias), residual, residual_is_scratch)


class RMSNormMLP(nn.Module):
    """mlp(post_attention_layernorm(x)) with the rms_norm kernel and the fused MLP.

    Runs on a module laid out like :class:`RMSNormMLPLayout`. The norm runs as one
    pass instead of four eager ops; the MLP as :class:`MLP` runs it.
    """

    has_backward: bool = True
    can_torch_compile: bool = True

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        norm = self.post_attention_layernorm
        mlp = self.mlp
        return _mlp(mlp, _llama_rms_norm(hidden_states, norm.weight, norm.variance_epsilon))


class MLP(nn.Module):
    """``down_proj(act_fn(gate_proj(x)) * up_proj(x))`` with SiLU: the MLP of Llama, Qwen2,
    Qwen3 and Mistral, fused.

    A decode step (up to ``GEMV_MAX_ROWS`` rows, CPU, no gradients) runs as one op that
    streams each weight once and never materialises gate and up; longer inputs keep the
    matrix products and run ``silu(gate) * up`` in one pass, in place. Any other MLP (another
    activation, quantised or adapter-wrapped projections) runs its own forward.
    """

    has_backward: bool = True
    can_torch_compile: bool = True

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if _swiglu_projections(self, x) is None:
            return type(self).forward(self, x)
        return _mlp(self, x)


class Linear(nn.Module):
    """``nn.Linear``'s forward, with bfloat16 products computed in float32 and rounded once
    on CPUs without native bfloat16 products: many rows widened, a decode step's few rows
    by the kernel's ``linear`` op (:mod:`._widen` says when and why). Any other input runs
    ``F.linear``, which is ``nn.Linear``'s own forward; a subclass of ``nn.Linear``
    (quantised, adapter-wrapped) runs its own forward."""

    has_backward: bool = True
    can_torch_compile: bool = True

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        if type(self) is not nn.Linear:
            return type(self).forward(self, input)
        return _widen.linear(input, self.weight, self.bias)  # decides once, per input


def _llama_norm(norm: nn.Module, x: torch.Tensor) -> bool:
    """Whether ``norm`` is a Llama-style RMSNorm (``weight``, ``variance_epsilon``) of ``x``'s dtype."""
    weight = getattr(norm, "weight", None)
    return (isinstance(weight, torch.Tensor) and weight.dtype == x.dtype
            and isinstance(getattr(norm, "variance_epsilon", None), float))


class DecoderLayer(nn.Module):
    """A pre-norm decoder layer (Llama, Qwen2, Qwen3, Mistral) with the work around its
    matmuls fused:

    * ``residual + attention`` and ``post_attention_layernorm`` of the sum in one pass
      (:func:`add_rms_norm`, both results new tensors: the layer's input is left alone);
    * the MLP as :class:`MLP` runs it, with the second residual added by the down
      projection itself (``addmm`` into the fresh sum, no separate add).

    Attention, its cache and the input norm run as the layer's own modules (kernelized or
    not). A layer of another structure runs its own forward.
    """

    has_backward: bool = True
    can_torch_compile: bool = True

    def forward(self, hidden_states: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        norm = self.post_attention_layernorm
        if args or not _llama_norm(norm, hidden_states):
            return type(self).forward(self, hidden_states, *args, **kwargs)
        attention, _ = self.self_attn(hidden_states=self.input_layernorm(hidden_states), **kwargs)
        normed, summed = add_rms_norm(attention, hidden_states, norm.weight, norm.variance_epsilon)
        return _mlp(self.mlp, normed, summed, residual_is_scratch=True)
