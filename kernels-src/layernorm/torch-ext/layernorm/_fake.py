"""Meta implementations, so the ops trace under torch.compile (FakeTensor runs them).

Each describes only the outputs: fresh contiguous tensors (the real ops return
contiguous results whatever the input layout). ``layer_norm_out`` writes its ``out``
argument and returns nothing, so torch derives its fake itself. Shape checks happen in
the real kernel.

Registered as ``Meta`` kernels through one ``torch.library.Library`` rather than with
``torch.library.register_fake``: that walks ``sys.modules`` with ``inspect`` to name its
caller, about 5 ms of every load, where these cost microseconds and serve FakeTensor,
``opcheck`` and ``torch.compile`` alike.
"""

from __future__ import annotations

import torch

from ._ops import add_op_namespace_prefix


def _fresh(t: torch.Tensor, shape=None) -> torch.Tensor:
    return torch.empty(t.shape if shape is None else shape, dtype=t.dtype, device=t.device)


def _layer_norm(x, weight, bias, eps: float):
    return _fresh(x)


def _layer_norm_backward(grad_out, x, weight, bias, eps: float):
    hidden = x.shape[-1:]
    return _fresh(x), _fresh(x, hidden), _fresh(x, hidden)


_LIB = torch.library.Library(add_op_namespace_prefix("").removesuffix("::"), "IMPL")
"""Kept for the life of the module: a Library's registrations end with it."""
_LIB.impl("layer_norm", _layer_norm, "Meta")
_LIB.impl("layer_norm_backward", _layer_norm_backward, "Meta")
