"""Whether a kernel's output matches the PyTorch it replaces: per-dtype tolerances.

Used by :mod:`kernelhub.layer.autotune` on the first call of every shape bucket; the
inputs are copied (:func:`clone`) for each side, so neither run sees the other's
in-place updates, nor the model the judges'.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar, cast

from ...lazy_names import deferred

if TYPE_CHECKING:
    import torch
else:
    torch = deferred("torch")

T = TypeVar("T")

TOLERANCES: dict[str, tuple[float, float]] = {
    "float64": (1e-7, 1e-7),
    "float32": (1e-4, 1e-4),
    "float16": (1e-2, 1e-2),
    "bfloat16": (2e-2, 2e-2),
}
"""dtype name → (rtol, atol): ``|kernel - pytorch| <= atol + rtol * |pytorch|`` everywhere.

Loose enough for reordered float32 accumulation and for one extra rounding step in
16-bit formats (one bf16 ulp is 2**-8 relative); a kernel that is wrong is far outside.
"""


def _tensors(value: object) -> list[torch.Tensor | None] | None:
    """The output tensors in order (None entries kept), or None for an unknown structure."""
    if value is None or isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        found: list[torch.Tensor | None] = []
        for item in value:
            part = _tensors(item)
            if part is None:
                return None
            found.extend(part)
        return found
    return None


def clone(value: T) -> T:
    """Fresh copies of the tensors in ``value``: kernels that update inputs in place
    (a fused residual add) must not change the model's real tensors while being judged."""
    return cast(T, _clone(value))  # the same structure, so the same type


def _clone(value: object) -> object:
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, tuple):
        return tuple(_clone(v) for v in value)
    if isinstance(value, list):
        return [_clone(v) for v in value]
    if isinstance(value, dict):
        return {k: _clone(v) for k, v in value.items()}
    return value


def compare(kernel_out: object, pytorch_out: object) -> tuple[bool, float, str]:
    """(within tolerance, max |difference|, why not) for two outputs of one call."""
    ours, theirs = _tensors(kernel_out), _tensors(pytorch_out)
    if ours is None or theirs is None or len(ours) != len(theirs):
        return False, float("inf"), "outputs differ in structure"
    worst = 0.0
    for a, b in zip(ours, theirs, strict=True):
        if a is None or b is None:
            if a is not b:
                return False, float("inf"), "one output is None where the other is a tensor"
            continue
        if a.shape != b.shape or a.dtype != b.dtype:
            return False, float("inf"), (f"output {tuple(a.shape)} {a.dtype} where PyTorch gives "
                                         f"{tuple(b.shape)} {b.dtype}")
        if a.numel() == 0:
            continue
        rtol, atol = TOLERANCES.get(str(b.dtype).removeprefix("torch."), (1e-4, 1e-4))
        x, y = a.detach().float(), b.detach().float()
        both_nan = x.isnan() & y.isnan()
        diff = (x - y).abs().masked_fill(both_nan, 0.0)
        diff = diff.nan_to_num(nan=float("inf"))
        worst = max(worst, float(diff.max()))
        if not bool((diff <= atol + rtol * y.abs().nan_to_num(0.0)).all()):
            return False, worst, f"max |kernel - pytorch| {worst:.3g} exceeds rtol {rtol:g}, atol {atol:g}"
    return True, worst, ""
