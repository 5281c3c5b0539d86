"""Experts kernels through Transformers' experts interface.

Transformers' MoE models keep every expert's weights in one module whose class is
decorated with ``@use_experts_implementation``; its ``forward`` looks up
``config._experts_implementation`` in ``ALL_EXPERTS_FUNCTIONS`` (``"grouped_mm"``,
``"batched_mm"``, ``"eager"``, …). The class registers no layer name, so ``kernelize``
cannot reach it; instead the experts kernel (a function with that interface's signature)
is registered in that registry under its repository's name and the model is switched to
it with ``set_experts_implementation``, the way a user would choose ``"grouped_mm"``.
Taking kernels off switches back to what the model had.

A kernel serves only the layouts it declares (``unsupported_reason(module, hidden)`` in
the kernel): for any other module or input, say a model with expert biases or a forward
that needs a backward, the registered function runs the implementation the model had
before (for ``"eager"``, the class's own loop), so no model computes something else.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, cast

from ...lazy_names import deferred

if TYPE_CHECKING:
    import torch
    from torch import nn
    from transformers.integrations import moe as transformers_moe
else:
    transformers_moe = deferred("transformers.integrations.moe")

logger = logging.getLogger("kernelhub.transformers")

ExpertsForward = Callable[..., "torch.Tensor"]
Reason = Callable[..., "str | None"]

PREVIOUS_ATTR = "_kernelhub_experts_previous"
"""On a model: the experts implementation it had before ours (restored when ours goes)."""
FALLBACK_ATTR = "_kernelhub_experts_fallback"
"""On an experts module: the implementation name its kernel falls back to."""


class _ExpertsModel(Protocol):
    config: Any

    def set_experts_implementation(self, experts_implementation: str) -> None: ...


def is_experts_module(module: nn.Module) -> bool:
    """Whether ``module``'s class was decorated with ``@use_experts_implementation``
    (which adds the ``_apply_gate`` method and the layout flags it reads)."""
    return hasattr(type(module), "_apply_gate") and hasattr(module, "has_gate")


def experts_modules(model: nn.Module) -> list[nn.Module]:
    return [m for m in model.modules() if is_experts_module(m)]


def _fallback(module: nn.Module) -> ExpertsForward:
    """The implementation ``module`` ran before the kernel (the class's own loop for
    ``"eager"`` or an unknown name)."""
    name = getattr(module, FALLBACK_ATTR, "eager")
    registry = transformers_moe.ALL_EXPERTS_FUNCTIONS
    if name != "eager" and name in registry:
        return cast("ExpertsForward", registry[name])
    original = type(module).forward
    return cast("ExpertsForward", getattr(original, "__wrapped__", original))


def dispatcher(kernel: ExpertsForward, reason: Reason | None) -> ExpertsForward:
    """The function registered for a kernel: the kernel where it serves the module and
    input, the module's previous implementation elsewhere."""

    def experts_forward(self: nn.Module, hidden_states: torch.Tensor,
                        top_k_index: torch.Tensor, top_k_weights: torch.Tensor) -> torch.Tensor:
        if reason is None or reason(self, hidden_states) is None:
            return kernel(self, hidden_states, top_k_index, top_k_weights)
        return _fallback(self)(self, hidden_states, top_k_index, top_k_weights)

    experts_forward.__qualname__ = experts_forward.__name__ = getattr(
        kernel, "__name__", "experts_forward")
    return experts_forward


def install(model: nn.Module, name: str, kernel: ExpertsForward, reason: Reason | None) -> bool:
    """Register ``kernel`` as experts implementation ``name`` and switch ``model`` to it;
    False (nothing changed) when no experts module of the model is served."""
    modules = experts_modules(model)
    if reason is not None:
        refused = {type(m).__name__: why for m in modules if (why := reason(m)) is not None}
        for cls, why in refused.items():
            logger.info("experts: %s keeps PyTorch (%s)", cls, why)
        if len(refused) == len({type(m).__name__ for m in modules}):
            return False
    transformers_moe.ALL_EXPERTS_FUNCTIONS.register(name, dispatcher(kernel, reason))
    seams = cast("_ExpertsModel", model)
    previous = model.__dict__.get(PREVIOUS_ATTR) or seams.config._experts_implementation
    for module in modules:
        setattr(module, FALLBACK_ATTR, previous)
    model.__dict__[PREVIOUS_ATTR] = previous
    if seams.config._experts_implementation != name:
        seams.set_experts_implementation(name)
    return True


def uninstall(model: nn.Module) -> None:
    """Back to the experts implementation the model had before :func:`install`."""
    previous = model.__dict__.pop(PREVIOUS_ATTR, None)
    if previous is None:
        return
    for module in experts_modules(model):
        if FALLBACK_ATTR in module.__dict__:
            delattr(module, FALLBACK_ATTR)
    cast("_ExpertsModel", model).set_experts_implementation(previous)
