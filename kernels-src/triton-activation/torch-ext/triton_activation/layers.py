"""Pure layers for ``kernelize``: each replaces the ``forward`` of a model's layer of
the same name (no own ``__init__``, no state), allocating the output it returns."""

from __future__ import annotations

import torch

from . import _kernels


def _gated(x: torch.Tensor, act: int, name: str) -> torch.Tensor:
    from . import _run  # the package's checks; imported late to avoid a cycle

    out = torch.empty((*x.shape[:-1], x.shape[-1] // 2), dtype=x.dtype, device=x.device)
    return _run(name, out, x, act)


class SiluAndMul(torch.nn.Module):
    """silu(x[..., :d]) * x[..., d:]."""

    has_backward = False
    # A plain Python launch of a @triton.jit kernel; not claimed traceable here.
    can_torch_compile = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _gated(x, _kernels.SILU, "SiluAndMul")


class GeluAndMul(torch.nn.Module):
    """gelu(x[..., :d]) * x[..., d:] (exact erf gelu)."""

    has_backward = False
    can_torch_compile = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _gated(x, _kernels.GELU, "GeluAndMul")


class GeluTanhAndMul(torch.nn.Module):
    """gelu_tanh(x[..., :d]) * x[..., d:]."""

    has_backward = False
    can_torch_compile = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _gated(x, _kernels.GELU_TANH, "GeluTanhAndMul")
