"""``Qwen3_5GatedDeltaNet``: the linear-attention layer of Qwen3.5, for ``kernelize``.

A "pure" layer (only ``forward``, run on the model's own layer instance, whose
projections, ``conv1d``, ``A_log``, ``dt_bias`` and gated ``norm`` it uses). It follows
the model's forward step for step, with the gated delta rule on this kernel's ops; the
causal convolution is PyTorch's depthwise ``conv1d`` (with the model cache's conv state),
and the gated RMSNorm is the model's own ``norm`` module, so a kernel mapped to
``RMSNormGated`` serves it too.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from ._functional import chunk_gated_delta_rule, fused_recurrent_gated_delta_rule


def _conv(layer: nn.Module, mixed: torch.Tensor, cache: Any) -> torch.Tensor:
    """Causal depthwise convolution + SiLU over [batch, channels, seq], reading and
    updating the cache's conv state the way the model's ``causal_conv1d_forward`` does."""
    conv1d: nn.Conv1d = layer.conv1d
    weight = conv1d.weight.squeeze(1)
    seq_len = mixed.shape[-1]
    idx = layer.layer_idx
    conv_state = cache.get_conv_state(idx, state_idx=0) if cache is not None else None
    if conv_state is not None and seq_len == 1 and not cache.is_recording_past(idx):
        cache.increase_count(idx, 0)
        window = torch.cat([conv_state, mixed], dim=-1).to(weight.dtype)
        conv_state.copy_(window[:, :, -conv_state.shape[-1] :])
        out = F.conv1d(window, weight.unsqueeze(1), conv1d.bias, groups=weight.shape[0])[
            :, :, -seq_len:
        ]
    else:
        if cache is not None:
            mixed = cache.update_conv_state(
                mixed, idx, state_idx=0, conv_kernel_size=conv1d.kernel_size[0]
            )
        pad = weight.shape[-1] - 1
        out = F.conv1d(
            mixed.to(weight.dtype),
            weight.unsqueeze(1),
            conv1d.bias,
            padding=pad,
            groups=weight.shape[0],
        )
        out = out[:, :, : mixed.shape[-1]][:, :, -seq_len:]
    return F.silu(out).to(mixed.dtype)


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


class Qwen3_5GatedDeltaNet(nn.Module):
    """Qwen3.5 / Qwen3-Next gated delta net with the gated delta rule kernels."""

    # Not yet run under torch.compile (the ops have fake implementations, but the
    # training path's recomputing backward calls autograd itself): compile keeps PyTorch.
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
        if attention_mask is not None and attention_mask.dim() == 2:
            hidden_states = (hidden_states * attention_mask[:, :, None]).to(hidden_states.dtype)
        batch, seq_len, _ = hidden_states.shape
        state = (
            cache.get_recurrent_state(self.layer_idx, state_idx=0) if cache is not None else None
        )

        mixed = _conv(self, self.in_proj_qkv(hidden_states).transpose(1, 2), cache).transpose(1, 2)
        query, key, value = torch.split(mixed, [self.key_dim, self.key_dim, self.value_dim], dim=-1)
        query = query.reshape(batch, seq_len, -1, self.head_k_dim)
        key = key.reshape(batch, seq_len, -1, self.head_k_dim)
        value = value.reshape(batch, seq_len, -1, self.head_v_dim)
        z = self.in_proj_z(hidden_states)
        beta = self.in_proj_b(hidden_states).sigmoid()
        g = -self.A_log.float().exp() * F.softplus(
            self.in_proj_a(hidden_states).float() + self.dt_bias
        )

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
            out, new_state = _prefill(self, query, key, value, g, beta, state, cache, seq_len)
        if cache is not None:
            cache.update_recurrent_state(new_state, self.layer_idx)

        out = self.norm(out.reshape(-1, self.head_v_dim), z.reshape(-1, self.head_v_dim))
        return self.out_proj(out.reshape(batch, seq_len, -1))
