"""The layer's causal depthwise convolution + SiLU (``causal_conv1d_silu``, CPU) against
PyTorch's depthwise ``conv1d`` in float64, in the layout the layer hands it: the input
projection's ``[batch, seq, channels]``, with and without the model cache's conv state.
"""

from __future__ import annotations

import gated_delta_rule
import pytest
import torch
import torch.nn.functional as F

TOLERANCE = {
    torch.float32: dict(atol=1e-5, rtol=1e-5),
    torch.bfloat16: dict(atol=1e-2, rtol=1e-2),
    torch.float16: dict(atol=2e-3, rtol=2e-3),
}


def conv_op():
    return gated_delta_rule._ops.ops.causal_conv1d_silu


def cpu_only(target) -> None:
    if target != "cpu":
        pytest.skip("causal_conv1d_silu is a CPU op (the layer runs PyTorch's conv1d elsewhere)")


def reference(x, weight, bias, state, keep):
    """silu(conv1d) over [state's last W - 1 columns or zeros; x], last ``keep`` positions."""
    batch, _, channels = x.shape
    width = weight.shape[1]
    left = (
        state.double()[..., state.shape[-1] - (width - 1) :]
        if state is not None
        else torch.zeros(batch, channels, width - 1, dtype=torch.float64)
    )
    full = torch.cat([left, x.double().transpose(1, 2)], -1)
    out = F.conv1d(
        full, weight.double().unsqueeze(1), None if bias is None else bias.double(), groups=channels
    )
    return F.silu(out)[..., out.shape[-1] - keep :].transpose(1, 2)


def make(dtype, batch=2, seq=37, channels=72, width=4, seed=0):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, seq, channels, generator=gen).to(dtype)
    weight = (0.5 * torch.randn(channels, width, generator=gen)).to(dtype)
    bias = torch.randn(channels, generator=gen).to(dtype)
    return x, weight, bias


@pytest.mark.parametrize("seq,keep", [(37, 37), (37, 5), (1, 1), (3, 3)])
@pytest.mark.parametrize("with_bias", [True, False])
def test_prefill_matches_conv1d(target, dtype, seq, keep, with_bias):
    cpu_only(target)
    x, weight, bias = make(dtype, seq=seq)
    bias = bias if with_bias else None
    got = conv_op()(x, weight, bias, None, keep)
    assert got.shape == (2, keep, 72) and got.dtype == dtype and got.is_contiguous()
    torch.testing.assert_close(
        got.double(), reference(x, weight, bias, None, keep), **TOLERANCE[dtype]
    )


@pytest.mark.parametrize("seq", [1, 2, 6])
@pytest.mark.parametrize("state_width", [4, 3])
def test_with_state_reads_and_advances_it(target, dtype, seq, state_width):
    """Decode: the cache keeps the last W (= 4) inputs; the op reads its last W - 1 and
    leaves the state holding the latest ``state_width`` inputs."""
    cpu_only(target)
    x, weight, bias = make(dtype, seq=seq, seed=seq)
    state = torch.randn(2, 72, state_width, generator=torch.Generator().manual_seed(9)).to(dtype)
    before = state.clone()
    got = conv_op()(x, weight, bias, state, seq)
    torch.testing.assert_close(
        got.double(), reference(x, weight, bias, before, seq), **TOLERANCE[dtype]
    )
    want_state = torch.cat([before, x.transpose(1, 2)], -1)[..., -state_width:]
    assert torch.equal(state, want_state)


@pytest.mark.dtypes(torch.float32)
def test_strided_input_and_large_values(target, dtype):
    """x as the layer passes it (a column slice of a wider projection); inputs far into the
    SiLU's tails (exp over- and underflow) stay finite and exact."""
    cpu_only(target)
    wide, weight, bias = make(dtype, seq=19, channels=100)
    wide = wide * 60.0
    x = wide[:, :, 10:82]
    got = conv_op()(x, weight[:72], bias[:72], None, 19)
    want = reference(x, weight[:72], bias[:72], None, 19)
    assert torch.isfinite(got).all()
    torch.testing.assert_close(got.double(), want, atol=1e-4, rtol=1e-5)


def test_bad_input_is_a_value_error(device):
    if device != "cpu":
        pytest.skip("CPU op")
    x, weight, bias = make(torch.float32, seq=5)
    with pytest.raises(ValueError, match="weight must be"):
        conv_op()(x, weight[:3], bias, None, 5)
    with pytest.raises(ValueError, match="keep must be"):
        conv_op()(x, weight, bias, None, 6)
    with pytest.raises(ValueError, match="state must be"):
        conv_op()(x, weight, bias, torch.zeros(2, 72, 2), 5)
    with pytest.raises(ValueError, match="float32, bfloat16 or float16"):
        conv_op()(x.double(), weight, bias, None, 5)
