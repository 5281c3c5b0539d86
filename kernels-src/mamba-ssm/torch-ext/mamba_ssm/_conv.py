"""Causal depthwise conv1d: the prefill form (``causal_conv1d_fn``) and the
decode form on a rolling state (``causal_conv1d_update``), with the signatures
of the ``causal_conv1d`` package that Transformers' Mamba models call."""

from __future__ import annotations

import torch

from . import _recompute, _reference
from ._ops import ops
from ._support import applies, as_float, as_float_param

_update_op = ops.causal_conv1d_update.default


def _silu(activation: str | None) -> bool:
    if activation in (None, "identity"):
        return False
    if activation in ("silu", "swish"):
        return True
    raise ValueError(f"causal_conv1d: activation {activation!r} is not supported; "
                     "use None, 'silu' or 'swish'")


def _kernel(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
            silu: bool) -> tuple[torch.Tensor]:
    w_t = as_float(weight, x).t().contiguous()  # type: ignore[union-attr]
    return (ops.causal_conv1d_fwd(x, w_t, as_float(bias, x), silu),)


def _ref(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
         silu: bool) -> tuple[torch.Tensor]:
    return (_reference.causal_conv1d(x, weight, bias, silu),)


def causal_conv1d_fn(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None = None,
    seq_idx: torch.Tensor | None = None,
    initial_states: torch.Tensor | None = None,
    return_final_states: bool = False,
    final_states_out: torch.Tensor | None = None,
    activation: str | None = None,
    **kwargs: object,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """out[b, d, l] = act(bias[d] + sum_k weight[d, k] x[b, d, l - width + 1 + k]).

    x [batch, dim, seqlen] (any strides; channel-last input gives channel-last
    output), weight [dim, width]. ``initial_states`` [batch, dim, width - 1] stand for
    the positions before the start; ``return_final_states`` also returns the last
    width - 1 positions (for a following decode). Differentiable.
    """
    if seq_idx is not None:
        raise ValueError("causal_conv1d_fn: seq_idx (packed sequences) is not supported by "
                         "this kernel; pass one sequence per batch row")
    silu = _silu(activation)
    width = weight.shape[-1]
    seqlen = x.shape[-1]
    full = x if initial_states is None else torch.cat([initial_states.to(x.dtype), x], dim=-1)
    if weight.dim() != 2 or not applies(full):
        (out,) = _ref(full, weight, bias, silu)
    else:
        (out,) = _recompute.run(_kernel, _ref, full, weight, bias, silu)
    if initial_states is not None:
        out = out[..., -seqlen:]
    if not return_final_states:
        return out
    tail = full[..., -(width - 1):] if width > 1 else full[..., :0]
    if tail.shape[-1] < width - 1:
        tail = torch.nn.functional.pad(tail, (width - 1 - tail.shape[-1], 0))
    if final_states_out is not None:
        final_states_out.copy_(tail)
        return out, final_states_out
    return out, tail.contiguous()


def causal_conv1d_update(
    x: torch.Tensor,
    conv_state: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None = None,
    activation: str | None = None,
    cache_seqlens: torch.Tensor | None = None,
    conv_state_indices: torch.Tensor | None = None,
    **kwargs: object,
) -> torch.Tensor:
    """Decode: the conv over ``conv_state ++ x`` for the new positions; conv_state
    [batch, dim, state_len >= width - 1] keeps its last state_len positions (in place).
    x [batch, dim] or [batch, dim, seqlen]; returns x's shape."""
    if cache_seqlens is not None or conv_state_indices is not None:
        raise ValueError("causal_conv1d_update: cache_seqlens and conv_state_indices (a "
                         "circular or indexed state) are not supported by this kernel")
    silu = _silu(activation)
    needs_grad = torch.is_grad_enabled() and any(
        t is not None and t.requires_grad for t in (x, weight, bias, conv_state))
    if (needs_grad or weight.dim() != 2 or x.dim() not in (2, 3) or not applies(x, conv_state)
            or conv_state.shape[-1] < weight.shape[-1] - 1):
        squeeze = x.dim() == 2
        out = _reference.causal_conv1d_update(x.unsqueeze(-1) if squeeze else x, conv_state,
                                              weight, bias, silu)
        return out.squeeze(-1) if squeeze else out
    # A decode step's loop takes ~10 us, so its Python costs count: the op takes x
    # as [batch, dim] itself, and float32 parameters pass through unconverted.
    return _update_op(x, conv_state, as_float_param(weight, x), as_float_param(bias, x), silu)
