"""Mamba-1's selective scan (``selective_scan_fn``), with the signature of the
``mamba_ssm`` package that Transformers' Mamba model calls."""

from __future__ import annotations

import torch

from . import _recompute, _reference
from ._ops import ops
from ._support import applies, as_float, last_contiguous


def _kernel(u: torch.Tensor, delta: torch.Tensor, A: torch.Tensor, B: torch.Tensor,
            C: torch.Tensor, D: torch.Tensor | None, z: torch.Tensor | None,
            want_last: bool) -> tuple[torch.Tensor, torch.Tensor]:
    out, last = ops.selective_scan(
        last_contiguous(u), delta.detach().contiguous(), as_float(A, u), last_contiguous(B),
        last_contiguous(C), as_float(D, u), last_contiguous(z), want_last)
    return out, last


def _ref(u: torch.Tensor, delta: torch.Tensor, A: torch.Tensor, B: torch.Tensor,
         C: torch.Tensor, D: torch.Tensor | None, z: torch.Tensor | None,
         want_last: bool) -> tuple[torch.Tensor, torch.Tensor]:
    del want_last
    return _reference.selective_scan(u, delta, A, B, C, D, z)


def selective_scan_fn(
    u: torch.Tensor,
    delta: torch.Tensor,
    A: torch.Tensor,
    B: torch.Tensor,
    C: torch.Tensor,
    D: torch.Tensor | None = None,
    z: torch.Tensor | None = None,
    delta_bias: torch.Tensor | None = None,
    delta_softplus: bool = False,
    return_last_state: bool = False,
    **kwargs: object,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """Mamba-1's scan: per channel d, s = exp(delta A[d]) s + delta u B_t,
    y = s . C_t + D[d] u, y *= silu(z).

    u, delta and z [batch, dim, seqlen]; A [dim, dstate] (real); B and C
    [batch, dstate, seqlen] or [batch, groups, dstate, seqlen]; D and delta_bias [dim].
    Returns y like u, and with ``return_last_state`` the last state [batch, dim,
    dstate] (float32). Differentiable.
    """
    if B.dim() not in (3, 4) or C.dim() not in (3, 4):
        raise ValueError("selective_scan_fn: B and C must be input-dependent, [batch, dstate, "
                         "seqlen] or [batch, groups, dstate, seqlen]; got B "
                         f"{tuple(B.shape)}, C {tuple(C.shape)}")
    if A.is_complex():
        raise ValueError("selective_scan_fn: complex A is not supported by this kernel")
    B4 = B.unsqueeze(1) if B.dim() == 3 else B
    C4 = C.unsqueeze(1) if C.dim() == 3 else C
    bias = None if delta_bias is None else delta_bias[:, None]
    dtp = _reference.dt_prepare(delta, bias, delta_softplus, None)
    args = (u, dtp, A, B4, C4, D, z, return_last_state)
    if u.dim() == 3 and u.shape[1] % B4.shape[1] == 0 and applies(u, B4, C4, z):
        out, last = _recompute.run(_kernel, _ref, *args)
    else:
        out, last = _ref(*args)
    return (out, last) if return_last_state else out
