"""``Qwen3_5GatedDeltaNet`` and ``Qwen3NextGatedDeltaNet``: the linear-attention layers of
Qwen3.5 and Qwen3-Next, for ``kernelize``.

Both are "pure" layers (only ``forward``, run on the model's own layer instance, whose
projections, ``conv1d``, ``A_log``, ``dt_bias`` and gated ``norm`` it uses). Each follows
the model's forward step for step (the two differ only in how their input projections
are laid out), with the gated delta rule on this kernel's ops. On the
CPU the causal convolution + SiLU is this kernel's ``causal_conv1d_silu``, which reads the
input projection's ``[batch, seq, channels]`` output where it lies (PyTorch's depthwise
``conv1d`` wants channels first, and costs 30-70 ms at 256 tokens, 40 ms per bfloat16
decode step); elsewhere it is PyTorch's ``conv1d``. The model cache's conv state is read
and written as the model does. The gated RMSNorm is the model's own ``norm`` module, so a
kernel mapped to ``RMSNormGated`` serves it too.

On CPUs without native bfloat16 arithmetic (no AVX512_BF16), PyTorch's bfloat16 matrix
products run ~8 GFLOP/s, 7-10x slower than float32; there the layer's projections of 16
or more tokens widen to float32 (the weights too, for the call: ~50 ms for the largest,
against seconds saved) and round the result to bfloat16 once, as the bfloat16 product
does after its float32 accumulation.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from ._functional import chunk_gated_delta_rule, fused_recurrent_gated_delta_rule
from ._ops import ops


def _conv(layer: nn.Module, mixed: torch.Tensor, cache: Any) -> torch.Tensor:
    """Causal depthwise convolution + SiLU over ``mixed`` [batch, seq, channels], reading and
    updating the cache's conv state the way the model's ``causal_conv1d_forward`` does;
    returns [batch, seq, channels]."""
    conv1d: nn.Conv1d = layer.conv1d
    weight = conv1d.weight.squeeze(1)
    seq_len = mixed.shape[1]
    idx = layer.layer_idx
    # The fused op has no backward: training keeps PyTorch's conv1d.
    fused = (
        mixed.device.type == "cpu"
        and hasattr(ops, "causal_conv1d_silu")
        and not (torch.is_grad_enabled() and (mixed.requires_grad or weight.requires_grad))
    )
    conv_state = cache.get_conv_state(idx, state_idx=0) if cache is not None else None
    if conv_state is not None and seq_len == 1 and not cache.is_recording_past(idx):
        cache.increase_count(idx, 0)
        if fused and conv_state.dtype == mixed.dtype and conv_state.is_contiguous():
            return ops.causal_conv1d_silu(mixed, weight, conv1d.bias, conv_state, seq_len)
        window = torch.cat([conv_state, mixed.transpose(1, 2)], dim=-1).to(weight.dtype)
        conv_state.copy_(window[:, :, -conv_state.shape[-1] :])
        out = F.conv1d(window, weight.unsqueeze(1), conv1d.bias, groups=weight.shape[0])[
            :, :, -seq_len:
        ]
        return F.silu(out).to(mixed.dtype).transpose(1, 2)
    full = mixed.transpose(1, 2)
    if cache is not None:
        full = cache.update_conv_state(
            full, idx, state_idx=0, conv_kernel_size=conv1d.kernel_size[0]
        )
    if fused:
        return ops.causal_conv1d_silu(full.transpose(1, 2), weight, conv1d.bias, None, seq_len)
    pad = weight.shape[-1] - 1
    out = F.conv1d(
        full.to(weight.dtype), weight.unsqueeze(1), conv1d.bias, padding=pad, groups=weight.shape[0]
    )
    out = out[:, :, : full.shape[-1]][:, :, -seq_len:]
    return F.silu(out).to(mixed.dtype).transpose(1, 2)


_WIDEN_ROWS = 16
"""Rows from which a bfloat16/float16 projection runs in float32 on CPUs without native
bfloat16 arithmetic (measured: 16 rows 129 ms in bfloat16 vs 92 ms widened, 4 rows 33 vs
79 ms, for the 4096 x 8192 ``in_proj_qkv``)."""


def _project(linear: nn.Linear, x: torch.Tensor) -> torch.Tensor:
    """``linear(x)``, widened to float32 where PyTorch's half-precision product is slow."""
    if (
        x.dtype in (torch.bfloat16, torch.float16)
        and x.device.type == "cpu"
        and x.numel() // x.shape[-1] >= _WIDEN_ROWS
        and _slow_half_products()
    ):
        bias = None if linear.bias is None else linear.bias.float()
        return F.linear(x.float(), linear.weight.float(), bias).to(x.dtype)
    return linear(x)


def _slow_half_products() -> bool:
    """No AVX512_BF16 loops here (those CPUs, AMX ones included, multiply bfloat16 natively)."""
    return hasattr(ops, "cpu_capability") and ops.cpu_capability() != "AVX512_BF16"


def _prefill(
    layer: nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    g: torch.Tensor,
    beta: torch.Tensor,
    state: torch.Tensor | None,
    cache: Any,
    seq_len: int,
) -> tuple[torch.Tensor, Any]:
    """The chunked pass, then token by token over the last tokens whose states the
    cache asks to keep (speculative decoding), as the model does."""
    keep = (
        min(cache.get_recurrent_states_to_keep(layer.layer_idx), seq_len)
        if cache is not None
        else 0
    )
    split = seq_len - keep
    parts = [torch.tensor_split(x, [split], dim=1) for x in (query, key, value, g, beta)]
    out, last = chunk_gated_delta_rule(
        *(p[0] for p in parts),
        initial_state=state,
        output_final_state=cache is not None,
        use_qk_l2norm_in_kernel=True,
    )
    outs, kept = [out], []
    for i in range(keep):
        step = (p[1][:, i : i + 1] for p in parts)
        out_i, last = fused_recurrent_gated_delta_rule(
            *step, initial_state=last, output_final_state=True, use_qk_l2norm_in_kernel=True
        )
        outs.append(out_i)
        kept.append(last)
    return torch.cat(outs, dim=1), (kept if kept else last)


def _qwen3_5_projections(
    layer: nn.Module, hidden_states: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Qwen3.5's four input projections: the conv's input ``[batch, seq, 2 key_dim +
    value_dim]`` (q, k, v in that order), the gate z and the beta/decay logits b, a."""
    return (
        _project(layer.in_proj_qkv, hidden_states),
        _project(layer.in_proj_z, hidden_states),
        layer.in_proj_b(hidden_states),
        layer.in_proj_a(hidden_states),
    )


def _qwen3_next_projections(
    layer: nn.Module, hidden_states: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Qwen3-Next's two: ``in_proj_qkvz`` is laid out per key head (its q, k, then the
    values and gates of the value heads it serves) and ``in_proj_ba`` likewise (b, then
    a, per key head). The conv's input is gathered into Qwen3.5's order (all q, all k,
    all v) with one copy; z, b and a stay views."""
    batch, seq_len, _ = hidden_states.shape
    heads, dk, dv = layer.num_k_heads, layer.head_k_dim, layer.head_v_dim
    per = layer.num_v_heads // heads
    qkvz = _project(layer.in_proj_qkvz, hidden_states)
    qkvz = qkvz.view(batch, seq_len, heads, 2 * dk + 2 * per * dv)
    ba = _project(layer.in_proj_ba, hidden_states).view(batch, seq_len, heads, 2 * per)
    query, key, value, z = torch.split(qkvz, [dk, dk, per * dv, per * dv], dim=3)
    mixed = qkvz.new_empty(batch, seq_len, 2 * heads * dk + heads * per * dv)
    # narrow, not split: autograd lets a single view be written in place (training).
    for start, part in ((0, query), (heads * dk, key), (2 * heads * dk, value)):
        width = part.shape[-1]
        mixed.narrow(-1, start, heads * width).view(batch, seq_len, heads, width).copy_(part)
    b, a = torch.split(ba, [per, per], dim=3)
    return mixed, z, b.reshape(batch, seq_len, -1), a.reshape(batch, seq_len, -1)


_Projections = Callable[
    [nn.Module, torch.Tensor], tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]
]


def _gated_delta_net(
    layer: nn.Module,
    hidden_states: torch.Tensor,
    cache: Any,
    attention_mask: torch.Tensor | None,
    projections: _Projections,
) -> torch.Tensor:
    """The gated delta net after its input projections, which are all the two models'
    layers differ in: conv + SiLU, the gated delta rule, the gated norm, ``out_proj``."""
    if attention_mask is not None and attention_mask.dim() == 2:
        hidden_states = (hidden_states * attention_mask[:, :, None]).to(hidden_states.dtype)
    batch, seq_len, _ = hidden_states.shape
    state = cache.get_recurrent_state(layer.layer_idx, state_idx=0) if cache is not None else None

    mixed, z, b, a = projections(layer, hidden_states)
    mixed = _conv(layer, mixed, cache)
    query, key, value = torch.split(mixed, [layer.key_dim, layer.key_dim, layer.value_dim], dim=-1)
    query = query.reshape(batch, seq_len, -1, layer.head_k_dim)
    key = key.reshape(batch, seq_len, -1, layer.head_k_dim)
    value = value.reshape(batch, seq_len, -1, layer.head_v_dim)
    beta = b.sigmoid()
    g = -layer.A_log.float().exp() * F.softplus(a.float() + layer.dt_bias)

    if state is not None and seq_len == 1:
        out, new_state = fused_recurrent_gated_delta_rule(
            query,
            key,
            value,
            g,
            beta,
            initial_state=state,
            output_final_state=cache is not None,
            use_qk_l2norm_in_kernel=True,
        )
    else:
        out, new_state = _prefill(layer, query, key, value, g, beta, state, cache, seq_len)
    if cache is not None:
        cache.update_recurrent_state(new_state, layer.layer_idx)

    out = layer.norm(out.reshape(-1, layer.head_v_dim), z.reshape(-1, layer.head_v_dim))
    return _project(layer.out_proj, out.reshape(batch, seq_len, -1))


class Qwen3_5GatedDeltaNet(nn.Module):
    """Qwen3.5's gated delta net with the gated delta rule kernels."""

    # Not yet run under torch.compile (the ops have Meta kernels, but the training
    # path's recomputing backward calls autograd itself): compile keeps PyTorch.
    can_torch_compile = False
    has_backward = True

    def forward(
        self,
        hidden_states: torch.Tensor,
        cache: Any = None,
        attention_mask: torch.Tensor | None = None,
        cache_params: Any = None,
        **kwargs: Any,
    ) -> torch.Tensor:
        cache = cache if cache is not None else cache_params
        return _gated_delta_net(self, hidden_states, cache, attention_mask, _qwen3_5_projections)


class Qwen3NextGatedDeltaNet(nn.Module):
    """Qwen3-Next's gated delta net (per-key-head ``in_proj_qkvz`` / ``in_proj_ba``)
    with the gated delta rule kernels."""

    can_torch_compile = False
    has_backward = True

    def forward(
        self,
        hidden_states: torch.Tensor,
        cache: Any = None,
        attention_mask: torch.Tensor | None = None,
        cache_params: Any = None,
        **kwargs: Any,
    ) -> torch.Tensor:
        cache = cache if cache is not None else cache_params
        return _gated_delta_net(self, hidden_states, cache, attention_mask, _qwen3_next_projections)
