"""Gated activations written in Triton: ``silu_and_mul``, ``gelu_and_mul``,
``gelu_tanh_and_mul``.

Signatures match the ecosystem's ``activation`` kernel (output first, written in
place, returned), so code written against it runs unchanged: ``x`` is
``[..., 2*d]`` and ``out`` ``[..., d]``. The kernel runs on CUDA and XPU devices;
on CPU only under Triton's interpreter (``TRITON_INTERPRET=1``, set before
Triton is imported), which is how the tests run without a GPU.
"""

from __future__ import annotations

import os

import torch

from . import _kernels, layers

__all__ = ["gelu_and_mul", "gelu_tanh_and_mul", "layers", "silu_and_mul"]

_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def _interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def _run(name: str, out: torch.Tensor, x: torch.Tensor, act: int) -> torch.Tensor:
    if x.device.type not in ("cuda", "xpu") and not (x.device.type == "cpu" and _interpreting()):
        raise RuntimeError(
            f"{name}: Triton kernels run on CUDA or XPU tensors, got {x.device}; "
            "on CPU only under TRITON_INTERPRET=1 (use the activation kernel for CPU)"
        )
    if out.device != x.device:
        raise RuntimeError(f"{name}: out is on {out.device} but x is on {x.device}")
    if x.dtype not in _DTYPES or out.dtype != x.dtype:
        raise RuntimeError(
            f"{name}: x and out must share one dtype of float32, float16 or bfloat16, "
            f"got {x.dtype} and {out.dtype}"
        )
    if x.dim() < 1 or x.shape[-1] % 2:
        raise RuntimeError(
            f"{name}: the last dimension of x must be even ([..., 2*d]), got {tuple(x.shape)}"
        )
    d = x.shape[-1] // 2
    expected = (*x.shape[:-1], d)
    if tuple(out.shape) != expected:
        raise RuntimeError(f"{name}: out must have shape {expected}, got {tuple(out.shape)}")
    if out.numel() == 0:
        return out
    x_2d = x.reshape(-1, 2 * d)
    if x_2d.stride(-1) != 1:
        x_2d = x_2d.contiguous()
    # The kernel writes rows with unit column stride; any other out gets a staging copy.
    direct = out.is_contiguous()
    out_2d = out.view(-1, d) if direct else torch.empty(expected, dtype=out.dtype,
                                                         device=out.device).view(-1, d)
    _kernels.launch(out_2d, x_2d, act)
    if not direct:
        out.copy_(out_2d.view(expected))
    return out


def silu_and_mul(out: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """out = silu(x[..., :d]) * x[..., d:]."""
    return _run("silu_and_mul", out, x, _kernels.SILU)


def gelu_and_mul(out: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """out = gelu(x[..., :d]) * x[..., d:], with the exact (erf) gelu."""
    return _run("gelu_and_mul", out, x, _kernels.GELU)


def gelu_tanh_and_mul(out: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """out = gelu_tanh(x[..., :d]) * x[..., d:], with the tanh approximation."""
    return _run("gelu_tanh_and_mul", out, x, _kernels.GELU_TANH)
