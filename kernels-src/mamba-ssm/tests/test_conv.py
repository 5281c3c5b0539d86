"""causal_conv1d_fn / causal_conv1d_update against the definition, in both
layouts the models pass (channel-last views and contiguous), fp32 and bf16."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F


def _close(ref, out: torch.Tensor, expected: torch.Tensor, dtype: torch.dtype) -> None:
    torch.testing.assert_close(out.double().cpu(), expected, **ref.tolerance(dtype))


@pytest.mark.parametrize("channel_last", [True, False], ids=["channel-last", "contiguous"])
@pytest.mark.parametrize("width", [2, 3, 4])
@pytest.mark.parametrize("d", [80, 83], ids=["blocks-of-8", "tail-channels"])
@pytest.mark.parametrize("seqlen", [37, 150], ids=["one-row-block", "row-blocks"])
def test_conv_matches_definition(ref, target, dtype, channel_last, width, d, seqlen) -> None:
    """Channel-last rows run the loop compiled per width over blocks of 8 channels and
    64 rows: channels past the last block of 8 and rows past a block's first."""
    import mamba_ssm

    torch.manual_seed(0)
    b = 2
    x = torch.randn(b, seqlen, d, dtype=dtype).transpose(1, 2) if channel_last \
        else torch.randn(b, d, seqlen, dtype=dtype)
    w, bias = torch.randn(d, width, dtype=dtype), torch.randn(d, dtype=dtype)
    for act, b_ in (("silu", bias), (None, None)):
        out = mamba_ssm.causal_conv1d_fn(x.to(target), w.to(target),
                                          None if b_ is None else b_.to(target), activation=act)
        assert out.shape == x.shape and out.dtype == dtype
        _close(ref, out, ref.conv(x, w, b_, act == "silu"), dtype)
    if channel_last:
        assert out.stride(1) == 1, "channel-last input gives channel-last output"


def test_conv_initial_and_final_states(ref, target, dtype) -> None:
    import mamba_ssm

    torch.manual_seed(1)
    x, w = torch.randn(2, 16, 9, dtype=dtype), torch.randn(16, 4, dtype=dtype)
    init = torch.randn(2, 16, 3, dtype=dtype)
    out, final = mamba_ssm.causal_conv1d_fn(x.to(target), w.to(target), None,
                                            initial_states=init.to(target),
                                            return_final_states=True, activation="silu")
    full = ref.conv(torch.cat([init, x], -1), w, None, True)[..., 3:]
    _close(ref, out, full, dtype)
    torch.testing.assert_close(final.cpu(), x[..., -3:])


def test_conv_update_matches_definition_and_rolls_state(ref, target, dtype) -> None:
    import mamba_ssm

    torch.manual_seed(2)
    b, d, width = 3, 48, 4
    w, bias = torch.randn(d, width, dtype=dtype), torch.randn(d, dtype=dtype)
    state = torch.randn(b, d, width, dtype=dtype)  # Transformers keeps `width` positions
    for seqlen in (1, 2):
        x = torch.randn(b, d, seqlen, dtype=dtype)
        s = state.to(target).clone()
        out = mamba_ssm.causal_conv1d_update(x.to(target), s, w.to(target), bias.to(target),
                                             activation="silu")
        full = torch.cat([state, x], -1)
        _close(ref, out, ref.conv(full, w, bias, True)[..., -seqlen:], dtype)
        torch.testing.assert_close(s.cpu(), full[..., -width:])
    x2 = torch.randn(b, d, dtype=dtype)  # the 2-D form of the causal_conv1d package
    s = state.to(target).clone()
    out2 = mamba_ssm.causal_conv1d_update(x2.to(target), s, w.to(target), None)
    assert out2.shape == (b, d)
    _close(ref, out2, ref.conv(torch.cat([state, x2[..., None]], -1), w, None, False)[..., -1], dtype)


def test_conv_backward_matches_autograd(target) -> None:
    import mamba_ssm

    torch.manual_seed(3)
    x = torch.randn(2, 11, 24).transpose(1, 2)  # channel-last, as the models pass it
    w, bias = torch.randn(24, 4), torch.randn(24)
    inputs = [t.to(target).requires_grad_() for t in (x, w, bias)]
    out = mamba_ssm.causal_conv1d_fn(*inputs, activation="silu")
    grad = torch.randn_like(out)
    got = torch.autograd.grad(out, inputs, grad)
    ref_in = [t.detach().clone().requires_grad_() for t in inputs]
    ref = F.silu(F.conv1d(ref_in[0], ref_in[1][:, None], ref_in[2], padding=3, groups=24)[..., :11])
    want = torch.autograd.grad(ref, ref_in, grad)
    for g, r in zip(got, want, strict=True):
        torch.testing.assert_close(g, r, atol=1e-4, rtol=1e-4)


def test_unsupported_arguments_are_refused_with_a_message(target) -> None:
    import mamba_ssm

    x, w = torch.randn(1, 8, 5).to(target), torch.randn(8, 4).to(target)
    with pytest.raises(ValueError, match="activation 'gelu'"):
        mamba_ssm.causal_conv1d_fn(x, w, activation="gelu")
    with pytest.raises(ValueError, match="seq_idx"):
        mamba_ssm.causal_conv1d_fn(x, w, seq_idx=torch.zeros(1, 5, dtype=torch.int32))


def test_other_dtypes_run_the_pytorch_formula(ref, target) -> None:
    import mamba_ssm

    x, w = torch.randn(1, 8, 5, dtype=torch.float64), torch.randn(8, 4, dtype=torch.float64)
    out = mamba_ssm.causal_conv1d_fn(x.to(target), w.to(target), activation="silu")
    assert out.dtype == torch.float64
    torch.testing.assert_close(out.cpu(), ref.conv(x, w, None, True))


@pytest.mark.parametrize("state_len", [3, 4], ids=["package-state", "transformers-state"])
def test_conv_update_decode_step_across_channel_blocks(ref, target, dtype, state_len) -> None:
    """The one-token step at a width of 4 (the loop compiled for that shape), over more
    channels than one work item's block of 256, with the state the causal_conv1d package
    keeps (width - 1) and the one Transformers keeps (width)."""
    import mamba_ssm

    torch.manual_seed(state_len)
    b, d, width = 2, 603, 4  # 603: the last block's channels end past a multiple of 8
    w, bias = torch.randn(d, width, dtype=dtype), torch.randn(d, dtype=dtype)
    state = torch.randn(b, d, state_len, dtype=dtype)
    xs = torch.randn(b, 2 * d, dtype=dtype)
    for x in (xs[:, :d], xs[:, ::2]):  # a slice of a projection, and a strided view
        for act, b_ in (("silu", bias), (None, None)):
            s = state.to(target).clone()
            out = mamba_ssm.causal_conv1d_update(x.to(target), s, w.to(target),
                                                 None if b_ is None else b_.to(target),
                                                 activation=act)
            full = torch.cat([state, x[..., None]], -1)
            assert out.shape == (b, d) and out.dtype == dtype
            _close(ref, out, ref.conv(full, w, b_, act == "silu")[..., -1], dtype)
            torch.testing.assert_close(s.cpu(), full[..., -state_len:])
