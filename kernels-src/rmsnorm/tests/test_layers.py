"""The layers against the Transformers modules they replace (written out here in
PyTorch, as Transformers defines them), eagerly and under torch.compile."""

from __future__ import annotations

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
    def __init__(self, hidden: int, intermediate: int) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(hidden, intermediate, bias=False)
        self.up_proj = nn.Linear(hidden, intermediate, bias=False)
        self.down_proj = nn.Linear(intermediate, hidden, bias=False)
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
    for layer in (layers.RMSNorm, layers.GemmaRMSNorm, layers.RMSNormMLP):
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
