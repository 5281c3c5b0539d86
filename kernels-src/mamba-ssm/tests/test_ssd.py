"""Mamba-2: mamba_chunk_scan_combined and selective_state_update against a
token-by-token float64 oracle, with Transformers' argument shapes."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F


def _inputs(dtype, b=2, seqlen=45, h=8, p=16, g=2, n=32, seed=0):
    torch.manual_seed(seed)
    return dict(
        x=torch.randn(b, seqlen, h, p, dtype=dtype),
        dt=torch.randn(b, seqlen, h, dtype=dtype),
        A=-torch.exp(torch.rand(h)),
        B=torch.randn(b, seqlen, g, n, dtype=dtype),
        C=torch.randn(b, seqlen, g, n, dtype=dtype),
    )


def _dt_final(dt, bias, limit=(0.0, float("inf"))):
    return torch.clamp(F.softplus(dt.double() + bias.double()), *limit)


@pytest.mark.parametrize("chunk", [16, 64])
@pytest.mark.parametrize("extras", ["plain", "D-z-init"])
def test_scan_matches_recurrence(ref, target, dtype, chunk, extras) -> None:
    import mamba_ssm

    t = _inputs(dtype)
    h, p, n = 8, 16, 32
    bias = torch.randn(h)
    kw = {}
    if extras != "plain":
        kw = dict(D=torch.randn(h), z=torch.randn_like(t["x"]),
                  initial_states=torch.randn(2, h, p, n))
    dev = {k: v.to(target) for k, v in {**t, **kw}.items()}
    y, final = mamba_ssm.mamba_chunk_scan_combined(
        **dev, chunk_size=chunk, dt_bias=bias.to(target), dt_softplus=True,
        return_final_states=True)
    ref_y, ref_s = ref.ssd(t["x"], _dt_final(t["dt"], bias), t["A"], t["B"], t["C"],
                       kw.get("D"), kw.get("z"), kw.get("initial_states"))
    assert y.dtype == dtype and final.dtype == torch.float32
    scale = ref_y.abs().max()
    torch.testing.assert_close(y.double().cpu() / scale, ref_y / scale, **ref.tolerance(dtype))
    s_scale = ref_s.abs().max()
    torch.testing.assert_close(final.double().cpu() / s_scale, ref_s / s_scale,
                               **ref.tolerance(dtype))


def test_scan_with_model_views_and_dt_limit(ref, target, dtype) -> None:
    """Transformers passes x, B and C as views into one projection (strided rows)
    and D per head; dt_limit clamps."""
    import mamba_ssm

    torch.manual_seed(5)
    b, seqlen, h, p, g, n = 1, 33, 4, 8, 1, 16
    packed = torch.randn(b, seqlen, h * p + 2 * g * n, dtype=dtype)
    x = packed[..., : h * p].view(b, seqlen, h, p)
    B = packed[..., h * p: h * p + g * n].view(b, seqlen, g, n)
    C = packed[..., h * p + g * n:].view(b, seqlen, g, n)
    dt, A, D, bias = torch.randn(b, seqlen, h, dtype=dtype), -torch.rand(h) - 0.1, torch.randn(h), torch.randn(h)
    y = mamba_ssm.mamba_chunk_scan_combined(
        x.to(target), dt.to(target), A.to(target), B.to(target), C.to(target), 16,
        D=D.to(target), dt_bias=bias.to(target), dt_softplus=True, dt_limit=(0.01, 0.5))
    want_y, _ = ref.ssd(x, _dt_final(dt, bias, (0.01, 0.5)), A, B, C, D)
    scale = want_y.abs().max()
    torch.testing.assert_close(y.double().cpu() / scale, want_y / scale, **ref.tolerance(dtype))


def test_scan_matches_transformers_torch_path(target) -> None:
    modeling = pytest.importorskip("transformers.models.mamba2.modeling_mamba2")
    import mamba_ssm

    t = _inputs(torch.float32, seqlen=70)
    kw = dict(D=torch.randn(8), dt_bias=torch.randn(8), dt_softplus=True,
              initial_states=torch.randn(2, 8, 16, 32), return_final_states=True)
    ref_y, ref_s = modeling.mamba2_chunk_scan(t["x"], t["dt"], t["A"], t["B"], t["C"], 32, **kw)
    y, s = mamba_ssm.mamba_chunk_scan_combined(
        **{k: v.to(target) for k, v in t.items()}, chunk_size=32,
        **{k: v.to(target) if isinstance(v, torch.Tensor) else v for k, v in kw.items()})
    torch.testing.assert_close(y.cpu(), ref_y.float(), atol=2e-4, rtol=2e-4)
    torch.testing.assert_close(s.cpu(), ref_s, atol=2e-4, rtol=2e-4)


def test_scan_backward_matches_recurrence(ref, target) -> None:
    import mamba_ssm

    t = _inputs(torch.float32, b=1, seqlen=20, h=4, p=4, g=2, n=8)
    D, bias, init = torch.randn(4), torch.randn(4), torch.randn(1, 4, 4, 8)
    leaves = {k: v.clone().requires_grad_() for k, v in {**t, "D": D, "bias": bias, "init": init}.items()}
    y, s = mamba_ssm.mamba_chunk_scan_combined(
        leaves["x"], leaves["dt"], leaves["A"], leaves["B"], leaves["C"], 8, D=leaves["D"],
        dt_bias=leaves["bias"], initial_states=leaves["init"], dt_softplus=True,
        return_final_states=True)
    gy, gs = torch.randn_like(y), torch.randn_like(s)
    got = torch.autograd.grad([y, s], list(leaves.values()), [gy, gs])
    ref_leaves = {k: v.detach().double().requires_grad_() for k, v in leaves.items()}
    r = ref_leaves
    ry, rs = ref.ssd(r["x"], F.softplus(r["dt"] + r["bias"]), r["A"], r["B"], r["C"], r["D"], None, r["init"])
    want = torch.autograd.grad([ry, rs], list(r.values()), [gy.double(), gs.double()])
    for name, g_, w_ in zip(leaves, got, want, strict=True):
        torch.testing.assert_close(g_.double(), w_, atol=1e-3, rtol=1e-3, msg=name)


@pytest.mark.parametrize("state_dtype", ["float32", "input"])
def test_state_update_with_transformers_broadcast_arguments(ref, target, dtype, state_dtype) -> None:
    """Exactly how Mamba2's decode calls it: dt, A, D and dt_bias expanded over headdim."""
    import mamba_ssm

    torch.manual_seed(7)
    b, h, p, g, n = 2, 6, 8, 3, 16
    sdt = torch.float32 if state_dtype == "float32" else dtype
    state = torch.randn(b, h, p, n).to(sdt)
    x, z = torch.randn(b, h, p, dtype=dtype), torch.randn(b, h, p, dtype=dtype)
    dt = torch.randn(b, h, 1, dtype=dtype)
    A, D, bias = -torch.rand(h) - 0.1, torch.randn(h), torch.randn(h)
    B, C = torch.randn(b, g, n, dtype=dtype), torch.randn(b, g, n, dtype=dtype)
    s = state.to(target).clone()
    out = mamba_ssm.selective_state_update(
        s, x.to(target), dt.to(target).expand(-1, -1, p), A.to(target)[:, None, None].expand(-1, p, n),
        B.to(target), C.to(target), D.to(target)[:, None].expand(-1, p), z=z.to(target),
        dt_bias=bias.to(target)[:, None].expand(-1, p), dt_softplus=True)
    dtf = F.softplus(dt[..., 0].double() + bias.double())
    ref_y, ref_s = ref.ssd(x[:, None], dtf[:, None], A, B[:, None], C[:, None], D, z[:, None], state)
    assert out.dtype == dtype and s.dtype == sdt
    scale = ref_y.abs().max()
    torch.testing.assert_close(out.double().cpu() / scale, ref_y[:, 0] / scale, **ref.tolerance(dtype))
    # bf16 inputs round dt as the models do, so the input dtype sets the tolerance
    torch.testing.assert_close(s.double().cpu(), ref_s, **ref.tolerance(dtype))


def test_state_update_mamba1_shapes_run_the_pytorch_formula(target) -> None:
    """Mamba-1's decode (no heads, A per channel and state) gives the recurrence."""
    import mamba_ssm

    torch.manual_seed(8)
    b, d, n = 2, 12, 8
    state, x, dt, z = torch.randn(b, d, n), torch.randn(b, d), torch.randn(b, d), torch.randn(b, d)
    A, B, C, D, bias = -torch.rand(d, n), torch.randn(b, n), torch.randn(b, n), torch.randn(d), torch.randn(d)
    s = state.to(target).clone()
    out = mamba_ssm.selective_state_update(s, x.to(target), dt.to(target), A.to(target), B.to(target),
                                           C.to(target), D.to(target), z=z.to(target),
                                           dt_bias=bias.to(target), dt_softplus=True)
    dl = F.softplus(dt + bias)
    new = state * torch.exp(dl[..., None] * A) + (dl * x)[..., None] * B[:, None]
    want_y = ((new * C[:, None]).sum(-1) + D * x) * F.silu(z)
    torch.testing.assert_close(out.cpu(), want_y, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(s.cpu(), new, atol=1e-5, rtol=1e-5)


def test_packed_sequences_are_refused_with_a_message(target) -> None:
    import mamba_ssm

    t = {k: v.to(target) for k, v in _inputs(torch.float32, seqlen=4).items()}
    with pytest.raises(ValueError, match="packed sequences"):
        mamba_ssm.mamba_chunk_scan_combined(**t, chunk_size=4,
                                            seq_idx=torch.zeros(2, 4, dtype=torch.int32))


# (heads, headdim, dstate, seqlen): Mamba-2 130m's and 370m's mixers (24 and 32 heads
# of 64, dstate 128, one group), and Falcon-H1's config defaults (128 heads of 8,
# dstate 256), at lengths around and across the chunk of 256 the models pass.
MODEL_SHAPES = [
    pytest.param(24, 64, 128, 1, id="mamba2-130m-1"),
    pytest.param(24, 64, 128, 257, id="mamba2-130m-257"),
    pytest.param(32, 64, 128, 600, id="mamba2-370m-600"),
    pytest.param(32, 64, 128, 2048, id="mamba2-370m-2048"),
    pytest.param(128, 8, 256, 300, id="falcon-h1-300"),
]


@pytest.mark.parametrize(("h", "p", "n", "seqlen"), MODEL_SHAPES)
def test_scan_at_model_shapes_matches_transformers(target, dtype, h, p, n, seqlen) -> None:
    """The models' own PyTorch scan (chunk 256, dt bias + softplus + limit, D, an
    initial state, the final state) is the oracle; it runs in float32 on the same
    (dtype-rounded) inputs."""
    family = "falcon_h1" if p == 8 else "mamba2"
    modeling = pytest.importorskip(f"transformers.models.{family}.modeling_{family}")
    import mamba_ssm

    torch.manual_seed(seqlen)
    x = torch.randn(1, seqlen, h, p, dtype=dtype)
    dt = torch.randn(1, seqlen, h, dtype=dtype)
    A = -torch.exp(torch.rand(h) * 2)
    B = torch.randn(1, seqlen, 1, n, dtype=dtype)
    C = torch.randn(1, seqlen, 1, n, dtype=dtype)
    kw = dict(D=torch.randn(h), dt_bias=torch.randn(h) - 2, dt_softplus=True,
              initial_states=torch.randn(1, h, p, n), dt_limit=(0.0, 0.3),
              return_final_states=True)
    with torch.no_grad():
        want_y, want_s = modeling.mamba2_chunk_scan(x.float(), dt, A, B.float(), C.float(), 256, **kw)
        y, s = mamba_ssm.mamba_chunk_scan_combined(
            x.to(target), dt.to(target), A.to(target), B.to(target), C.to(target), 256,
            **{k: v.to(target) if isinstance(v, torch.Tensor) else v for k, v in kw.items()})
    assert y.shape == x.shape and y.dtype == dtype and s.dtype == torch.float32
    tol = {"atol": 1e-3, "rtol": 1e-3} if dtype == torch.float32 else {"atol": 2e-2, "rtol": 2e-2}
    scale = want_y.abs().max()
    torch.testing.assert_close(y.float().cpu() / scale, want_y.float() / scale, **tol)
    s_scale = want_s.abs().max()
    torch.testing.assert_close(s.cpu() / s_scale, want_s / s_scale, **tol)


@pytest.mark.parametrize("seqlen", [1, 63, 64, 65, 300])
def test_scan_gate_and_chunk_edges_match_recurrence(ref, target, dtype, seqlen) -> None:
    """z gating, D per channel, no initial state, at lengths on both sides of the CPU
    loops' chunk (64) and the caller's (256); 8 heads of 16 in 2 groups."""
    import mamba_ssm

    t = _inputs(dtype, b=1, seqlen=seqlen, seed=seqlen)
    h, p = 8, 16
    D, z, bias = torch.randn(h, p), torch.randn_like(t["x"]), torch.randn(h)
    dev = {k: v.to(target) for k, v in t.items()}
    y, s = mamba_ssm.mamba_chunk_scan_combined(
        **dev, chunk_size=256, D=D.to(target), z=z.to(target), dt_bias=bias.to(target),
        dt_softplus=True, return_final_states=True)
    want_y, want_s = ref.ssd(t["x"], _dt_final(t["dt"], bias), t["A"], t["B"], t["C"], D, z)
    scale, s_scale = want_y.abs().max(), want_s.abs().max()
    torch.testing.assert_close(y.double().cpu() / scale, want_y / scale, **ref.tolerance(dtype))
    torch.testing.assert_close(s.double().cpu() / s_scale, want_s / s_scale, **ref.tolerance(dtype))
