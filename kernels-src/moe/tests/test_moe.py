"""The moe ops against the computations Transformers' MoE models run in PyTorch.

The references are the models' own formulas (Qwen3.5-MoE's experts loop and router,
Laguna's sigmoid router), written out here with torch ops; float32 must match to
rounding, bfloat16 within its tolerance (the kernel sums in float32 and rounds once,
where the loop rounds every product).
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

TOL = {torch.float32: dict(atol=1e-5, rtol=1e-4), torch.bfloat16: dict(atol=2e-2, rtol=2e-2)}
ACTS = {0: F.silu, 1: F.gelu, 2: lambda x: F.gelu(x, approximate="tanh")}


def experts_reference(hidden, index, weights, gate_up, down, act):
    """The experts loop of Transformers' MoE models (one expert at a time, index_add_)."""
    out = torch.zeros_like(hidden, dtype=torch.float32)
    experts = gate_up.shape[0]
    for e in range(experts):
        token, slot = torch.where(index == e)
        if token.numel() == 0:
            continue
        gate, up = F.linear(hidden[token].float(), gate_up[e].float()).chunk(2, dim=-1)
        y = F.linear(ACTS[act](gate) * up, down[e].float())
        out.index_add_(0, token, y * weights[token, slot, None].float())
    return out.to(hidden.dtype)


def _problem(tokens, experts=8, k=2, h=64, inter=32, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    hidden = torch.randn(tokens, h, generator=g).to(dtype)
    logits = torch.randn(tokens, experts, generator=g)
    weights, index = torch.topk(logits.softmax(-1), k, dim=-1)
    gate_up = (torch.randn(experts, 2 * inter, h, generator=g) / h**0.5).to(dtype)
    down = (torch.randn(experts, h, inter, generator=g) / inter**0.5).to(dtype)
    return hidden, index, weights.to(dtype), gate_up, down


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("tokens", [1, 5, 67, 300])  # 300: > 32 rows per expert, ATen's GEMMs
@pytest.mark.parametrize("act", [0, 1, 2])
def test_experts_matches_the_loop(moe, dtype, tokens, act):
    hidden, index, weights, gate_up, down = _problem(tokens, dtype=dtype)
    got = moe.experts(hidden, index, weights, gate_up, down, act)
    want = experts_reference(hidden, index, weights, gate_up, down, act)
    assert got.dtype == dtype and got.shape == hidden.shape
    torch.testing.assert_close(got, want, **TOL[dtype])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_a_token_alone_gets_the_same_bits_as_in_a_batch(moe, dtype):
    """A decode token (one row per expert: the eight-outputs loop) and the same token among
    others (several rows per expert: the rows loop) are summed in one order, so decode
    reproduces prefill bit for bit. h and inter (67, 45) leave tails past the vector width
    and past the eight outputs."""
    hidden, index, weights, gate_up, down = _problem(6, experts=4, k=2, h=67, inter=45,
                                                     dtype=dtype)
    batch = moe.experts(hidden, index, weights, gate_up, down, 0)
    for t in range(hidden.shape[0]):
        alone = moe.experts(hidden[t:t + 1], index[t:t + 1], weights[t:t + 1], gate_up, down, 0)
        assert torch.equal(alone[0], batch[t]), t
    want = experts_reference(hidden, index, weights, gate_up, down, 0)
    torch.testing.assert_close(batch, want, **TOL[dtype])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("act", [0, 1, 2])
def test_few_row_and_gemm_experts_mix_in_one_call(moe, dtype, act):
    """gemm_rows=6: experts with 6 rows or more take ATen's GEMMs, the others the few-rows
    loop, in one call; the table's choice (gemm_rows=-1) and all-GEMM (1) agree."""
    hidden, index, weights, gate_up, down = _problem(40, experts=16, k=2, h=67, inter=45,
                                                     dtype=dtype)
    rows = torch.bincount(index.flatten(), minlength=16)
    assert (rows >= 6).any() and ((rows > 0) & (rows < 6)).any()
    want = experts_reference(hidden, index, weights, gate_up, down, act)
    for gemm_rows in (6, 1, -1, 1000):
        got = moe.experts(hidden, index, weights, gate_up, down, act, gemm_rows=gemm_rows)
        torch.testing.assert_close(got, want, **TOL[dtype])


def gpt_oss_reference(hidden, index, weights, gate_up, gate_up_bias, down, down_bias,
                      alpha, limit):
    """GptOssExperts' loop: transposed weights, biases, clamped SwiGLU over alternating
    gate/up columns."""
    out = torch.zeros_like(hidden, dtype=torch.float32)
    for e in range(gate_up.shape[0]):
        token, slot = torch.where(index == e)
        if token.numel() == 0:
            continue
        gu = hidden[token].float() @ gate_up[e].float() + gate_up_bias[e].float()
        gate, up = gu[..., ::2].clamp(max=limit), gu[..., 1::2].clamp(-limit, limit)
        y = ((up + 1) * gate * torch.sigmoid(gate * alpha)) @ down[e].float()
        out.index_add_(0, token, (y + down_bias[e].float()) * weights[token, slot, None].float())
    return out.to(hidden.dtype)


def _gpt_oss_problem(tokens, dtype, experts=8, k=4, h=64, inter=48, seed=4):
    hidden, index, weights, gate_up, down = _problem(tokens, experts, k, h, inter, dtype, seed)
    g = torch.Generator().manual_seed(seed + 1)
    # Scaled so the clamps at limit 1.5 cut both ways.
    gate_up = (gate_up.float().transpose(1, 2).contiguous() * 6).to(dtype)
    down = down.transpose(1, 2).contiguous()
    gate_up_bias = torch.randn(experts, 2 * inter, generator=g).to(dtype)
    down_bias = torch.randn(experts, h, generator=g).to(dtype)
    return hidden, index, weights, gate_up, gate_up_bias, down, down_bias


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("tokens", [1, 9, 200])
# 67, 45: tails past 8 outputs; 301, 275: past the loop's 8-row chunks of H and its
# 512-output blocks, with a tail chunk, single-vector strips and a scalar tail.
@pytest.mark.parametrize("h, inter", [(64, 48), (67, 45), (301, 275)])
def test_gpt_oss_experts(moe, dtype, tokens, h, inter):
    """Both paths (the transposed few-rows loop: gemm_rows above every count; ATen's GEMMs:
    gemm_rows=1) and the table's choice."""
    hidden, index, weights, gate_up, gate_up_bias, down, down_bias = _gpt_oss_problem(
        tokens, dtype, h=h, inter=inter)
    want = gpt_oss_reference(hidden, index, weights, gate_up, gate_up_bias, down, down_bias,
                             1.702, 1.5)
    for gemm_rows in (-1, 1, 10**6):
        got = moe.experts(hidden, index, weights, gate_up, down, 3, gate_up_bias=gate_up_bias,
                          down_bias=down_bias, transposed=True, interleaved=True, alpha=1.702,
                          limit=1.5, gemm_rows=gemm_rows)
        torch.testing.assert_close(got, want, **TOL[dtype])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("rows", range(1, 11))  # each of the loop's 8 row counts, and past 8
def test_gpt_oss_loop_for_every_row_count(moe, dtype, rows):
    """Every expert gets exactly ``rows`` rows, so each row count's copy of the transposed
    loop runs (and above 8, a group of 8 then the rest), at odd sizes."""
    experts, h, inter = 3, 133, 283
    hidden, _, _, gate_up, gate_up_bias, down, down_bias = _gpt_oss_problem(
        rows * experts, dtype, experts=experts, k=1, h=h, inter=inter)
    index = torch.arange(experts).repeat_interleave(rows)[:, None]
    weights = torch.rand(rows * experts, 1, generator=torch.Generator().manual_seed(3)).to(dtype)
    want = gpt_oss_reference(hidden, index, weights, gate_up, gate_up_bias, down, down_bias,
                             1.702, 1.5)
    got = moe.experts(hidden, index, weights, gate_up, down, 3, gate_up_bias=gate_up_bias,
                      down_bias=down_bias, transposed=True, interleaved=True, alpha=1.702,
                      limit=1.5, gemm_rows=10**6)
    torch.testing.assert_close(got, want, **TOL[dtype])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("h, inter", [(67, 45), (301, 275)])
def test_gpt_oss_token_alone_gets_the_same_bits_as_in_a_batch(moe, dtype, h, inter):
    """The transposed loop sums every output in one order whatever the rows per expert
    (gemm_rows keeps every count on the loop: the table sends float32 single rows to
    ATen on AVX2)."""
    hidden, index, weights, gate_up, gate_up_bias, down, down_bias = _gpt_oss_problem(
        6, dtype, experts=4, k=2, h=h, inter=inter)
    kw = dict(gate_up_bias=gate_up_bias, down_bias=down_bias, transposed=True,
              interleaved=True, limit=1.5, gemm_rows=10**6)
    batch = moe.experts(hidden, index, weights, gate_up, down, 3, **kw)
    for t in range(hidden.shape[0]):
        alone = moe.experts(hidden[t:t + 1], index[t:t + 1], weights[t:t + 1], gate_up, down,
                            3, **kw)
        assert torch.equal(alone[0], batch[t]), t


def test_experts_ignores_sentinel_slots(moe):
    hidden, index, weights, gate_up, down = _problem(9)
    index[::2, 1] = gate_up.shape[0]  # expert-parallel sentinels: no expert here
    got = moe.experts(hidden, index, weights, gate_up, down, 0)
    kept = index < gate_up.shape[0]
    want = experts_reference(hidden, torch.where(kept, index, -1), weights, gate_up, down, 0)
    torch.testing.assert_close(got, want, **TOL[torch.float32])


def test_experts_int32_index_and_no_tokens(moe):
    hidden, index, weights, gate_up, down = _problem(4)
    got = moe.experts(hidden, index.int(), weights, gate_up, down, 0)
    torch.testing.assert_close(got, experts_reference(hidden, index, weights, gate_up, down, 0),
                               **TOL[torch.float32])
    empty = moe.experts(hidden[:0], index[:0], weights[:0], gate_up, down, 0)
    assert empty.shape == (0, hidden.shape[1])


@pytest.mark.parametrize("bad, message", [
    ("down", "down must be"), ("dtype", "float32 and bfloat16 only"),
    ("activation", "activation must be"), ("weights", "top_k_weights must have"),
    ("bias", "give both biases"), ("bias shape", "biases must be"),
])
def test_experts_rejects_bad_input_in_one_line(moe, bad, message):
    hidden, index, weights, gate_up, down = _problem(3)
    act, biases = 0, {}
    if bad == "bias":
        biases = dict(gate_up_bias=torch.zeros(gate_up.shape[0], gate_up.shape[1]))
    elif bad == "bias shape":
        biases = dict(gate_up_bias=torch.zeros(2, 2), down_bias=torch.zeros(2, 2))
    elif bad == "down":
        down = down[:, :, :-1]
    elif bad == "dtype":
        hidden, gate_up, down = hidden.half(), gate_up.half(), down.half()
    elif bad == "activation":
        act = 7
    else:
        weights = weights[:, :1]
    with pytest.raises(RuntimeError, match=message):
        moe.experts(hidden, index, weights, gate_up, down, act, **biases)


class _Experts(nn.Module):
    """The attributes Transformers' ``@use_experts_implementation`` classes have."""

    has_gate, is_concatenated, is_transposed = True, True, False
    has_bias, has_post_expert_norm, _is_expert_parallel = False, False, False

    def __init__(self, gate_up, down, act_fn):
        super().__init__()
        self.gate_up_proj = nn.Parameter(gate_up, requires_grad=False)
        self.down_proj = nn.Parameter(down, requires_grad=False)
        self.act_fn = act_fn


def test_experts_forward_serves_the_interface(moe):
    hidden, index, weights, gate_up, down = _problem(6)
    module = _Experts(gate_up, down, nn.SiLU())
    assert moe.unsupported_reason(module, hidden) is None
    got = moe.experts_forward(module, hidden, index, weights)
    torch.testing.assert_close(got, experts_reference(hidden, index, weights, gate_up, down, 0),
                               **TOL[torch.float32])


def test_unsupported_layouts_are_named(moe):
    hidden, _, _, gate_up, down = _problem(2)
    module = _Experts(gate_up, down, nn.SiLU())
    module.has_bias = True
    assert "has_bias" in moe.unsupported_reason(module)
    module = _Experts(gate_up, down, nn.ReLU())
    assert "ReLU" in moe.unsupported_reason(module)
    module = _Experts(gate_up, down, nn.SiLU())
    assert "float16" in moe.unsupported_reason(module, hidden.half())
    with pytest.raises(ValueError, match="cannot serve"):
        moe.experts_forward(_Experts(gate_up, down, nn.ReLU()), hidden,
                            torch.zeros(2, 1, dtype=torch.long), torch.ones(2, 1))


class _GptOssExperts(nn.Module):
    """gpt-oss's experts layout: transposed, biases, its own clamped-SwiGLU gate."""

    has_gate, is_concatenated, is_transposed = True, False, True
    has_bias, has_post_expert_norm, _is_expert_parallel = True, False, False

    def __init__(self, gate_up, gate_up_bias, down, down_bias, alpha=1.702, limit=1.5):
        super().__init__()
        self.gate_up_proj = nn.Parameter(gate_up, requires_grad=False)
        self.gate_up_proj_bias = nn.Parameter(gate_up_bias, requires_grad=False)
        self.down_proj = nn.Parameter(down, requires_grad=False)
        self.down_proj_bias = nn.Parameter(down_bias, requires_grad=False)
        self.alpha, self.limit = alpha, limit

    def _apply_gate(self, gate_up):
        gate, up = gate_up[..., ::2], gate_up[..., 1::2]
        gate = gate.clamp(min=None, max=self.limit)
        up = up.clamp(min=-self.limit, max=self.limit)
        return (up + 1) * (gate * torch.sigmoid(gate * self.alpha))


class _OtherGate(_GptOssExperts):
    def _apply_gate(self, gate_up):  # no clamp on up: not gpt-oss's gate
        gate, up = gate_up[..., ::2], gate_up[..., 1::2]
        return (up + 1) * (gate * torch.sigmoid(gate * self.alpha))


def test_experts_forward_serves_gpt_oss_and_refuses_other_gates(moe):
    problem = _gpt_oss_problem(7, torch.float32)
    hidden, index, weights, gate_up, gate_up_bias, down, down_bias = problem
    module = _GptOssExperts(gate_up, gate_up_bias, down, down_bias)
    assert moe.unsupported_reason(module, hidden) is None
    torch.testing.assert_close(
        moe.experts_forward(module, hidden, index, weights),
        gpt_oss_reference(*problem, 1.702, 1.5), **TOL[torch.float32])
    other = _OtherGate(gate_up, gate_up_bias, down, down_bias)
    assert "_apply_gate" in moe.unsupported_reason(other, hidden)


def test_transformers_gpt_oss_experts_are_served(moe):
    """The installed Transformers' GptOssExperts (its own gate, constants from its config)."""
    gpt_oss = pytest.importorskip("transformers.models.gpt_oss.modeling_gpt_oss")
    config = pytest.importorskip("transformers").GptOssConfig(
        hidden_size=64, intermediate_size=48, num_local_experts=8, num_experts_per_tok=4)
    module = gpt_oss.GptOssExperts(config)
    hidden, index, weights, gate_up, gate_up_bias, down, down_bias = _gpt_oss_problem(
        11, torch.float32)
    with torch.no_grad():
        for name, value in [("gate_up_proj", gate_up), ("gate_up_proj_bias", gate_up_bias),
                            ("down_proj", down), ("down_proj_bias", down_bias)]:
            getattr(module, name).copy_(value)
    module.requires_grad_(False)
    assert moe.unsupported_reason(module, hidden) is None
    torch.testing.assert_close(
        moe.experts_forward(module, hidden, index, weights),
        gpt_oss_reference(hidden, index, weights, gate_up, gate_up_bias, down, down_bias,
                          config.swiglu_alpha, config.swiglu_limit), **TOL[torch.float32])


def softmax_router_reference(hidden, weight, top_k):
    """Qwen3.5-MoE's router."""
    logits = F.linear(hidden, weight)
    probs = torch.softmax(logits, dtype=torch.float, dim=-1)
    top, idx = torch.topk(probs, top_k, dim=-1)
    top /= top.sum(dim=-1, keepdim=True)
    return logits, top.to(logits.dtype), idx


def sigmoid_router_reference(hidden, weight, top_k, bias, softcap):
    """Laguna's router."""
    logits = F.linear(hidden, weight).float()
    if softcap > 0:
        logits = torch.tanh(logits / softcap) * softcap
    scores = torch.sigmoid(logits)
    _, idx = torch.topk(scores + bias.float(), top_k, dim=-1)
    top = scores.gather(-1, idx)
    return logits, (top / top.sum(-1, keepdim=True)).to(hidden.dtype), idx


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_softmax_router(moe, dtype):
    g = torch.Generator().manual_seed(1)
    hidden = torch.randn(33, 64, generator=g).to(dtype)
    weight = torch.randn(16, 64, generator=g).to(dtype)
    logits, top, idx = moe.router(hidden, weight, 4)
    want_logits, want_top, want_idx = softmax_router_reference(hidden, weight, 4)
    # bfloat16 logits tie often; tied experts may come in either order (as in torch.topk),
    # so the chosen experts must have exactly the reference's probabilities, in order.
    probs = torch.softmax(want_logits, dtype=torch.float, dim=-1)
    assert torch.equal(probs.gather(-1, idx), probs.gather(-1, want_idx))
    assert torch.equal(idx, want_idx) or dtype == torch.bfloat16
    torch.testing.assert_close(logits, want_logits, **TOL[dtype])
    torch.testing.assert_close(top, want_top, **TOL[dtype])


@pytest.mark.parametrize("softcap", [0.0, 30.0])
def test_sigmoid_router(moe, softcap):
    g = torch.Generator().manual_seed(2)
    hidden = torch.randn(9, 32, generator=g)
    weight = torch.randn(12, 32, generator=g)
    bias = torch.randn(12, generator=g) * 0.1
    got = moe.router(hidden, weight, 3, sigmoid=True, bias=bias, softcap=softcap)
    want = sigmoid_router_reference(hidden, weight, 3, bias, softcap)
    assert torch.equal(got[2], want[2])
    torch.testing.assert_close(got[0], want[0], **TOL[torch.float32])
    torch.testing.assert_close(got[1], want[1], **TOL[torch.float32])


def test_router_layer_tells_the_two_routers_apart(moe):
    g = torch.Generator().manual_seed(3)
    layer = nn.Module()
    layer.weight = nn.Parameter(torch.randn(8, 16, generator=g))
    layer.top_k = 2
    hidden = torch.randn(2, 3, 16, generator=g)
    got = moe.layers.SoftmaxTopKRouter.forward(layer, hidden)
    want = softmax_router_reference(hidden.reshape(-1, 16), layer.weight, 2)
    assert torch.equal(got[2], want[2])
    layer.e_score_correction_bias = nn.Parameter(torch.randn(8, generator=g))
    layer.router_logit_softcapping = 0.0
    got = moe.layers.SoftmaxTopKRouter.forward(layer, hidden)
    want = sigmoid_router_reference(hidden.reshape(-1, 16), layer.weight, 2,
                                    layer.e_score_correction_bias, 0.0)
    assert torch.equal(got[2], want[2]) and got[0].dtype == torch.float32
    torch.testing.assert_close(got[1], want[1], **TOL[torch.float32])


def test_ops_trace_under_torch_compile(moe):
    hidden, index, weights, gate_up, down = _problem(5)
    compiled = torch.compile(lambda *a: moe.experts(*a, 0), fullgraph=True, backend="eager")
    torch.testing.assert_close(compiled(hidden, index, weights, gate_up, down),
                               experts_reference(hidden, index, weights, gate_up, down, 0),
                               **TOL[torch.float32])


# CUDA (moe_cuda/): the same contracts on the GPU; these run only where the variant under
# test has CUDA kernels and a GPU is present.

@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("tokens", [1, 5, 300])
@pytest.mark.parametrize("act", [0, 1, 2])
def test_cuda_experts_match_the_loop(moe_cuda, dtype, tokens, act):
    hidden, index, weights, gate_up, down = _problem(tokens, dtype=dtype)
    index[::3, -1] = gate_up.shape[0]  # a sentinel slot now and then
    want = experts_reference(hidden, torch.where(index < gate_up.shape[0], index, -1),
                             weights, gate_up, down, act)
    got = moe_cuda.experts(*(t.cuda() for t in (hidden, index, weights, gate_up, down)), act)
    assert got.is_cuda and got.dtype == dtype
    torch.testing.assert_close(got.cpu(), want, **TOL[dtype])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("tokens", [1, 200])
def test_cuda_gpt_oss_experts(moe_cuda, dtype, tokens):
    problem = _gpt_oss_problem(tokens, dtype)
    hidden, index, weights, gate_up, gate_up_bias, down, down_bias = (t.cuda() for t in problem)
    got = moe_cuda.experts(hidden, index, weights, gate_up, down, 3, gate_up_bias=gate_up_bias,
                           down_bias=down_bias, transposed=True, interleaved=True,
                           alpha=1.702, limit=1.5)
    torch.testing.assert_close(got.cpu(), gpt_oss_reference(*problem, 1.702, 1.5), **TOL[dtype])


def test_cuda_empty_batch_and_bad_device(moe_cuda):
    hidden, index, weights, gate_up, down = (t.cuda() for t in _problem(3))
    assert moe_cuda.experts(hidden[:0], index[:0], weights[:0], gate_up, down).shape == (0, 64)
    with pytest.raises(RuntimeError, match="CUDA device"):
        moe_cuda.experts(hidden, index, weights, gate_up.cpu(), down)


@pytest.mark.parametrize("sigmoid", [False, True])
def test_cuda_router(moe_cuda, sigmoid):
    g = torch.Generator().manual_seed(5)
    hidden, weight = torch.randn(17, 32, generator=g), torch.randn(12, 32, generator=g)
    bias = torch.randn(12, generator=g) * 0.1
    if sigmoid:
        want = sigmoid_router_reference(hidden, weight, 3, bias, 30.0)
        got = moe_cuda.router(hidden.cuda(), weight.cuda(), 3, sigmoid=True, bias=bias.cuda(),
                              softcap=30.0)
    else:
        want = softmax_router_reference(hidden, weight, 3)
        got = moe_cuda.router(hidden.cuda(), weight.cuda(), 3)
    assert torch.equal(got[2].cpu(), want[2])
    for g_, w_ in zip(got[:2], want[:2], strict=True):
        torch.testing.assert_close(g_.cpu(), w_, **TOL[torch.float32])
