"""LigerRMSNorm against the module it replaces (Transformers' LlamaRMSNorm, written out
here as Transformers defines it: the builder's test environment has no Transformers), at
Llama shapes, eagerly, under autograd and under torch.compile."""

from __future__ import annotations

import liger_kernels
import pytest
import torch
from liger_kernels import layers
from torch import nn


class LlamaRMSNorm(nn.Module):
    """Transformers' LlamaRMSNorm (also Qwen2's, Qwen3's, Mistral's)."""

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


def _norms(hidden: int, dtype: torch.dtype, device: str) -> tuple[nn.Module, nn.Module]:
    """(Transformers' layer, the same layer with LigerRMSNorm's forward), sharing a weight."""
    gen = torch.Generator().manual_seed(hidden)
    reference = LlamaRMSNorm(hidden, eps=1e-5)
    with torch.no_grad():
        reference.weight.copy_(1 + 0.1 * torch.randn(hidden, generator=gen))
    reference = reference.to(device=device, dtype=dtype)
    swapped = LlamaRMSNorm(hidden, eps=1e-5).to(device=device, dtype=dtype)
    swapped.weight = reference.weight
    swapped.forward = layers.LigerRMSNorm.forward.__get__(swapped)  # what kernelize does
    return reference, swapped


def _input(shape: tuple[int, ...], dtype: torch.dtype, device: str) -> torch.Tensor:
    gen = torch.Generator().manual_seed(sum(shape))
    return (3 * torch.randn(shape, generator=gen)).to(device=device, dtype=dtype)


# Float32 sums in another order than PyTorch's: a few ulps in float32; in 16-bit types the
# normalized value may round to the neighbouring representable number, once per element.
# Float64: LlamaRMSNorm computes in float32 (`.to(torch.float32)`), the kernel in float64.
TOLERANCES = {
    torch.float32: {"rtol": 1e-5, "atol": 1e-5},
    torch.float64: {"rtol": 1e-6, "atol": 1e-6},
    torch.bfloat16: {"rtol": 1.6e-2, "atol": 1e-2},
    torch.float16: {"rtol": 2e-3, "atol": 2e-3},
}
DTYPES = list(TOLERANCES)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize(
    "shape",
    [(1, 1, 4096), (2, 128, 4096), (1, 7, 2048), (3, 5, 100), (1, 1, 1), (4, 0, 64)],
    ids=str,
)
def test_matches_llama_rms_norm(device, shape, dtype):
    reference, swapped = _norms(shape[-1], dtype, device)
    x = _input(shape, dtype, device)
    with torch.no_grad():
        ours, theirs = swapped(x), reference(x)
    assert ours.dtype == theirs.dtype and ours.shape == theirs.shape
    torch.testing.assert_close(ours, theirs, **TOLERANCES[dtype])


def test_bf16_output_is_rounded_as_llama_rounds(device):
    # Most elements must be bit-identical: the kernel rounds where LlamaRMSNorm rounds.
    reference, swapped = _norms(4096, torch.bfloat16, device)
    x = _input((16, 4096), torch.bfloat16, device)
    with torch.no_grad():
        same = (swapped(x) == reference(x)).float().mean().item()
    assert same > 0.99


def test_non_contiguous_input(device):
    reference, swapped = _norms(256, torch.float32, device)
    x = _input((8, 512), torch.float32, device)[:, ::2]
    assert not x.is_contiguous()
    with torch.no_grad():
        torch.testing.assert_close(swapped(x), reference(x), rtol=1e-5, atol=1e-5)


def test_weight_of_another_dtype_runs_the_model_formula(device):
    reference, swapped = _norms(512, torch.float32, device)  # float32 weight
    x = _input((2, 3, 512), torch.bfloat16, device)
    with torch.no_grad():
        ours, theirs = swapped(x), reference(x)
    assert ours.dtype == torch.float32  # promotion, exactly as the model's formula gives
    torch.testing.assert_close(ours, theirs, rtol=0, atol=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_gradients_match_autograd_through_llama_rms_norm(device, dtype):
    reference, swapped = _norms(1024, dtype, device)
    x = _input((2, 9, 1024), dtype, device)
    grad = _input((2, 9, 1024), dtype, device)
    grads = []
    for layer in (swapped, reference):
        layer.weight.grad = None
        xr = x.clone().requires_grad_()
        layer(xr).backward(grad)
        grads.append((xr.grad, layer.weight.grad.clone()))
    (ours_x, ours_w), (theirs_x, theirs_w) = grads
    tol = {"rtol": 1e-4, "atol": 1e-4} if dtype == torch.float32 else {"rtol": 2e-2, "atol": 2e-2}
    torch.testing.assert_close(ours_x, theirs_x, **tol)
    # The weight's gradient sums 18 rows: compare relative to its size.
    scale = theirs_w.float().abs().max().item()
    torch.testing.assert_close(ours_w.float() / scale, theirs_w.float() / scale, **tol)


def test_gradcheck_in_float64(device):
    x = _input((3, 16), torch.float64, device).requires_grad_()
    w = (1 + 0.1 * _input((16,), torch.float64, device)).requires_grad_()
    assert torch.autograd.gradcheck(
        lambda a, b: liger_kernels.rms_norm(a, b, 1e-6), (x, w), eps=1e-6, atol=1e-7
    )


def test_torch_compile_fullgraph(device):
    reference, swapped = _norms(256, torch.float32, device)
    x = _input((4, 256), torch.float32, device)
    compiled = torch.compile(swapped, fullgraph=True, backend="eager")
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), reference(x), rtol=1e-5, atol=1e-5)


def test_op_passes_opcheck(device):
    x = _input((4, 64), torch.float32, device)
    w = _input((64,), torch.float32, device)
    torch.library.opcheck(liger_kernels._ops.ops.rms_norm.default, (x, w, 1e-6))


def test_bad_input_is_a_one_line_error(device):
    x = _input((4, 64), torch.float32, device)
    with pytest.raises(RuntimeError, match=r"weight must have shape \[64\]"):
        liger_kernels.rms_norm(x, torch.ones(32, device=device))
    with pytest.raises(RuntimeError, match="dtype must be float32, float64, bfloat16 or float16"):
        liger_kernels.rms_norm(x.int(), torch.ones(64, device=device, dtype=torch.int32))
