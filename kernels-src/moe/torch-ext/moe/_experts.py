"""The fused experts op and its Transformers experts-interface entry point.

Transformers' experts classes (``@use_experts_implementation``) hold every expert's
weights as two 3-D parameters: ``gate_up_proj`` ``[E, 2I, H]`` and ``down_proj``
``[E, H, I]`` (``[E, H, 2I]`` and ``[E, I, H]`` when ``is_transposed``), optional biases
``gate_up_proj_bias``/``down_proj_bias``, and route through
``config._experts_implementation``. The op covers the default gate ``act(gate) * up``
over concatenated halves with SiLU or GELU, and gpt-oss's clamped SwiGLU over alternating
columns (recognised by running the module's own ``_apply_gate`` on a probe, not by its
name); :func:`unsupported_reason` names what a module has beyond that (a post-expert
norm, expert parallelism, another gate), so a caller keeps PyTorch for it instead of
computing something else.
"""

from __future__ import annotations

import functools
import types
from typing import NamedTuple

import torch
from torch import nn

from ._ops import ops

ACTIVATIONS = {
    "SiLU": 0, "SiLUActivation": 0,
    "GELU": 1, "GELUActivation": 1,
    "GELUTanh": 2, "PytorchGELUTanh": 2, "NewGELUActivation": 2, "GELUTanhActivation": 2,
}
"""Class name of a module's ``act_fn`` → the op's activation code (0 silu, 1 gelu, 2 gelu
tanh). ``nn.GELU`` counts as erf GELU only with ``approximate="none"``. Code 3, gpt-oss's
clamped SwiGLU, comes from the module's ``_apply_gate``, not its ``act_fn``."""

CLAMPED_SWIGLU = 3

_LAYOUT = {"has_gate": True, "has_post_expert_norm": False, "_is_expert_parallel": False}


class Gate(NamedTuple):
    """How the op applies a module's gate: activation code, gate/up columns alternating,
    and gpt-oss's ``alpha`` and ``limit`` (unused by codes 0-2)."""

    activation: int
    interleaved: bool = False
    alpha: float = 1.702
    limit: float = 7.0


def _clamped_swiglu(gate_up: torch.Tensor, alpha: float, limit: float) -> torch.Tensor:
    gate, up = gate_up[..., ::2].clamp(max=limit), gate_up[..., 1::2].clamp(-limit, limit)
    return (up + 1) * gate * torch.sigmoid(gate * alpha)


@functools.lru_cache(maxsize=64)
def _gate_is_clamped_swiglu(cls: type, alpha: float, limit: float) -> bool:
    """Whether ``cls._apply_gate`` computes gpt-oss's clamped SwiGLU with these constants:
    run once per class and constants on a probe that crosses both clamps."""
    probe = torch.linspace(-2.5 * limit, 2.5 * limit, 96).reshape(3, 32)
    module = types.SimpleNamespace(alpha=alpha, limit=limit)
    try:
        with torch.no_grad():
            got = cls._apply_gate(module, probe.clone())
    except Exception:  # any failure means "not this gate"
        return False
    want = _clamped_swiglu(probe, alpha, limit)
    return (isinstance(got, torch.Tensor) and got.shape == want.shape
            and torch.allclose(got, want, rtol=1e-5, atol=1e-5))


def _gate(module: nn.Module) -> Gate | None:
    """The op's form of ``module``'s gate, or None when the op has no such gate."""
    apply_gate = getattr(type(module), "_apply_gate", None)
    if apply_gate is not None and getattr(apply_gate, "__name__", "") != "_default_apply_gate":
        alpha, limit = getattr(module, "alpha", None), getattr(module, "limit", None)
        if (isinstance(alpha, (int, float)) and isinstance(limit, (int, float))
                and _gate_is_clamped_swiglu(type(module), float(alpha), float(limit))):
            return Gate(CLAMPED_SWIGLU, True, float(alpha), float(limit))
        return None
    if getattr(module, "is_concatenated", True) is not True:
        return None
    act = getattr(module, "act_fn", None)
    code = ACTIVATIONS.get(type(act).__name__)
    if isinstance(act, nn.GELU) and act.approximate != "none":
        code = 2 if act.approximate == "tanh" else None
    return None if code is None else Gate(code)


def unsupported_reason(module: nn.Module, hidden_states: torch.Tensor | None = None
                       ) -> str | None:
    """Why :func:`experts_forward` cannot serve ``module`` (and this input), or None."""
    for attr, want in _LAYOUT.items():
        if getattr(module, attr, want) != want:
            return f"{attr}={getattr(module, attr)!r} (the kernel serves {attr}={want!r})"
    if _gate(module) is None:
        gate = getattr(type(module), "_apply_gate", None)
        if gate is not None and getattr(gate, "__name__", "") != "_default_apply_gate":
            return (f"{type(module).__name__} has its own _apply_gate (the kernel serves the "
                    "default gate and gpt-oss's clamped SwiGLU)")
        if getattr(module, "is_concatenated", True) is not True:
            return "is_concatenated=False with the default gate"
        return f"activation {type(getattr(module, 'act_fn', None)).__name__} is not served"
    gate_up, down = getattr(module, "gate_up_proj", None), getattr(module, "down_proj", None)
    if not isinstance(gate_up, torch.Tensor) or not isinstance(down, torch.Tensor):
        return "no 3-D gate_up_proj / down_proj parameters"
    biases = _biases(module)
    if getattr(module, "has_bias", False) and biases is None:
        return "has_bias=True without gate_up_proj_bias / down_proj_bias tensors"
    if hidden_states is not None:
        if hidden_states.device.type != "cpu":
            return f"no {hidden_states.device.type} kernels in this build"
        if hidden_states.dtype not in (torch.float32, torch.bfloat16):
            return f"dtype {hidden_states.dtype} (float32 and bfloat16 are served)"
        if gate_up.dtype != hidden_states.dtype or any(
                b.dtype != hidden_states.dtype for b in biases or ()):
            return f"weights in {gate_up.dtype}, activations in {hidden_states.dtype}"
        if torch.is_grad_enabled() and (hidden_states.requires_grad or gate_up.requires_grad):
            return "a backward pass is needed (the kernel has none)"
    return None


def _biases(module: nn.Module) -> tuple[torch.Tensor, torch.Tensor] | None:
    if not getattr(module, "has_bias", False):
        return None
    gate_up_bias = getattr(module, "gate_up_proj_bias", None)
    down_bias = getattr(module, "down_proj_bias", None)
    if isinstance(gate_up_bias, torch.Tensor) and isinstance(down_bias, torch.Tensor):
        return gate_up_bias, down_bias
    return None


def experts(hidden: torch.Tensor, top_k_index: torch.Tensor, top_k_weights: torch.Tensor,
            gate_up: torch.Tensor, down: torch.Tensor, activation: int = 0, *,
            gate_up_bias: torch.Tensor | None = None, down_bias: torch.Tensor | None = None,
            transposed: bool = False, interleaved: bool = False, alpha: float = 1.702,
            limit: float = 7.0, gemm_rows: int = -1) -> torch.Tensor:
    """``sum_k w[t, k] * (down_e(gate(gate_up_e(x_t) + b1_e)) + b2_e)`` for
    ``e = top_k_index[t, k]``.

    ``hidden`` ``[T, H]``; ``top_k_index``/``top_k_weights`` ``[T, K]``; ``gate_up``
    ``[E, 2I, H]`` and ``down`` ``[E, H, I]`` (``[E, H, 2I]``, ``[E, I, H]`` when
    ``transposed``); biases ``[E, 2I]`` and ``[E, H]``, both or neither. ``activation`` 3
    is gpt-oss's clamped SwiGLU with ``alpha`` and ``limit``; ``interleaved``: gate and up
    alternate by column instead of being the two halves. ``gemm_rows`` overrides the
    per-CPU table of from how many rows an expert's GEMMs go to ATen (benchmarks, tests).
    Slots with an index outside ``[0, E)`` contribute nothing.
    """
    out: torch.Tensor = ops.moe_experts(hidden, top_k_index, top_k_weights, gate_up, down,
                                        activation, gate_up_bias, down_bias, transposed,
                                        interleaved, alpha, limit, gemm_rows)
    return out


def experts_forward(self: nn.Module, hidden_states: torch.Tensor, top_k_index: torch.Tensor,
                    top_k_weights: torch.Tensor) -> torch.Tensor:
    """Transformers' experts-interface function (``ALL_EXPERTS_FUNCTIONS``) over the op.

    Callers check :func:`unsupported_reason` first; a module it refuses raises here
    rather than compute with a layout the op does not have.
    """
    if (reason := unsupported_reason(self, hidden_states)) is not None:
        raise ValueError(f"moe.experts_forward cannot serve {type(self).__name__}: {reason}")
    gate = _gate(self)
    assert gate is not None  # unsupported_reason checked it
    gate_up = self.gate_up_proj
    down = self.down_proj
    assert isinstance(gate_up, torch.Tensor) and isinstance(down, torch.Tensor)
    biases = _biases(self)
    return experts(hidden_states, top_k_index, top_k_weights, gate_up, down, gate.activation,
                   gate_up_bias=None if biases is None else biases[0],
                   down_bias=None if biases is None else biases[1],
                   transposed=bool(getattr(self, "is_transposed", False)),
                   interleaved=gate.interleaved, alpha=gate.alpha, limit=gate.limit)
