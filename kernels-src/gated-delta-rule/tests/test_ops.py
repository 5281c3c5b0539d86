"""Both ops against the gated delta rule itself (float64, token by token, from the
paper's recurrence) and against the PyTorch fallbacks Transformers runs today.

The builder's test runner registers the built variant as ``gated_delta_rule``.
"""

from __future__ import annotations

import gated_delta_rule
import pytest
import torch
import torch.nn.functional as F

TOLERANCE = {
    torch.float32: dict(atol=2e-4, rtol=1e-3),
    torch.bfloat16: dict(atol=3e-2, rtol=3e-2),
    torch.float16: dict(atol=3e-3, rtol=3e-3),
}


def make_inputs(
    device: str,
    dtype: torch.dtype,
    batch=2,
    seq=37,
    key_heads=2,
    heads=4,
    key_dim=32,
    value_dim=48,
    state=True,
) -> dict:
    gen = torch.Generator().manual_seed(seq * 131 + heads)

    def rand(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=gen)

    inputs = dict(
        query=rand(batch, seq, key_heads, key_dim).to(device, dtype),
        key=rand(batch, seq, key_heads, key_dim).to(device, dtype),
        value=rand(batch, seq, heads, value_dim).to(device, dtype),
        g=(-F.softplus(rand(batch, seq, heads))).to(device),  # the models pass g in float32
        beta=torch.rand(batch, seq, heads, generator=gen).to(device, dtype),
    )
    if state:
        inputs["initial_state"] = (0.1 * rand(batch, heads, key_dim, value_dim)).to(device)
    return inputs


def recurrence(query, key, value, g, beta, initial_state=None, l2norm=True, scale=None):
    """o_t = S_t^T q_t with S_t = a_t S (I - b_t k k^T) + b_t k v^T, in float64."""
    q, k, v, g, beta = (x.double().cpu() for x in (query, key, value, g, beta))
    group = v.shape[2] // k.shape[2]
    q, k = q.repeat_interleave(group, 2), k.repeat_interleave(group, 2)
    if l2norm:
        q = q / torch.sqrt((q * q).sum(-1, keepdim=True) + 1e-6)
        k = k / torch.sqrt((k * k).sum(-1, keepdim=True) + 1e-6)
    q = q * (k.shape[-1] ** -0.5 if scale is None else scale)
    batch, seq, heads, _ = v.shape
    state = torch.zeros(batch, heads, k.shape[-1], v.shape[-1], dtype=torch.float64)
    if initial_state is not None:
        state = initial_state.double().cpu().clone()
    out = torch.empty_like(v)
    for t in range(seq):
        kt, vt, bt = k[:, t], v[:, t], beta[:, t, :, None]
        state = state * g[:, t].exp()[..., None, None]
        delta = bt * (vt - torch.einsum("bhkv,bhk->bhv", state, kt))
        state = state + torch.einsum("bhk,bhv->bhkv", kt, delta)
        out[:, t] = torch.einsum("bhkv,bhk->bhv", state, q[:, t])
    return out, state


def check(got: torch.Tensor, want: torch.Tensor, dtype: torch.dtype) -> None:
    torch.testing.assert_close(got.double().cpu(), want.double(), **TOLERANCE[dtype])


@pytest.mark.parametrize("seq,chunk_size", [(37, 64), (37, 16), (130, 64), (1, 64)])
@pytest.mark.parametrize("with_state", [True, False])
def test_chunk_matches_recurrence(target, dtype, seq, chunk_size, with_state):
    inputs = make_inputs(target, dtype, seq=seq, state=with_state)
    out, state = gated_delta_rule.chunk_gated_delta_rule(
        **inputs, chunk_size=chunk_size, output_final_state=True, use_qk_l2norm_in_kernel=True
    )
    want_out, want_state = recurrence(**inputs)
    assert out.dtype == dtype and state.dtype == torch.float32
    check(out, want_out, dtype)
    check(state, want_state, dtype)


@pytest.mark.dtypes(torch.float32, torch.bfloat16)
@pytest.mark.parametrize("threads", [1, 4])
def test_chunk_with_and_without_shared_key_heads(target, dtype, threads):
    """One thread: a task is a key head and its value heads (q/k work shared); more
    threads than (batch, key head) pairs: a task per value head. Both give the rule."""
    inputs = make_inputs(target, dtype, batch=1, seq=70, key_heads=2, heads=6)
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        out, state = gated_delta_rule.chunk_gated_delta_rule(
            **inputs, output_final_state=True, use_qk_l2norm_in_kernel=True
        )
    finally:
        torch.set_num_threads(previous)
    want_out, want_state = recurrence(**inputs)
    check(out, want_out, dtype)
    check(state, want_state, dtype)


@pytest.mark.parametrize("seq", [1, 5])
def test_recurrent_matches_recurrence(target, dtype, seq):
    inputs = make_inputs(target, dtype, seq=seq)
    out, state = gated_delta_rule.fused_recurrent_gated_delta_rule(
        **inputs, output_final_state=True, use_qk_l2norm_in_kernel=True
    )
    want_out, want_state = recurrence(**inputs)
    check(out, want_out, dtype)
    check(state, want_state, dtype)


@pytest.mark.dtypes(torch.float32)
def test_without_l2norm_and_with_scale(target, dtype):
    inputs = make_inputs(target, dtype, seq=20)
    inputs["query"] = inputs["query"] * 0.2
    inputs["key"] = inputs["key"] * 0.2  # keep the un-normalised rule stable
    for op in (
        gated_delta_rule.chunk_gated_delta_rule,
        gated_delta_rule.fused_recurrent_gated_delta_rule,
    ):
        out, _ = op(**inputs, use_qk_l2norm_in_kernel=False, scale=0.3)
        check(out, recurrence(**inputs, l2norm=False, scale=0.3)[0], dtype)


@pytest.mark.dtypes(torch.float32)
def test_final_state_only_when_asked_and_input_state_untouched(target, dtype):
    inputs = make_inputs(target, dtype, seq=9)
    before = inputs["initial_state"].clone()
    out, state = gated_delta_rule.chunk_gated_delta_rule(**inputs)
    assert state is None and out.shape == inputs["value"].shape
    assert torch.equal(inputs["initial_state"], before)


@pytest.mark.dtypes(torch.float32)
def test_strided_inputs(target, dtype):
    """q/k/v as the model makes them: views into one projection, split on the last dim."""
    inputs = make_inputs(target, dtype, seq=21)
    mixed = torch.cat(
        [inputs["query"].flatten(2), inputs["key"].flatten(2), inputs["value"].flatten(2)], -1
    )
    q, k, v = torch.split(mixed, [64, 64, 192], dim=-1)
    views = dict(
        inputs,
        query=q.unflatten(2, (2, 32)),
        key=k.unflatten(2, (2, 32)),
        value=v.unflatten(2, (4, 48)),
    )
    out, _ = gated_delta_rule.chunk_gated_delta_rule(**views, use_qk_l2norm_in_kernel=True)
    check(out, recurrence(**inputs)[0], dtype)


def test_bad_input_is_a_value_error(device):
    inputs = make_inputs(device, torch.float32, seq=4)
    with pytest.raises(ValueError, match="multiple of key heads"):
        gated_delta_rule.chunk_gated_delta_rule(**dict(inputs, value=inputs["value"][:, :, :3]))
    with pytest.raises(ValueError, match="initial_state must be"):
        gated_delta_rule.fused_recurrent_gated_delta_rule(
            **dict(inputs, initial_state=inputs["initial_state"][:1])
        )
    with pytest.raises(ValueError, match="float32, bfloat16 or float16"):
        gated_delta_rule.chunk_gated_delta_rule(**{k: v.double() for k, v in inputs.items()})
    with pytest.raises(ValueError, match="packed sequences"):
        gated_delta_rule.chunk_gated_delta_rule(**inputs, cu_seqlens=torch.tensor([0, 2, 4]))


# ---- torch.compile: the ops' Meta kernels -----------------------------------------------


def _opcheck_cases(device: str):
    inputs = make_inputs(device, torch.float32, seq=9, key_dim=16, value_dim=16)
    args = tuple(inputs[k] for k in ("query", "key", "value", "g", "beta"))
    yield "chunk_gated_delta_rule_fwd", (*args, 0.25, inputs["initial_state"], True, 4)
    yield "chunk_gated_delta_rule_fwd", (*args, 0.25, None, False, 64)
    yield "recurrent_gated_delta_rule_fwd", (*args, 0.25, inputs["initial_state"], True)
    if device == "cpu":
        x = torch.randn(2, 7, 24, generator=torch.Generator().manual_seed(3))
        weight, state = torch.randn(24, 4), torch.randn(2, 24, 4)
        yield "causal_conv1d_silu", (x, weight, torch.randn(24), None, 7)
        yield "causal_conv1d_silu", (x[:, -1:], weight, None, state, 1)


def test_opcheck(device):
    """Schema, Meta kernels (FakeTensor) and dispatch agree with the real ops."""
    for name, args in _opcheck_cases(device):
        op = getattr(gated_delta_rule._ops.ops, name).default
        torch.library.opcheck(op, args, test_utils=("test_schema", "test_faketensor"))


@pytest.mark.dtypes(torch.float32, torch.bfloat16)
def test_torch_compile_fullgraph(device, dtype):
    """Both entry points trace whole (through the Meta kernels) and give eager's results."""
    chunk = torch.compile(gated_delta_rule.chunk_gated_delta_rule, fullgraph=True)
    recurrent = torch.compile(gated_delta_rule.fused_recurrent_gated_delta_rule, fullgraph=True)
    inputs = make_inputs(device, dtype, seq=11, key_dim=16, value_dim=16)
    kwargs = dict(output_final_state=True, use_qk_l2norm_in_kernel=True)
    for compiled, eager, x in (
        (chunk, gated_delta_rule.chunk_gated_delta_rule, inputs),
        (
            recurrent,
            gated_delta_rule.fused_recurrent_gated_delta_rule,
            {k: v[:, :1] if k != "initial_state" else v for k, v in inputs.items()},
        ),
    ):
        out, state = compiled(**x, **kwargs)
        want_out, want_state = eager(**x, **kwargs)
        assert out.dtype == dtype and state.dtype == torch.float32
        torch.testing.assert_close(out, want_out, rtol=0, atol=0)
        torch.testing.assert_close(state, want_state, rtol=0, atol=0)


# ---- against the fallbacks Transformers runs today ------------------------------------


def _fallbacks():
    transformers = pytest.importorskip("transformers")
    del transformers
    from transformers.models.qwen3_5 import modeling_qwen3_5 as m

    unwrap = lambda f: getattr(f, "__wrapped__", f)  # noqa: E731 - the torch function under the hub wrapper
    return unwrap(m.torch_chunk_gated_delta_rule), unwrap(m.torch_recurrent_gated_delta_rule)


@pytest.mark.parametrize("seq", [1, 70])
def test_matches_transformers_fallbacks(target, dtype, seq):
    chunk_ref, recurrent_ref = _fallbacks()
    inputs = make_inputs(target, dtype, seq=seq, key_heads=2, heads=4, key_dim=64, value_dim=64)
    kwargs = dict(output_final_state=True, use_qk_l2norm_in_kernel=True)
    cpu_inputs = {k: v.cpu() for k, v in inputs.items()}
    for ours, theirs in (
        (gated_delta_rule.chunk_gated_delta_rule, chunk_ref),
        (gated_delta_rule.fused_recurrent_gated_delta_rule, recurrent_ref),
    ):
        out, state = ours(**inputs, **kwargs)
        want_out, want_state = theirs(**cpu_inputs, **kwargs)
        check(out, want_out, dtype)
        check(state, want_state, dtype)


# ---- backward (Transformers maps chunk_gated_delta_rule for TRAINING) ----------------


@pytest.mark.dtypes(torch.float32, torch.bfloat16)
def test_backward_matches_recurrence(device, dtype):
    inputs = make_inputs(device, dtype, seq=19, key_dim=16, value_dim=16)
    leaves = {k: v.detach().clone().requires_grad_() for k, v in inputs.items()}
    out, state = gated_delta_rule.chunk_gated_delta_rule(
        **leaves, chunk_size=8, output_final_state=True, use_qk_l2norm_in_kernel=True
    )
    weights_out = torch.randn(out.shape, generator=torch.Generator().manual_seed(1))
    weights_state = torch.randn(state.shape, generator=torch.Generator().manual_seed(2))
    ((out.float().cpu() * weights_out).sum() + (state.cpu() * weights_state).sum()).backward()

    ref = {k: v.detach().cpu().double().requires_grad_() for k, v in inputs.items()}
    want_out, want_state = recurrence(**ref)
    (
        (want_out * weights_out.double()).sum() + (want_state * weights_state.double()).sum()
    ).backward()
    loose = {torch.float32: dict(atol=1e-3, rtol=1e-3), torch.bfloat16: dict(atol=0.15, rtol=0.1)}[
        dtype
    ]
    for name, leaf in leaves.items():
        assert leaf.grad is not None and leaf.grad.dtype == leaf.dtype, name
        torch.testing.assert_close(leaf.grad.double().cpu(), ref[name].grad, **loose, msg=name)
