"""When the compiled loops apply: the device has kernels in this build and the
dtypes are ones they are compiled for. Everything else runs ``_reference``."""

from __future__ import annotations

import torch

from ._ops import add_op_namespace_prefix

KERNEL_DTYPES = (torch.float32, torch.bfloat16)


def _kernel_device_types() -> frozenset[str]:
    """Device types this build registered kernels for (a variant holds one backend).
    Computed once at import, so torch.compile sees a constant."""
    name = add_op_namespace_prefix("ssd_scan")
    return frozenset(
        device for device, key in (("cpu", "CPU"), ("cuda", "CUDA"))
        if torch._C._dispatch_has_kernel_for_dispatch_key(name, key)
    )


KERNEL_DEVICE_TYPES = _kernel_device_types()


def applies(x: torch.Tensor, *others: torch.Tensor | None) -> bool:
    """Whether the loops take ``x`` (and the tensors of its dtype, ``others``)."""
    if x.device.type not in KERNEL_DEVICE_TYPES or x.dtype not in KERNEL_DTYPES:
        return False
    return all(t is None or (t.dtype == x.dtype and t.device == x.device) for t in others)


def as_float(t: torch.Tensor | None, like: torch.Tensor) -> torch.Tensor | None:
    """A small parameter (weights, A, D, biases) as contiguous float32 on x's device."""
    if t is None:
        return None
    return t.detach().to(device=like.device, dtype=torch.float32).contiguous()


def as_float_param(t: torch.Tensor | None, like: torch.Tensor) -> torch.Tensor | None:
    """:func:`as_float` for a call that records no gradient: a parameter already
    contiguous float32 on x's device is passed as it is (no detach, no copy)."""
    if t is None or (t.dtype is torch.float32 and t.is_contiguous() and t.device == like.device):
        return t
    return as_float(t, like)


def last_contiguous(t: torch.Tensor | None) -> torch.Tensor | None:
    """``t`` with a unit-stride last dim (the loops take any other strides)."""
    if t is None or t.stride(-1) == 1:
        return t
    return t.contiguous()
