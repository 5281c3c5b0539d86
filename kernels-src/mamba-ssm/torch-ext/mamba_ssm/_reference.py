"""The PyTorch formulas of every function: what runs where the kernels do not
apply (other dtypes or devices, unsupported arguments), and what the backward
differentiates (``_recompute``). Written from the published algorithms (the SSD
chunked form of Mamba-2, Mamba-1's selective scan); the tests compare both the
kernels and these against Transformers' own PyTorch paths."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def dt_prepare(dt: torch.Tensor, dt_bias: torch.Tensor | None, softplus: bool,
               limit: tuple[float, float] | None) -> torch.Tensor:
    """dt + bias, softplus, clamp, in dt's dtype (as the models do), then float32."""
    if dt_bias is not None:
        dt = dt + dt_bias.to(dt.dtype)
    if softplus:
        dt = F.softplus(dt)
    if limit is not None:
        dt = torch.clamp(dt, min=limit[0], max=limit[1])
    return dt.float()


def causal_conv1d(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
                  silu: bool) -> torch.Tensor:
    """Depthwise causal conv over [batch, dim, seqlen] with weight [dim, width]."""
    width = weight.shape[-1]
    out = F.conv1d(x.to(weight.dtype), weight.unsqueeze(1), bias, padding=width - 1,
                   groups=x.shape[1])[..., : x.shape[-1]]
    return (F.silu(out) if silu else out).to(x.dtype)


def causal_conv1d_update(x: torch.Tensor, conv_state: torch.Tensor, weight: torch.Tensor,
                         bias: torch.Tensor | None, silu: bool) -> torch.Tensor:
    """Decode steps against the rolling conv state (updated in place)."""
    seqlen, state_len = x.shape[-1], conv_state.shape[-1]
    full = torch.cat([conv_state, x.to(conv_state.dtype)], dim=-1).to(weight.dtype)
    conv_state.copy_(full[..., -state_len:])
    out = F.conv1d(full, weight.unsqueeze(1), bias, groups=x.shape[1])[..., -seqlen:]
    return (F.silu(out) if silu else out).to(x.dtype)


def _heads(t: torch.Tensor, heads: int, dim: int) -> torch.Tensor:
    return t.float().repeat_interleave(heads // t.shape[dim], dim=dim)


def ssd_scan(x: torch.Tensor, dt: torch.Tensor, A: torch.Tensor, B: torch.Tensor,
             C: torch.Tensor, D: torch.Tensor | None, z: torch.Tensor | None,
             initial_states: torch.Tensor | None, chunk_size: int,
             ) -> tuple[torch.Tensor, torch.Tensor]:
    """Mamba-2's scan in the SSD chunked form: within a chunk, a masked
    (C B^T ∘ decay) matmul; across chunks, a recurrence on the chunk-end states.

    x [b, l, h, p]; dt [b, l, h] float (prepared); A [h]; B, C [b, l, g, n];
    D [h] or [h, p]; z like x. Returns (y in x's dtype, final state [b, h, p, n] float).
    """
    b, seqlen, h, p = x.shape
    n = B.shape[-1]
    q = max(1, min(chunk_size, seqlen)) if seqlen else 1
    pad = (q - seqlen % q) % q
    xf = x.float()
    Bh, Ch = _heads(B, h, 2), _heads(C, h, 2)
    xdt = xf * dt[..., None]
    dA = dt * A.float()

    def chunks(t: torch.Tensor) -> torch.Tensor:
        t = F.pad(t, (0, 0) * (t.dim() - 2) + (0, pad))
        return t.reshape(b, -1, q, *t.shape[2:])

    xc, Bc, Cc, dAc = chunks(xdt), chunks(Bh), chunks(Ch), chunks(dA)
    cum = torch.cumsum(dAc, dim=2)                       # [b, c, q, h]
    seg = cum[:, :, :, None, :] - cum[:, :, None, :, :]  # [b, c, i, j, h]
    causal = torch.ones(q, q, dtype=torch.bool, device=x.device).tril()
    decay = torch.exp(seg.masked_fill(~causal[None, None, :, :, None], float("-inf")))
    scores = torch.einsum("bcihn,bcjhn->bcijh", Cc, Bc) * decay
    y = torch.einsum("bcijh,bcjhp->bcihp", scores, xc)
    to_end = torch.exp(cum[:, :, -1:, :] - cum)          # [b, c, q, h]
    chunk_states = torch.einsum("bcjhn,bcjh,bcjhp->bchpn", Bc, to_end, xc)
    state = (initial_states.float() if initial_states is not None
             else xf.new_zeros(b, h, p, n))
    starts = []
    for c in range(xc.shape[1]):
        starts.append(state)
        state = state * torch.exp(cum[:, c, -1, :])[..., None, None] + chunk_states[:, c]
    start = torch.stack(starts, dim=1) if starts else xf.new_zeros(b, 0, h, p, n)
    y = y + torch.einsum("bcihn,bchpn->bcihp", Cc, start) * torch.exp(cum)[..., None]
    y = y.reshape(b, -1, h, p)[:, :seqlen]
    if D is not None:
        y = y + (D.float()[:, None] if D.dim() == 1 else D.float()) * xf
    if z is not None:
        y = y * F.silu(z.float())
    return y.to(x.dtype), state


def ssd_step(state: torch.Tensor, x: torch.Tensor, dt: torch.Tensor, A: torch.Tensor,
             B: torch.Tensor, C: torch.Tensor, D: torch.Tensor | None,
             z: torch.Tensor | None) -> torch.Tensor:
    """One Mamba-2 decode step (state [b, h, p, n] updated in place). dt [b, h, p]
    float (prepared), A [h, p, n], B/C [b, g, n], D [h, p] or [h]."""
    h = x.shape[1]
    Bh, Ch = _heads(B, h, 1), _heads(C, h, 1)
    dA = torch.exp(dt[..., None] * A.float())
    new = state.float() * dA + (dt * x.float())[..., None] * Bh[:, :, None, :]
    state.copy_(new.to(state.dtype))
    out = torch.einsum("bhpn,bhn->bhp", new, Ch)
    if D is not None:
        out = out + (D.float()[:, None] if D.dim() == 1 else D.float()) * x.float()
    if z is not None:
        out = out * F.silu(z.float())
    return out.to(x.dtype)


def selective_scan(u: torch.Tensor, delta: torch.Tensor, A: torch.Tensor, B: torch.Tensor,
                   C: torch.Tensor, D: torch.Tensor | None, z: torch.Tensor | None,
                   ) -> tuple[torch.Tensor, torch.Tensor]:
    """Mamba-1's selective scan, token by token. u [b, d, l]; delta [b, d, l] float
    (prepared); A [d, n]; B/C [b, g, n, l]; D [d]. Returns (out, last state [b, d, n])."""
    b, d, seqlen = u.shape
    Bh, Ch = _heads(B, d, 1), _heads(C, d, 1)  # [b, d, n, l]
    uf = u.float()
    dA = torch.exp(delta[:, :, None, :] * A.float()[None, :, :, None])
    dBu = (delta * uf)[:, :, None, :] * Bh
    state = uf.new_zeros(b, d, A.shape[-1])
    ys = []
    for t in range(seqlen):
        state = dA[..., t] * state + dBu[..., t]
        ys.append((state * Ch[..., t]).sum(-1))
    y = torch.stack(ys, dim=-1) if ys else uf.new_zeros(b, d, 0)
    if D is not None:
        y = y + D.float()[:, None] * uf
    if z is not None:
        y = y * F.silu(z.float())
    return y.to(u.dtype), state
