"""The chunked gated delta rule in differentiable PyTorch, for the backward pass.

The same chunked (UT transform) form as the kernels, batched over every head and with
``solve_triangular`` for the forward substitution, in float32 whatever the input dtype.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def _normalized(x: torch.Tensor, l2norm: bool) -> torch.Tensor:
    x = x.float()
    return x * torch.rsqrt((x * x).sum(-1, keepdim=True) + 1e-6) if l2norm else x


def chunked_gated_delta_rule(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    g: torch.Tensor,
    beta: torch.Tensor,
    scale: float,
    initial_state: torch.Tensor | None,
    l2norm: bool,
    chunk_size: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(out [B, T, Hv, Dv] in v's dtype, final state [B, Hv, Dk, Dv] float32)."""
    batch, seq, key_heads, key_dim = k.shape
    heads, value_dim = v.shape[2], v.shape[3]
    group = heads // key_heads
    qf = (_normalized(q, l2norm) * scale).repeat_interleave(group, dim=2)
    kf = _normalized(k, l2norm).repeat_interleave(group, dim=2)
    pad = (-seq) % chunk_size
    chunks = (seq + pad) // chunk_size

    def blocks(x: torch.Tensor) -> torch.Tensor:  # [B, T, H, D] -> [B, H, N, C, D]
        x = F.pad(x.float().transpose(1, 2), (0, 0, 0, pad))
        return x.reshape(batch, heads, chunks, chunk_size, x.shape[-1])

    qc, kc, vc = blocks(qf), blocks(kf), blocks(v)
    gc = F.pad(g.float().transpose(1, 2), (0, pad)).reshape(batch, heads, chunks, chunk_size)
    bc = F.pad(beta.float().transpose(1, 2), (0, pad)).reshape(batch, heads, chunks, chunk_size)
    cum = gc.cumsum(-1)
    later = torch.ones(chunk_size, chunk_size, dtype=torch.bool, device=q.device).triu(1)
    decay = (cum.unsqueeze(-1) - cum.unsqueeze(-2)).masked_fill(later, float("-inf")).exp()
    system = (bc.unsqueeze(-1) * (kc @ kc.transpose(-1, -2)) * decay).tril(-1)
    system = system + torch.eye(chunk_size, device=q.device)
    attn = (qc @ kc.transpose(-1, -2)) * decay
    to_end = (cum[..., -1:] - cum).exp()
    state = (
        torch.zeros(batch, heads, key_dim, value_dim, device=q.device)
        if initial_state is None
        else initial_state.float()
    )
    outs = []
    for n in range(chunks):
        grow = cum[:, :, n].exp().unsqueeze(-1)
        rhs = bc[:, :, n].unsqueeze(-1) * (vc[:, :, n] - grow * (kc[:, :, n] @ state))
        new_values = torch.linalg.solve_triangular(
            system[:, :, n], rhs, upper=False, unitriangular=True
        )
        outs.append(grow * (qc[:, :, n] @ state) + attn[:, :, n] @ new_values)
        keys = kc[:, :, n] * to_end[:, :, n].unsqueeze(-1)
        state = (
            cum[:, :, n, -1].exp()[..., None, None] * state + keys.transpose(-1, -2) @ new_values
        )
    out = torch.stack(outs, dim=2).reshape(batch, heads, -1, value_dim)[:, :, :seq]
    return out.transpose(1, 2).to(v.dtype).contiguous(), state
