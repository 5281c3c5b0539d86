"""The fused experts op and its Transformers experts-interface entry point.

Transformers' experts classes (``@use_experts_implementation``) hold every expert's
weights as two 3-D parameters: ``gate_up_proj`` ``[E, 2I, H]`` and ``down_proj``
``[E, H, I]``, and route through ``config._experts_implementation``. The op covers the
layout most models use (gate and up concatenated, not transposed, no bias, the default
gate ``act(gate) * up``, no post-expert norm, no expert parallelism) with SiLU or GELU;
:func:`unsupported_reason` names what a module has beyond that, so a caller keeps
PyTorch for it instead of computing something else.
"""

from __future__ import annotations

import torch
from torch import nn

from ._ops import ops

ACTIVATIONS = {
    "SiLU": 0, "SiLUActivation": 0,
    "GELU": 1, "GELUActivation": 1,
    "GELUTanh": 2, "PytorchGELUTanh": 2, "NewGELUActivation": 2, "GELUTanhActivation": 2,
}
"""Class name of a module's ``act_fn`` → the op's activation code (0 silu, 1 gelu, 2 gelu
tanh). ``nn.GELU`` counts as erf GELU only with ``approximate="none"``."""

_LAYOUT = {"has_gate": True, "is_concatenated": True, "is_transposed": False,
           "has_bias": False, "has_post_expert_norm": False, "_is_expert_parallel": False}


def _activation(module: nn.Module) -> int | None:
    act = getattr(module, "act_fn", None)
    code = ACTIVATIONS.get(type(act).__name__)
    if isinstance(act, nn.GELU) and act.approximate != "none":
        return 2 if act.approximate == "tanh" else None
    return code


def unsupported_reason(module: nn.Module, hidden_states: torch.Tensor | None = None
                       ) -> str | None:
    """Why :func:`experts_forward` cannot serve ``module`` (and this input), or None."""
    for attr, want in _LAYOUT.items():
        if getattr(module, attr, want) != want:
            return f"{attr}={getattr(module, attr)!r} (the kernel serves {attr}={want!r})"
    gate = getattr(type(module), "_apply_gate", None)
    if gate is not None and getattr(gate, "__name__", "") != "_default_apply_gate":
        return f"{type(module).__name__} has its own _apply_gate"
    if _activation(module) is None:
        return f"activation {type(getattr(module, 'act_fn', None)).__name__} is not served"
    gate_up, down = getattr(module, "gate_up_proj", None), getattr(module, "down_proj", None)
    if not isinstance(gate_up, torch.Tensor) or not isinstance(down, torch.Tensor):
        return "no 3-D gate_up_proj / down_proj parameters"
    if hidden_states is not None:
        if hidden_states.device.type != "cpu":
            return f"no {hidden_states.device.type} kernels in this build"
        if hidden_states.dtype not in (torch.float32, torch.bfloat16):
            return f"dtype {hidden_states.dtype} (float32 and bfloat16 are served)"
        if gate_up.dtype != hidden_states.dtype:
            return f"weights in {gate_up.dtype}, activations in {hidden_states.dtype}"
        if torch.is_grad_enabled() and (hidden_states.requires_grad or gate_up.requires_grad):
            return "a backward pass is needed (the kernel has none)"
    return None


def experts(hidden: torch.Tensor, top_k_index: torch.Tensor, top_k_weights: torch.Tensor,
            gate_up: torch.Tensor, down: torch.Tensor, activation: int = 0) -> torch.Tensor:
    """``sum_k w[t, k] * down_e(act(gate_e(x_t)) * up_e(x_t))`` for ``e = top_k_index[t, k]``.

    ``hidden`` ``[T, H]``; ``top_k_index``/``top_k_weights`` ``[T, K]``; ``gate_up``
    ``[E, 2I, H]``; ``down`` ``[E, H, I]``. Slots with an index outside ``[0, E)``
    contribute nothing.
    """
    out: torch.Tensor = ops.moe_experts(hidden, top_k_index, top_k_weights, gate_up, down,
                                        activation)
    return out


def experts_forward(self: nn.Module, hidden_states: torch.Tensor, top_k_index: torch.Tensor,
                    top_k_weights: torch.Tensor) -> torch.Tensor:
    """Transformers' experts-interface function (``ALL_EXPERTS_FUNCTIONS``) over the op.

    Callers check :func:`unsupported_reason` first; a module it refuses raises here
    rather than compute with a layout the op does not have.
    """
    if (reason := unsupported_reason(self, hidden_states)) is not None:
        raise ValueError(f"moe.experts_forward cannot serve {type(self).__name__}: {reason}")
    code = _activation(self)
    assert code is not None  # unsupported_reason checked it
    gate_up = self.gate_up_proj
    down = self.down_proj
    assert isinstance(gate_up, torch.Tensor) and isinstance(down, torch.Tensor)
    return experts(hidden_states, top_k_index, top_k_weights, gate_up, down, code)
