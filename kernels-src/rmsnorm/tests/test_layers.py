"""The layers against the Transformers modules they replace (written out here in
PyTorch, as Transformers defines them), eagerly and under torch.compile."""

from __future__ import annotations

import inspect

import pytest
import rmsnorm
import torch
from rmsnorm import layers
from torch import nn


class LlamaRMSNorm(nn.Module):
    """Transformers' LlamaRMSNorm (also Qwen3's, Mistral's)."""

    def __init__(self, hidden_size: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        input_dtype = hidden_states.dtype
        hidden_states = hidden_states.to(torch.float32)
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        return self.weight * hidden_states.to(input_dtype)


class GemmaRMSNorm(nn.Module):
    """Transformers' GemmaRMSNorm: weight stored as an offset from one."""

    def __init__(self, dim: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.zeros(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        output = x.float()
        output = output * torch.rsqrt(output.pow(2).mean(-1, keepdim=True) + self.eps)
        output = output * (1.0 + self.weight.float())
        return output.type_as(x)


class LlamaMLP(nn.Module):
    def __init__(self, hidden: int, intermediate: int, bias: bool = False) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(hidden, intermediate, bias=bias)
        self.up_proj = nn.Linear(hidden, intermediate, bias=bias)
        self.down_proj = nn.Linear(intermediate, hidden, bias=bias)
        self.act_fn = nn.SiLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))


def _swap_forward(module: nn.Module, layer: type[nn.Module]) -> nn.Module:
    """What kernelize does: the layer's forward runs on the model's instance."""
    module.forward = layer.forward.__get__(module)
    return module


def _norm(cls, hidden: int, dtype: torch.dtype, device: str = "cpu") -> nn.Module:
    module = cls(hidden, 1e-5).to(device, dtype)
    with torch.no_grad():
        module.weight.normal_()
    return module


def test_layers_are_pure():
    for layer in (layers.RMSNorm, layers.GemmaRMSNorm, layers.RMSNormMLP, layers.MLP,
                  layers.DecoderLayer):
        assert "__init__" not in vars(layer)
        assert layer.has_backward and layer.can_torch_compile


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_rmsnorm_layer_matches_llama(dtype, device):
    model = _norm(LlamaRMSNorm, 300, dtype, device)
    x = torch.randn(4, 7, 300, dtype=dtype, device=device)
    expected = model(x)
    actual = _swap_forward(model, layers.RMSNorm)(x)
    assert actual.dtype == expected.dtype
    tol = {"rtol": 1e-5, "atol": 1e-5} if dtype == torch.float32 else {"rtol": 1e-2, "atol": 2e-2}
    torch.testing.assert_close(actual, expected, **tol)


def test_rmsnorm_layer_mixed_dtype_follows_llama(device):
    model = _norm(LlamaRMSNorm, 64, torch.float32, device)  # fp32 weight, bf16 activations
    x = torch.randn(3, 64, dtype=torch.bfloat16, device=device)
    expected = model(x)
    actual = _swap_forward(model, layers.RMSNorm)(x)
    assert actual.dtype == torch.float32
    torch.testing.assert_close(actual, expected)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_gemma_layer_matches_gemma(dtype, device):
    model = _norm(GemmaRMSNorm, 257, dtype, device)
    x = torch.randn(5, 257, dtype=dtype, device=device)
    expected = model(x)
    actual = _swap_forward(model, layers.GemmaRMSNorm)(x)
    tol = {"rtol": 1e-5, "atol": 1e-5} if dtype == torch.float32 else {"rtol": 1e-2, "atol": 2e-2}
    torch.testing.assert_close(actual, expected, **tol)


def test_rmsnorm_layer_trains(device):
    model = _norm(LlamaRMSNorm, 48, torch.float32, device)
    reference = _norm(LlamaRMSNorm, 48, torch.float32, device)
    reference.load_state_dict(model.state_dict())
    _swap_forward(model, layers.RMSNorm)
    x = torch.randn(6, 48, device=device)
    model(x).square().sum().backward()
    reference(x).square().sum().backward()
    torch.testing.assert_close(model.weight.grad, reference.weight.grad, rtol=1e-4, atol=1e-4)


def test_rmsnorm_layer_compiles_without_graph_breaks(device):
    torch._dynamo.reset()
    model = _swap_forward(_norm(LlamaRMSNorm, 96, torch.float32, device), layers.RMSNorm)
    x = torch.randn(8, 96, device=device)
    expected = model(x)
    compiled = torch.compile(model, fullgraph=True)
    torch.testing.assert_close(compiled(x), expected)


def test_fused_add_compiles_without_graph_breaks(device):
    torch._dynamo.reset()
    w = torch.randn(64, device=device)

    def step(x, residual):
        return rmsnorm.fused_add_rms_norm(x, residual, w, 1e-6)

    x, residual = torch.randn(4, 64, device=device), torch.randn(4, 64, device=device)
    residual_eager = residual.clone()
    expected = step(x, residual_eager)
    compiled = torch.compile(step, fullgraph=True)
    torch.testing.assert_close(compiled(x, residual), expected)
    torch.testing.assert_close(residual, residual_eager)


# ---- module fusion: RMSNormMLP ----------------------------------------------------


def _fused_pair(
    device: str, hidden: int = 64, intermediate: int = 176
) -> tuple[nn.Module, nn.Module]:
    torch.manual_seed(0)
    norm = _norm(LlamaRMSNorm, hidden, torch.float32, device)
    return norm, LlamaMLP(hidden, intermediate).to(device)


def test_layout_describes_the_fused_module(device):
    norm, mlp = _fused_pair(device)
    fused = layers.RMSNormMLPLayout(norm, mlp)
    assert issubclass(layers.RMSNormMLPLayout, nn.Module)
    for child, attributes in layers.RMSNormMLPLayout.required_attributes.items():
        assert all(hasattr(getattr(fused, child), a) for a in attributes)
    x = torch.randn(3, 64, device=device)
    torch.testing.assert_close(fused(x), mlp(norm(x)))  # its own forward: the composition


def test_rmsnorm_mlp_matches_pytorch_composition(device):
    norm, mlp = _fused_pair(device)
    x = torch.randn(2, 9, 64, device=device)
    expected = mlp(norm(x))
    fused = _swap_forward(layers.RMSNormMLPLayout(norm, mlp), layers.RMSNormMLP)
    torch.testing.assert_close(fused(x), expected, rtol=1e-5, atol=1e-5)


def test_rmsnorm_mlp_other_activation_stays_exact(device):
    norm, mlp = _fused_pair(device)
    mlp.act_fn = nn.GELU()
    x = torch.randn(5, 64, device=device)
    fused = _swap_forward(layers.RMSNormMLPLayout(norm, mlp), layers.RMSNormMLP)
    torch.testing.assert_close(fused(x), mlp(norm(x)), rtol=1e-5, atol=1e-5)


def test_rmsnorm_mlp_gradients_match(device):
    norm, mlp = _fused_pair(device)
    fused = _swap_forward(layers.RMSNormMLPLayout(norm, mlp), layers.RMSNormMLP)
    x = torch.randn(4, 64, requires_grad=True, device=device)
    fused(x).sum().backward()
    grads = [p.grad.clone() for p in fused.parameters()]
    x_grad = x.grad.clone()
    fused.zero_grad()
    x.grad = None
    mlp(norm(x)).sum().backward()
    for ours, theirs in zip(grads, [p.grad for p in fused.parameters()], strict=True):
        torch.testing.assert_close(ours, theirs, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(x_grad, x.grad, rtol=1e-4, atol=1e-4)


def test_rmsnorm_mlp_compiles_without_graph_breaks(device):
    torch._dynamo.reset()
    norm, mlp = _fused_pair(device)
    fused = _swap_forward(layers.RMSNormMLPLayout(norm, mlp), layers.RMSNormMLP)
    x = torch.randn(3, 64, device=device)
    compiled = torch.compile(fused, fullgraph=True)
    torch.testing.assert_close(compiled(x), mlp(norm(x)), rtol=1e-5, atol=1e-5)


def test_allocating_calls_reuse_released_memory_only():
    """Large outputs come from a pool (no page faults); live outputs are never reused."""
    x, weight = torch.randn(512, 1024), torch.randn(1024)
    expected = rmsnorm.rms_norm(x, weight, 1e-6, out=torch.empty_like(x))
    first = rmsnorm.rms_norm(x, weight, 1e-6)
    second = rmsnorm.rms_norm(x, weight, 1e-6)
    assert second.data_ptr() != first.data_ptr()
    pointer = first.data_ptr()
    del first
    third = rmsnorm.rms_norm(x, weight, 1e-6)
    assert third.data_ptr() == pointer, "released memory was not reused"
    torch.testing.assert_close(second, expected)
    torch.testing.assert_close(third, expected)
    x.requires_grad_(True)
    with_grad = rmsnorm.rms_norm(x, weight, 1e-6)  # autograd: never pooled
    assert with_grad.grad_fn is not None


def test_pooled_output_saved_for_backward_is_not_reused():
    """An output that needs no gradient itself, saved by a later op for backward, keeps its
    memory out of the pool until the graph lets it go."""
    x, weight = torch.randn(512, 1024), torch.randn(1024)
    linear = nn.Linear(1024, 3)
    normed = rmsnorm.rms_norm(x, weight, 1e-6)  # pooled: nothing here requires grad
    expected = normed.clone()
    loss = linear(normed).sum()  # saves normed for the weight's gradient
    pointer = normed.data_ptr()
    del normed
    other = rmsnorm.rms_norm(torch.randn(512, 1024), weight, 1e-6)
    assert other.data_ptr() != pointer
    loss.backward()
    torch.testing.assert_close(linear.weight.grad, expected.sum(0).expand(3, -1), rtol=1e-4,
                               atol=1e-4)


def test_concurrent_calls_never_share_an_output():
    """Threads calling at once each get their own output (the pool hands a storage out
    under its lock)."""
    import threading

    weight = torch.randn(1024)
    inputs = [torch.randn(512, 1024) for _ in range(4)]
    expected = [rmsnorm.rms_norm(x, weight, 1e-6, out=torch.empty_like(x)) for x in inputs]
    failures: list[int] = []

    def work(index: int) -> None:
        for _ in range(30):
            out = rmsnorm.rms_norm(inputs[index], weight, 1e-6)
            if not torch.equal(out, expected[index]):
                failures.append(index)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures


# ---- the fused decoder layers: MLP and DecoderLayer -------------------------------


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


def _initialised(module: nn.Module, dtype, device, seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    module = module.to(device, dtype)
    with torch.no_grad():
        for name, p in module.named_parameters():
            if name.endswith("layernorm.weight"):
                p.normal_(1.0, 0.1)
    return module


_TOLERANCE = {
    torch.float32: {"rtol": 1e-5, "atol": 1e-5},
    torch.bfloat16: {"rtol": 2e-2, "atol": 2e-2},
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("rows", [1, 37])
def test_mlp_layer_matches_llama_mlp(device, dtype, rows):
    mlp = _initialised(LlamaMLP(64, 176), dtype, device)
    x = torch.randn(1, rows, 64, dtype=dtype, device=device)
    with torch.no_grad():
        expected = mlp(x)
        actual = _swap_forward(mlp, layers.MLP)(x)
    torch.testing.assert_close(actual, expected, **_TOLERANCE[dtype])


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
    torch.testing.assert_close(actual, expected, **_TOLERANCE[dtype])
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


@pytest.mark.parametrize("family", ["llama", "qwen3"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_transformers_decoder_layers_prefill_and_decode(device, family, dtype):
    """Transformers' own decoder layers, MLPs and KV cache: a prefill then decode steps give
    the model's logits with DecoderLayer and MLP as their forwards."""
    if device != "cpu":
        pytest.skip("Transformers' models run on CPU here")
    transformers = pytest.importorskip(
        "transformers", reason="transformers is not installed in this torch environment")
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
