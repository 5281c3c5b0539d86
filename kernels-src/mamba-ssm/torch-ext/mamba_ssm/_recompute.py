"""Backward by recomputation: the kernels run the forward; for gradients the
PyTorch formula (``_reference``) is re-run on the saved inputs under autograd.

Why: training Mamba layers on a CPU is rare, inference is what the kernels are
for, and a recomputed backward gives exact gradients of the same function at
PyTorch's speed without a second hand-written kernel per op.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

Fn = Callable[..., Sequence[torch.Tensor]]


def _needs_grad(inputs: Sequence[Any]) -> bool:
    return torch.is_grad_enabled() and any(
        isinstance(t, torch.Tensor) and t.requires_grad for t in inputs
    )


class _Recompute(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, kernel: Fn, reference: Fn, *inputs: Any) -> tuple[torch.Tensor, ...]:
        ctx.set_materialize_grads(False)  # unused outputs (a final state) get None
        ctx.reference = reference
        ctx.is_tensor = [isinstance(t, torch.Tensor) for t in inputs]
        ctx.others = [None if isinstance(t, torch.Tensor) else t for t in inputs]
        ctx.save_for_backward(*[t for t in inputs if isinstance(t, torch.Tensor)])
        return tuple(kernel(*inputs))

    @staticmethod
    def backward(ctx: Any, *grads: torch.Tensor | None) -> tuple[torch.Tensor | None, ...]:
        saved = iter(ctx.saved_tensors)
        needs = ctx.needs_input_grad[2:]
        inputs: list[Any] = []
        for is_tensor, other, need in zip(ctx.is_tensor, ctx.others, needs, strict=True):
            inputs.append(next(saved).detach().requires_grad_(need) if is_tensor else other)
        wanted = [t for t, need in zip(inputs, needs, strict=True) if need]
        with torch.enable_grad():
            outputs = ctx.reference(*inputs)
            pairs = [(o, g) for o, g in zip(outputs, grads, strict=True)
                     if g is not None and o.requires_grad]
            result = torch.autograd.grad([o for o, _ in pairs], wanted, [g for _, g in pairs],
                                         allow_unused=True) if pairs else [None] * len(wanted)
        it = iter(result)
        return (None, None, *[next(it) if need else None for need in needs])


def run(kernel: Fn, reference: Fn, *inputs: Any) -> tuple[torch.Tensor, ...]:
    """``kernel(*inputs)``, differentiable through ``reference`` when any input needs a
    gradient (both return the same tuple of tensors)."""
    if _needs_grad(inputs):
        return tuple(_Recompute.apply(kernel, reference, *inputs))
    return tuple(kernel(*inputs))
