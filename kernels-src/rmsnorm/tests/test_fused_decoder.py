"""The decoder-layer fusions: ``swiglu_mlp``, ``add_rms_norm`` and the ``MLP`` /
``DecoderLayer`` layers, against PyTorch computing what the model computes.

References round where the model's PyTorch ops round (each matmul's output, the residual
sums), so only float summation order separates them from the kernels.
"""

from __future__ import annotations

import inspect

import pytest
import rmsnorm
import torch
import torch.nn.functional as F
from rmsnorm import layers
from rmsnorm._functional import GEMV_MAX_ROWS
from rmsnorm._ops import ops
from torch import nn

TOLERANCE = {
    torch.float32: {"rtol": 1e-5, "atol": 1e-5},
    torch.float64: {"rtol": 1e-10, "atol": 1e-12},
    torch.bfloat16: {"rtol": 2e-2, "atol": 2e-2},
    torch.float16: {"rtol": 1e-2, "atol": 1e-2},
}


def _rand(shape, dtype, seed: int, scale: float = 1.0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=generator, dtype=torch.float64) * scale).to(dtype)


def _weights(hidden: int, inter: int, dtype, seed: int = 0):
    """gate, up [inter, hidden] and down [hidden, inter], scaled like trained weights."""
    return (_rand((inter, hidden), dtype, seed, hidden ** -0.5),
            _rand((inter, hidden), dtype, seed + 1, hidden ** -0.5),
            _rand((hidden, inter), dtype, seed + 2, inter ** -0.5))


def _reference_mlp(x, w_gate, w_up, w_down, residual=None) -> torch.Tensor:
    """The model's MLP in float64, rounded to x's dtype where its ops round."""
    dtype = x.dtype

    def rounded(t: torch.Tensor) -> torch.Tensor:
        return t.to(dtype).double()

    xd = x.double()
    gate = rounded(xd @ w_gate.double().T)
    up = rounded(xd @ w_up.double().T)
    act = rounded(F.silu(gate) * up)
    down = rounded(act @ w_down.double().T)
    return down if residual is None else rounded(residual.double() + down)


def _close(actual, expected, dtype) -> None:
    assert actual.dtype == dtype
    assert not torch.isnan(actual).any(), "an output element was not written"
    torch.testing.assert_close(actual.double(), expected.double(), **TOLERANCE[dtype])


@pytest.fixture
def cpu_only(device):
    if device != "cpu":
        pytest.skip("swiglu_mlp's op is CPU-only (other devices run the matmul path)")


# ---- swiglu_mlp -------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("rows,hidden,inter,with_residual",
                         [(1, 64, 176, False), (6, 64, 176, True), (3, 130, 97, True),
                          (1, 7, 13, True)])
def test_swiglu_mlp_op(target, dtype, rows, hidden, inter, with_residual):
    """The op itself, on every loop copy: one row, rows past a 4-row pass, widths that are
    no multiple of any vector, with and without the residual."""
    if target != "cpu":
        pytest.skip("swiglu_mlp's op is CPU-only")
    weights = _weights(hidden, inter, dtype)
    x = _rand((rows, hidden), dtype, 7)
    residual = _rand((rows, hidden), dtype, 8) if with_residual else None
    expected = _reference_mlp(x, *weights, residual)
    _close(ops.swiglu_mlp(x, *weights, residual), expected, dtype)


def test_swiglu_mlp_copies_agree_bitwise(cpu_kernels):
    """Every loop copy gives the same bits (fixed summation order, no FMA), except bf16 on
    the AVX512_BF16 copy, whose VDPBF16PS adds each pair's products in hardware."""
    copies = []
    for capability in ("DEFAULT", "AVX2", "AVX512", "AVX512_BF16"):
        try:
            previous = rmsnorm.set_cpu_capability(capability)
        except RuntimeError:
            continue
        rmsnorm.set_cpu_capability(previous)
        copies.append(capability)
    for dtype in (torch.float32, torch.bfloat16):
        weights = _weights(96, 200, dtype, seed=3)
        x, residual = _rand((3, 96), dtype, 4), _rand((3, 96), dtype, 5)
        results = {}
        for capability in copies:
            if dtype == torch.bfloat16 and capability == "AVX512_BF16":
                continue
            previous = rmsnorm.set_cpu_capability(capability)
            try:
                results[capability] = ops.swiglu_mlp(x, *weights, residual)
            finally:
                rmsnorm.set_cpu_capability(previous)
        first = next(iter(results.values()))
        for capability, result in results.items():
            assert torch.equal(result, first), f"{capability} differs for {dtype}"


@pytest.mark.parametrize("rows", [1, GEMV_MAX_ROWS, GEMV_MAX_ROWS + 1, 33])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_swiglu_mlp_function_any_rows(device, rows, dtype):
    """The public function: the op for a few rows, matrix products beyond; same numbers."""
    weights = [w.to(device) for w in _weights(64, 176, dtype)]
    x = _rand((2, rows, 64), dtype, 9).to(device)
    residual = _rand((2, rows, 64), dtype, 10).to(device)
    expected = _reference_mlp(x.cpu(), *(w.cpu() for w in weights), residual.cpu())
    before = residual.clone()
    _close(rmsnorm.swiglu_mlp(x, *weights, residual).cpu(), expected, dtype)
    assert torch.equal(residual, before), "the residual argument was modified"
    _close(rmsnorm.swiglu_mlp(x, *weights).cpu(), _reference_mlp(x.cpu(), *(w.cpu() for w in weights)),
           dtype)


def test_swiglu_mlp_gradients(device):
    weights = [w.to(device).requires_grad_() for w in _weights(12, 20, torch.float64)]
    x = _rand((1, 12), torch.float64, 11).to(device).requires_grad_()
    residual = _rand((1, 12), torch.float64, 12).to(device).requires_grad_()
    assert torch.autograd.gradcheck(
        lambda *a: rmsnorm.swiglu_mlp(*a), (x, *weights, residual), eps=1e-6, atol=1e-6)


def test_swiglu_mlp_errors(cpu_only):
    gate, up, down = _weights(16, 24, torch.float32)
    x = torch.randn(2, 16)
    with pytest.raises(RuntimeError, match=r"w_up must have shape \[24, 16\]"):
        ops.swiglu_mlp(x, gate, up[:, :8], down)
    with pytest.raises(RuntimeError, match=r"w_down dtype \(BFloat16\) must match x"):
        ops.swiglu_mlp(x, gate, up, down.bfloat16())
    with pytest.raises(RuntimeError, match=r"residual must have shape \[2, 16\]"):
        ops.swiglu_mlp(x, gate, up, down, torch.randn(3, 16))


def test_swiglu_mlp_opcheck(cpu_only):
    gate, up, down = _weights(16, 24, torch.float32)
    x, residual = torch.randn(2, 16), torch.randn(2, 16)
    torch.library.opcheck(ops.swiglu_mlp, (x, gate, up, down, residual))
    torch.library.opcheck(ops.swiglu_mlp, (x, gate, up, down))
    out, summed = torch.empty(2, 16), torch.empty(2, 16)
    torch.library.opcheck(ops.add_rms_norm_out, (out, summed, x, residual, torch.randn(16), 1e-6))


# ---- add_rms_norm -----------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_add_rms_norm_leaves_its_inputs(device, dtype):
    x, residual, weight = (_rand((3, 1000), dtype, s).to(device) for s in (13, 14, 15))
    weight = weight[0]
    before = residual.clone()
    normed, summed = rmsnorm.add_rms_norm(x, residual, weight, 1e-6)
    assert torch.equal(residual, before)
    assert torch.equal(summed, x + residual)  # rounded once, as the model's own add
    expected = summed.double() * torch.rsqrt(summed.double().pow(2).mean(-1, keepdim=True) + 1e-6)
    _close(normed, expected * weight.double(), dtype)


# ---- the layers -------------------------------------------------------------------


class LlamaMLP(nn.Module):
    """Transformers' LlamaMLP (also Qwen2/Qwen3/Mistral's), written out."""

    def __init__(self, hidden: int, inter: int, bias: bool = False) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(hidden, inter, bias=bias)
        self.up_proj = nn.Linear(hidden, inter, bias=bias)
        self.down_proj = nn.Linear(inter, hidden, bias=bias)
        self.act_fn = nn.SiLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))


class LlamaRMSNorm(nn.Module):
    def __init__(self, hidden: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden))
        self.variance_epsilon = eps

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        dtype = hidden_states.dtype
        h = hidden_states.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.variance_epsilon)
        return self.weight * h.to(dtype)


class ToyAttention(nn.Module):
    """Stands in for a model's attention module: an output projection, and a record of the
    keyword arguments it was called with (the decoder layer must pass them all on)."""

    def __init__(self, hidden: int) -> None:
        super().__init__()
        self.o_proj = nn.Linear(hidden, hidden, bias=False)
        self.calls: list[dict] = []

    def forward(self, hidden_states: torch.Tensor, **kwargs):
        self.calls.append(kwargs)
        return self.o_proj(hidden_states).tanh(), None


class LlamaDecoderLayer(nn.Module):
    """Transformers' pre-norm decoder layer, written out (attention: ToyAttention)."""

    def __init__(self, hidden: int, inter: int) -> None:
        super().__init__()
        self.self_attn = ToyAttention(hidden)
        self.mlp = LlamaMLP(hidden, inter)
        self.input_layernorm = LlamaRMSNorm(hidden)
        self.post_attention_layernorm = LlamaRMSNorm(hidden)

    def forward(self, hidden_states, attention_mask=None, position_ids=None, cache=None,
                use_cache=False, position_embeddings=None, **kwargs):
        residual = hidden_states
        hidden_states = self.input_layernorm(hidden_states)
        hidden_states, _ = self.self_attn(
            hidden_states=hidden_states, attention_mask=attention_mask,
            position_ids=position_ids, cache=cache, use_cache=use_cache,
            position_embeddings=position_embeddings, **kwargs)
        hidden_states = residual + hidden_states
        residual = hidden_states
        hidden_states = self.post_attention_layernorm(hidden_states)
        hidden_states = self.mlp(hidden_states)
        return residual + hidden_states


def _swap_forward(module: nn.Module, layer: type[nn.Module]) -> nn.Module:
    """What kernelize does: the layer's forward runs on the model's instance."""
    module.forward = layer.forward.__get__(module)
    return module


def _initialised(module: nn.Module, dtype, device, seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    module = module.to(device, dtype)
    with torch.no_grad():
        for name, p in module.named_parameters():
            if name.endswith("layernorm.weight"):
                p.normal_(1.0, 0.1)
    return module


def test_new_layers_are_pure():
    for layer in (layers.MLP, layers.DecoderLayer):
        assert "__init__" not in vars(layer)
        assert [name for name, value in vars(layer).items() if callable(value)] == ["forward"]
        assert layer.has_backward and layer.can_torch_compile


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("rows", [1, 37])
def test_mlp_layer_matches_llama_mlp(device, dtype, rows):
    mlp = _initialised(LlamaMLP(64, 176), dtype, device)
    x = torch.randn(1, rows, 64, dtype=dtype, device=device)
    with torch.no_grad():
        expected = mlp(x)
        actual = _swap_forward(mlp, layers.MLP)(x)
    torch.testing.assert_close(actual, expected, **TOLERANCE[dtype])


def test_mlp_layer_keeps_what_it_cannot_fuse(device):
    """Another activation or biased projections: the same numbers (own forward or the
    biased matmul path)."""
    mlp = _initialised(LlamaMLP(32, 48), torch.float32, device)
    mlp.act_fn = nn.GELU()
    x = torch.randn(3, 32, device=device)
    expected = mlp(x)
    torch.testing.assert_close(_swap_forward(mlp, layers.MLP)(x), expected)
    biased = _initialised(LlamaMLP(32, 48, bias=True), torch.float32, device)
    expected = biased(x)
    torch.testing.assert_close(_swap_forward(biased, layers.MLP)(x), expected, rtol=1e-5,
                               atol=1e-5)


def test_mlp_layer_trains(device):
    mlp = _initialised(LlamaMLP(32, 48), torch.float32, device)
    reference = _initialised(LlamaMLP(32, 48), torch.float32, device)
    reference.load_state_dict(mlp.state_dict())
    _swap_forward(mlp, layers.MLP)
    x = torch.randn(1, 32, device=device)  # one row: the op's path, were gradients not needed
    mlp(x).square().sum().backward()
    reference(x).square().sum().backward()
    for ours, theirs in zip(mlp.parameters(), reference.parameters(), strict=True):
        torch.testing.assert_close(ours.grad, theirs.grad, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("rows", [1, 9])
def test_mlp_layer_compiles_without_graph_breaks(device, rows):
    torch._dynamo.reset()
    mlp = _swap_forward(_initialised(LlamaMLP(32, 48), torch.float32, device), layers.MLP)
    x = torch.randn(rows, 32, device=device)
    with torch.no_grad():
        expected = mlp(x)
        torch.testing.assert_close(torch.compile(mlp, fullgraph=True)(x), expected)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("rows", [1, 23])
def test_decoder_layer_matches_pytorch(device, dtype, rows):
    layer = _initialised(LlamaDecoderLayer(64, 176), dtype, device)
    x = torch.randn(2, rows, 64, dtype=dtype, device=device)
    before = x.clone()
    kwargs = {"attention_mask": None, "position_ids": torch.arange(rows), "cache": object(),
              "use_cache": True, "position_embeddings": None, "extra": 3}
    with torch.no_grad():
        expected = layer(x, **kwargs)
        expected_call = layer.self_attn.calls.pop()
        actual = _swap_forward(layer, layers.DecoderLayer)(x, **kwargs)
    torch.testing.assert_close(actual, expected, **TOLERANCE[dtype])
    assert torch.equal(x, before), "the layer's input was modified"
    assert layer.self_attn.calls.pop().keys() == expected_call.keys()


def test_decoder_layer_falls_back_for_another_structure(device):
    layer = _initialised(LlamaDecoderLayer(32, 48), torch.float32, device)
    del layer.post_attention_layernorm.variance_epsilon  # not a Llama-style norm
    layer.post_attention_layernorm.eps = 1e-6
    layer.post_attention_layernorm.forward = lambda h: h * 2.0
    x = torch.randn(3, 32, device=device)
    expected = LlamaDecoderLayer.forward(layer, x)
    torch.testing.assert_close(_swap_forward(layer, layers.DecoderLayer)(x), expected)


def test_decoder_layer_trains_and_compiles(device):
    layer = _initialised(LlamaDecoderLayer(32, 48), torch.float32, device)
    reference = _initialised(LlamaDecoderLayer(32, 48), torch.float32, device)
    reference.load_state_dict(layer.state_dict())
    _swap_forward(layer, layers.DecoderLayer)
    x = torch.randn(2, 5, 32, device=device)
    layer(x).square().sum().backward()
    reference(x).square().sum().backward()
    for ours, theirs in zip(layer.parameters(), reference.parameters(), strict=True):
        torch.testing.assert_close(ours.grad, theirs.grad, rtol=1e-4, atol=1e-5)
    torch._dynamo.reset()
    with torch.no_grad():
        torch.testing.assert_close(torch.compile(layer, fullgraph=True)(x), reference(x),
                                   rtol=1e-5, atol=1e-5)


def _transformers_models():
    return pytest.importorskip(
        "transformers", reason="transformers is not installed in this torch environment")


@pytest.mark.parametrize("family", ["llama", "qwen3"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_transformers_decoder_layers_prefill_and_decode(cpu_only, family, dtype):
    """Transformers' own decoder layers, MLPs and KV cache: a prefill then decode steps give
    the model's logits with DecoderLayer and MLP as their forwards."""
    transformers = _transformers_models()
    config_cls = {"llama": transformers.LlamaConfig, "qwen3": transformers.Qwen3Config}[family]
    config = config_cls(num_hidden_layers=2, hidden_size=64, intermediate_size=176,
                        num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                        vocab_size=101, attn_implementation="sdpa")
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config, dtype=dtype).eval()
    ids = torch.randint(0, 101, (1, 9))

    def generate(m):
        cache = transformers.DynamicCache(config=config)
        logits = [m(input_ids=ids, use_cache=True, **{cache_name: cache}).logits[:, -1]]
        token = logits[-1].argmax(-1, keepdim=True)
        for _ in range(3):
            logits.append(m(input_ids=token, use_cache=True, **{cache_name: cache}).logits[:, -1])
            token = logits[-1].argmax(-1, keepdim=True)
        return torch.stack(logits)

    cache_name = "cache" if "cache" in inspect.signature(model.forward).parameters else (
        "past_key_values")

    with torch.no_grad():
        expected = generate(model)
        for module in model.modules():
            name = type(module).__name__
            if name.endswith("DecoderLayer"):
                _swap_forward(module, layers.DecoderLayer)
            elif name.endswith("MLP"):
                _swap_forward(module, layers.MLP)
        actual = generate(model)
    tol = {"rtol": 1e-4, "atol": 1e-4} if dtype == torch.float32 else {"rtol": 5e-2, "atol": 5e-2}
    torch.testing.assert_close(actual, expected, **tol)
