"""Mamba-2: the prefill scan (``mamba_chunk_scan_combined``) and the decode step
(``selective_state_update``), with the signatures of the ``mamba_ssm`` package
that Transformers' Mamba-2, Falcon-H1 and hybrid models call."""

from __future__ import annotations

import torch

from . import _recompute, _reference
from ._ops import ops
from ._support import applies, as_float, last_contiguous


def _head_params(D: torch.Tensor | None, heads: int, headdim: int,
                 like: torch.Tensor) -> torch.Tensor | None:
    """D as [heads * headdim] float32 (D may be per head or per head and channel)."""
    if D is None:
        return None
    d = as_float(D, like)
    assert d is not None
    return (d[:, None].expand(heads, headdim) if d.dim() == 1 else d).contiguous()


CUDA_MAX_DSTATE = 6143
"""The CUDA scan stages one token's B and C (and dt) in a block's 48 KiB of shared
memory at least; a larger state runs the PyTorch formula."""


def _scan_kernel(x: torch.Tensor, dt: torch.Tensor, A: torch.Tensor, B: torch.Tensor,
                 C: torch.Tensor, D: torch.Tensor | None, z: torch.Tensor | None,
                 init: torch.Tensor | None, chunk_size: int, want_final: bool,
                 ) -> tuple[torch.Tensor, torch.Tensor]:
    heads, headdim = x.shape[2], x.shape[3]
    y, final = ops.ssd_scan(
        last_contiguous(x), dt.detach().contiguous(), as_float(A, x), last_contiguous(B),
        last_contiguous(C), _head_params(D, heads, headdim, x), last_contiguous(z),
        as_float(init, x), chunk_size, want_final)
    return y, final


def _scan_ref(x: torch.Tensor, dt: torch.Tensor, A: torch.Tensor, B: torch.Tensor,
              C: torch.Tensor, D: torch.Tensor | None, z: torch.Tensor | None,
              init: torch.Tensor | None, chunk_size: int, want_final: bool,
              ) -> tuple[torch.Tensor, torch.Tensor]:
    del want_final
    return _reference.ssd_scan(x, dt, A, B, C, D, z, init, chunk_size)


def mamba_chunk_scan_combined(
    x: torch.Tensor,
    dt: torch.Tensor,
    A: torch.Tensor,
    B: torch.Tensor,
    C: torch.Tensor,
    chunk_size: int,
    D: torch.Tensor | None = None,
    z: torch.Tensor | None = None,
    dt_bias: torch.Tensor | None = None,
    initial_states: torch.Tensor | None = None,
    seq_idx: torch.Tensor | None = None,
    cu_seqlens: torch.Tensor | None = None,
    dt_softplus: bool = False,
    dt_limit: tuple[float, float] = (0.0, float("inf")),
    return_final_states: bool = False,
    return_varlen_states: bool = False,
    **kwargs: object,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """Mamba-2's selective scan over a sequence.

    x [batch, seqlen, heads, headdim], dt [batch, seqlen, heads] (before ``dt_bias``,
    softplus and ``dt_limit``), A [heads], B and C [batch, seqlen, groups, dstate],
    D [heads] or [heads, headdim], z like x (output gate ``y * silu(z)``),
    initial_states [batch, heads, headdim, dstate]. Returns y like x, and with
    ``return_final_states`` the final state (float32). Differentiable.
    """
    if seq_idx is not None or cu_seqlens is not None or return_varlen_states:
        raise ValueError("mamba_chunk_scan_combined: packed sequences (seq_idx, cu_seqlens, "
                         "varlen states) are not supported by this kernel; pass one sequence "
                         "per batch row")
    if chunk_size < 1:
        raise ValueError(f"mamba_chunk_scan_combined: chunk_size must be positive, got {chunk_size}")
    dtp = _reference.dt_prepare(dt, dt_bias, dt_softplus, dt_limit)
    args = (x, dtp, A, B, C, D, z, initial_states, chunk_size, return_final_states)
    if (x.dim() == 4 and B.dim() == 4 and A.dim() == 1 and x.shape[2] % B.shape[2] == 0
            and applies(x, B, C, z) and not (x.is_cuda and B.shape[3] > CUDA_MAX_DSTATE)):
        y, final = _recompute.run(_scan_kernel, _scan_ref, *args)
    else:
        y, final = _scan_ref(*args)
    return (y, final) if return_final_states else y


def _step_kernel_args(state: torch.Tensor, x: torch.Tensor, dt: torch.Tensor, A: torch.Tensor,
                      B: torch.Tensor, C: torch.Tensor, z: torch.Tensor | None,
                      dt_bias: torch.Tensor | None) -> bool:
    """Whether the decode kernel takes these: Mamba-2 shapes with A, dt and dt_bias
    the same across a head's channels (as the models pass them, broadcast views)."""
    if state.dim() != 4 or x.dim() != 3 or A.dim() != 3 or dt.dim() != 3 or B.dim() != 3:
        return False
    if A.stride(-1) != 0 or A.stride(-2) != 0 or dt.stride(-1) != 0:
        return False
    if dt_bias is not None and (dt_bias.dim() != 2 or dt_bias.stride(-1) != 0):
        return False
    if state.stride(-1) != 1 or state.stride(-2) != state.shape[-1]:
        return False
    if state.dtype not in (torch.float32, x.dtype) or x.shape[1] % B.shape[1]:
        return False
    if torch.is_grad_enabled() and any(
            t is not None and t.requires_grad for t in (state, x, dt, A, B, C, z, dt_bias)):
        return False
    return applies(x, B, C, z) and state.device == x.device


def selective_state_update(
    state: torch.Tensor,
    x: torch.Tensor,
    dt: torch.Tensor,
    A: torch.Tensor,
    B: torch.Tensor,
    C: torch.Tensor,
    D: torch.Tensor | None = None,
    z: torch.Tensor | None = None,
    dt_bias: torch.Tensor | None = None,
    dt_softplus: bool = False,
    state_batch_indices: torch.Tensor | None = None,
    **kwargs: object,
) -> torch.Tensor:
    """One decode step of the SSM; ``state`` is updated in place.

    Mamba-2: state [batch, heads, headdim, dstate], x, dt and z [batch, heads, headdim],
    A [heads, headdim, dstate], B and C [batch, groups, dstate], D and dt_bias
    [heads, headdim]. Mamba-1: the same without the heads dimension (state
    [batch, dim, dstate], x [batch, dim], A [dim, dstate], B and C [batch, dstate]).
    """
    if state_batch_indices is not None:
        raise ValueError("selective_state_update: state_batch_indices is not supported by this "
                         "kernel; pass the states of the batch rows in order")
    if _step_kernel_args(state, x, dt, A, B, C, z, dt_bias):
        dt_h = _reference.dt_prepare(dt[..., 0], None if dt_bias is None else dt_bias[..., 0],
                                     dt_softplus, None).contiguous()
        heads, headdim = x.shape[1], x.shape[2]
        return ops.selective_state_update(
            state, last_contiguous(x), dt_h, as_float(A[:, 0, 0], x), last_contiguous(B),
            last_contiguous(C), _head_params(D, heads, headdim, x), last_contiguous(z))
    mamba1 = state.dim() == 3
    if mamba1:
        state4, x, dt, A = state.unsqueeze(2), x.unsqueeze(-1), dt.unsqueeze(-1), A.unsqueeze(1)
        B, C = B.unsqueeze(1), C.unsqueeze(1)
        z = None if z is None else z.unsqueeze(-1)
        D = None if D is None else D.reshape(-1, 1)
        dt_bias = None if dt_bias is None else dt_bias.reshape(-1, 1)
    else:
        state4 = state
    dtp = _reference.dt_prepare(dt, dt_bias, dt_softplus, None)
    out = _reference.ssd_step(state4, x, dtp, A, B, C, D, z)
    return out.squeeze(-1) if mamba1 else out
