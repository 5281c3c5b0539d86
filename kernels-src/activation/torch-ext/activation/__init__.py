"""Fused activation kernels for PyTorch: gated (``*_and_mul``) and plain forms.

Every function writes into a caller-provided ``out`` and returns it, matching the
kernel ecosystem's ``activation`` kernel, so code written against that kernel runs
unchanged. Gated ops take ``x`` of shape ``[..., 2*d]`` and write ``out`` of shape
``[..., d]``; plain ops write ``out`` of the shape of ``x``.
"""

from __future__ import annotations

import torch

from . import layers
from ._ops import ops

__all__ = [
    "cpu_capability",
    "fatrelu_and_mul",
    "gelu",
    "gelu_and_mul",
    "gelu_fast",
    "gelu_new",
    "gelu_quick",
    "gelu_tanh",
    "gelu_tanh_and_mul",
    "layers",
    "mul_and_silu",
    "set_cpu_capability",
    "silu",
    "silu_and_mul",
]

# No fake (meta) implementations are registered: every op writes only its ``out``
# argument and returns nothing, so torch derives the trivial one itself (FakeTensor and
# ``opcheck`` treat a mutable op with no returns as returning nothing). Registering them
# with ``torch.library.register_fake`` cost ~5 ms of every load (torch walks
# ``sys.modules`` to name the caller), for no behaviour.


def silu_and_mul(out: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """out = silu(x[..., :d]) * x[..., d:]."""
    ops.silu_and_mul(out, x)
    return out


def mul_and_silu(out: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """out = x[..., :d] * silu(x[..., d:])."""
    ops.mul_and_silu(out, x)
    return out


def gelu_and_mul(out: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """out = gelu(x[..., :d]) * x[..., d:], with the exact (erf) gelu."""
    ops.gelu_and_mul(out, x)
    return out


def gelu_tanh_and_mul(out: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """out = gelu_tanh(x[..., :d]) * x[..., d:], with the tanh approximation."""
    ops.gelu_tanh_and_mul(out, x)
    return out


def fatrelu_and_mul(out: torch.Tensor, x: torch.Tensor, threshold: float = 0.0) -> torch.Tensor:
    """out = where(a > threshold, a, 0) * x[..., d:], with a = x[..., :d]."""
    ops.fatrelu_and_mul(out, x, threshold)
    return out


def silu(out: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """out = x * sigmoid(x)."""
    ops.silu(out, x)
    return out


def gelu(out: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """out = 0.5 * x * (1 + erf(x / sqrt(2)))."""
    ops.gelu(out, x)
    return out


def gelu_tanh(out: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """out = 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x**3)))."""
    ops.gelu_tanh(out, x)
    return out


def gelu_fast(out: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """out = 0.5 * x * (1 + tanh(x * 0.7978845608 * (1 + 0.044715 * x * x)))."""
    ops.gelu_fast(out, x)
    return out


def gelu_new(out: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """out = 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x**3))) (GPT-2's gelu)."""
    ops.gelu_new(out, x)
    return out


def gelu_quick(out: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """out = x * sigmoid(1.702 * x)."""
    ops.gelu_quick(out, x)
    return out


def _cpu_only(name: str):
    """The CPU build's loop-selection op; GPU builds have none and say so."""
    if not hasattr(ops, name):
        raise RuntimeError(
            f"activation.{name}: this build has no CPU kernels (it was built for a GPU "
            "backend); load the cpu variant of the kernel to select CPU loops"
        )
    return getattr(ops, name)


def cpu_capability() -> str:
    """The vector loops the CPU ops run: ``DEFAULT``, ``AVX2``, ``AVX512`` or ``AVX512_BF16``."""
    return _cpu_only("cpu_capability")()


def set_cpu_capability(capability: str) -> str:
    """Run the CPU ops on other compiled loops (one this CPU supports).

    For tests and benchmarks that compare the loops; returns the previous choice.
    """
    return _cpu_only("set_cpu_capability")(capability)
