"""Mamba-1's selective_scan_fn against a token-by-token float64 oracle."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F


def _inputs(dtype, b=2, d=24, seqlen=19, n=16, seed=0):
    torch.manual_seed(seed)
    return (torch.randn(b, d, seqlen, dtype=dtype), torch.randn(b, d, seqlen, dtype=dtype),
            -torch.rand(d, n) - 0.1, torch.randn(b, n, seqlen, dtype=dtype),
            torch.randn(b, n, seqlen, dtype=dtype))


@pytest.mark.parametrize("model_layout", [True, False], ids=["transposed-B-C", "contiguous"])
def test_selective_scan_matches_recurrence(ref, target, dtype, model_layout) -> None:
    import mamba_ssm

    u, delta, A, B, C = _inputs(dtype)
    if model_layout:  # Transformers passes B and C as [b, l, n].transpose(1, 2)
        B, C = B.transpose(1, 2).contiguous().transpose(1, 2), C.transpose(1, 2).contiguous().transpose(1, 2)
    D, bias, z = torch.randn(24), torch.randn(24), torch.randn_like(u)
    out, last = mamba_ssm.selective_scan_fn(
        *(t.to(target) for t in (u, delta, A, B, C)), D=D.to(target), z=z.to(target),
        delta_bias=bias.to(target), delta_softplus=True, return_last_state=True)
    dl = F.softplus(delta.double() + bias.double()[:, None])
    want_y, ref_s = ref.selective_scan(u, dl, A, B[:, None], C[:, None], D, z)
    assert out.dtype == dtype
    scale = want_y.abs().max()
    torch.testing.assert_close(out.double().cpu() / scale, want_y / scale, **ref.tolerance(dtype))
    torch.testing.assert_close(last.double().cpu(), ref_s, **ref.tolerance(dtype))


def test_selective_scan_matches_transformers_torch_path(target) -> None:
    modeling = pytest.importorskip("transformers.models.mamba.modeling_mamba")
    import mamba_ssm

    u, delta, A, B, C = _inputs(torch.float32)
    D, bias, z = torch.randn(24), torch.randn(24), torch.randn_like(u)
    want_y = modeling.mamba_selective_scan(u, delta, A, B, C, D=D, z=z, delta_bias=bias,
                                        delta_softplus=True)
    out = mamba_ssm.selective_scan_fn(*(t.to(target) for t in (u, delta, A, B, C)), D=D.to(target),
                                      z=z.to(target), delta_bias=bias.to(target), delta_softplus=True)
    torch.testing.assert_close(out.cpu(), want_y, atol=1e-4, rtol=1e-4)


def test_selective_scan_backward_matches_recurrence(ref, target) -> None:
    import mamba_ssm

    u, delta, A, B, C = _inputs(torch.float32, b=1, d=6, seqlen=9, n=4)
    leaves = [t.clone().requires_grad_() for t in (u, delta, A, B, C, torch.randn(6), torch.randn_like(u))]
    out = mamba_ssm.selective_scan_fn(*leaves[:5], D=leaves[5], z=leaves[6], delta_softplus=True)
    g = torch.randn_like(out)
    got = torch.autograd.grad(out, leaves, g)
    r = [t.detach().double().requires_grad_() for t in leaves]
    want_y, _ = ref.selective_scan(r[0], F.softplus(r[1]), r[2], r[3][:, None], r[4][:, None], r[5], r[6])
    want = torch.autograd.grad(want_y, r, g.double())
    for a, b_ in zip(got, want, strict=True):
        torch.testing.assert_close(a.double(), b_, atol=1e-4, rtol=1e-4)
