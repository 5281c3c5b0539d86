"""layer_norm and the LayerNorm layer against eager PyTorch computed in float64.

The builder's test runner loads the built variant and registers it as
``sys.modules["layernorm"]`` before these tests run.
"""

from __future__ import annotations

import layernorm
import pytest
import torch
import torch.nn.functional as F
from layernorm import layers
from layernorm._ops import ops
from torch import nn

DTYPES = [torch.float32, torch.float64, torch.bfloat16, torch.float16]
TOLERANCE = {
    torch.float32: {"rtol": 1e-5, "atol": 1e-5},
    torch.float64: {"rtol": 1e-10, "atol": 1e-12},
    torch.bfloat16: {"rtol": 1e-2, "atol": 1e-2},
    torch.float16: {"rtol": 1e-2, "atol": 1e-2},
}
# One row; a hidden size that is no multiple of any vector width; a batch of
# rows; a large hidden size.
SHAPES = [(1, 7), (3, 129), (2, 5, 4096), (2, 16384)]
EPS = 1e-5


def _rand(shape, dtype, seed: int, device: str = "cpu", shift: float = 0.0) -> torch.Tensor:
    """Random values drawn on the CPU (the same on every device), moved to `device`."""
    generator = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=generator, dtype=torch.float64) + shift).to(device, dtype)


def _ref(x, weight, bias, eps=EPS) -> torch.Tensor:
    return F.layer_norm(
        x.double(),
        x.shape[-1:],
        None if weight is None else weight.double(),
        None if bias is None else bias.double(),
        eps,
    )


def _close(actual: torch.Tensor, expected: torch.Tensor, dtype: torch.dtype) -> None:
    assert actual.dtype == dtype
    assert not torch.isnan(actual).any(), "an output element was not written"
    torch.testing.assert_close(actual.double(), expected.double(), **TOLERANCE[dtype])


@pytest.mark.parametrize("affine", ["both", "weight", "bias", "none"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_layer_norm(target, shape, dtype, affine):
    x = _rand(shape, dtype, 0, target, shift=3.0)  # a mean far from zero
    w = _rand(shape[-1:], dtype, 1, target) if affine in ("both", "weight") else None
    b = _rand(shape[-1:], dtype, 2, target) if affine in ("both", "bias") else None
    expected = _ref(x, w, b)
    _close(layernorm.layer_norm(x, w, b, EPS), expected, dtype)
    out = torch.full_like(x, float("nan"))
    assert layernorm.layer_norm(x, w, b, EPS, out=out) is out
    _close(out, expected, dtype)


def _each_capability(fn) -> list:
    original = layernorm.cpu_capability()
    results = []
    for capability in ("DEFAULT", "AVX2", "AVX512", "AVX512_BF16"):
        try:
            layernorm.set_cpu_capability(capability)
        except RuntimeError:
            continue
        results.append(fn())
    layernorm.set_cpu_capability(original)
    return results


def test_capabilities_agree_bitwise(cpu_kernels):
    x, w, b = _rand((8, 1000), torch.float32, 3), _rand((1000,), torch.float32, 4), None
    results = _each_capability(lambda: layernorm.layer_norm(x, w, b, EPS))
    assert all(torch.equal(results[0], r) for r in results[1:])


@pytest.mark.parametrize("hidden", [4096, 1000, 37])
def test_capabilities_agree_bitwise_bf16(cpu_kernels, hidden):
    """The bf16 loops (intrinsics in the AVX-512 copies, VCVTNE2PS2BF16 in AVX512_BF16)
    round as the plain loop does, with and without weight and bias, at widths with and
    without a partial last vector: NaN/inf rows, a zero row, subnormal results (which
    the instruction would flush), a weight with zeros, a tiny and a huge value."""
    x = _rand((8, hidden), torch.float32, 5)
    x[2, 5] = float("nan")
    x[3, 7] = float("inf")
    x[4] = 0.0
    x[5] *= 1e-30
    w, b = _rand((hidden,), torch.float32, 6), _rand((hidden,), torch.float32, 7)
    w[0], w[1], w[2], w[hidden - 1] = 1e-38, 0.0, -0.0, 3e38
    b[3] = 1e-39
    x, w, b = x.to(torch.bfloat16), w.to(torch.bfloat16), b.to(torch.bfloat16)
    edge_b = b.clone()
    edge_b[4] = float("inf")

    def run() -> list[torch.Tensor]:
        affine = [(w, b), (w, None), (None, b), (None, None), (w, edge_b)]
        return [layernorm.layer_norm(x, ww, bb, EPS).view(torch.int16) for ww, bb in affine]

    results = _each_capability(run)
    for other in results[1:]:
        assert all(torch.equal(a, c) for a, c in zip(results[0], other, strict=True))


def test_non_contiguous_inputs_and_outputs(device):
    x = _rand((6, 260), torch.float32, 5, device)[:, ::2]
    w, b = _rand((130,), torch.float32, 6, device), _rand((130,), torch.float32, 7, device)
    expected = _ref(x, w, b)
    _close(layernorm.layer_norm(x, w, b, EPS), expected, torch.float32)
    out = torch.full((130, 6), float("nan"), device=device).t()
    layernorm.layer_norm(x, w, b, EPS, out=out)
    _close(out, expected, torch.float32)


def test_empty_input(device):
    assert layernorm.layer_norm(torch.empty(0, 32, device=device), None, None, EPS).shape == (0, 32)


def test_errors_say_what_was_wrong(device):
    x = torch.randn(4, 8, device=device)
    with pytest.raises(RuntimeError, match="weight must have shape \\[8\\]"):
        layernorm.layer_norm(x, torch.ones(7, device=device), None, EPS)
    with pytest.raises(RuntimeError, match="bias dtype"):
        layernorm.layer_norm(x, None, torch.ones(8, dtype=torch.float64, device=device), EPS)
    with pytest.raises(RuntimeError, match="dtype must be float32"):
        layernorm.layer_norm(x.int(), None, None, EPS)
    with pytest.raises(RuntimeError, match="out must have shape"):
        layernorm.layer_norm(x, None, None, EPS, out=torch.empty(4, 9, device=device))
    with pytest.raises(RuntimeError, match="not available"):
        layernorm.set_cpu_capability("AVX1024")


@pytest.mark.parametrize("affine", [True, False])
@pytest.mark.parametrize("shape", [(1, 7), (5, 33), (2, 3, 64)])
def test_gradcheck(shape, affine, device):
    x = _rand(shape, torch.float64, 8, device).requires_grad_()
    w = _rand(shape[-1:], torch.float64, 9, device).requires_grad_() if affine else None
    b = _rand(shape[-1:], torch.float64, 10, device).requires_grad_() if affine else None
    inputs = (x, w, b) if affine else (x,)

    def fn(*args):
        return layernorm.layer_norm(*(args if affine else (args[0], None, None)), EPS)

    assert torch.autograd.gradcheck(fn, inputs)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_backward_matches_eager(dtype, device):
    x, w, b = (
        _rand((8, 1000), dtype, 11, device),
        _rand((1000,), dtype, 12, device),
        _rand((1000,), dtype, 13, device),
    )
    grad = _rand((8, 1000), dtype, 14, device)
    ours = [t.clone().requires_grad_() for t in (x, w, b)]
    layernorm.layer_norm(*ours, EPS).backward(grad)
    theirs = [t.double().requires_grad_() for t in (x, w, b)]
    _ref(*theirs).backward(grad.double())
    tol = {"rtol": 1e-4, "atol": 1e-4} if dtype == torch.float32 else {"rtol": 2e-2, "atol": 5e-2}
    for a, e in zip(ours, theirs, strict=True):
        torch.testing.assert_close(a.grad.double(), e.grad, **tol)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_backward_many_rows_is_deterministic(dtype, device):
    """More rows than the GPU backward has blocks, so grad_weight/grad_bias go through
    several partial rows; they match the reference and are bitwise the same on a rerun."""
    shape = (1500, 264)
    x, w, b = _rand(shape, dtype, 15, device), _rand((264,), dtype, 16, device), None
    grad = _rand(shape, dtype, 17, device)
    first = ops.layer_norm_backward(grad, x, w, b, EPS)
    second = ops.layer_norm_backward(grad, x, w, b, EPS)
    assert all(torch.equal(p, q) for p, q in zip(first, second, strict=True))
    xr, wr, br = (t.double().requires_grad_() for t in (x, w, torch.zeros_like(w)))
    _ref(xr, wr, br).backward(grad.double())
    tol = {"rtol": 1e-4, "atol": 1e-3} if dtype == torch.float32 else {"rtol": 2e-2, "atol": 0.5}
    for ours, theirs in zip(first, (xr, wr, br), strict=True):
        torch.testing.assert_close(ours.double(), theirs.grad, **tol)


def _opcheck_cases(device: str):
    x, w, b = (
        torch.randn(3, 40, device=device),
        torch.randn(40, device=device),
        torch.randn(40, device=device),
    )
    return [
        (ops.layer_norm, (x.clone().requires_grad_(), w.clone().requires_grad_(), b, EPS)),
        (ops.layer_norm, (x, None, None, EPS)),
        (ops.layer_norm_out, (torch.empty(3, 40, device=device), x, w, b, EPS)),
        (ops.layer_norm_backward, (torch.randn(3, 40, device=device), x, w, None, EPS)),
    ]


@pytest.mark.parametrize("case", range(len(_opcheck_cases("cpu"))))
def test_opcheck(case, device):
    op, args = _opcheck_cases(device)[case]
    torch.library.opcheck(op, args)


# ---- the layer --------------------------------------------------------------------


def _swap_forward(module: nn.Module) -> nn.Module:
    """What kernelize does: the layer's forward runs on the model's instance."""
    module.forward = layers.LayerNorm.forward.__get__(module)
    return module


def _model(
    hidden: int, dtype: torch.dtype = torch.float32, affine: bool = True, device: str = "cpu"
) -> nn.Module:
    module = nn.LayerNorm(hidden, eps=1e-6, elementwise_affine=affine).to(device, dtype)
    if affine:
        with torch.no_grad():
            module.weight.normal_()
            module.bias.normal_()
    return module


def test_layer_is_pure():
    assert "__init__" not in vars(layers.LayerNorm)
    assert layers.LayerNorm.has_backward and layers.LayerNorm.can_torch_compile


@pytest.mark.parametrize("affine", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_layer_matches_nn_layernorm(dtype, affine, device):
    model = _model(300, dtype, affine, device)
    x = torch.randn(4, 7, 300, dtype=dtype, device=device)
    expected = model(x)
    tol = {"rtol": 1e-5, "atol": 1e-5} if dtype == torch.float32 else {"rtol": 1e-2, "atol": 2e-2}
    torch.testing.assert_close(_swap_forward(model)(x), expected, **tol)


def test_layer_over_two_dimensions_falls_back(device):
    model = nn.LayerNorm((3, 16), device=device)
    x = torch.randn(2, 3, 16, device=device)
    expected = model(x)
    torch.testing.assert_close(_swap_forward(model)(x), expected)


def test_layer_trains(device):
    model, reference = _model(48, device=device), _model(48, device=device)
    reference.load_state_dict(model.state_dict())
    _swap_forward(model)
    x = torch.randn(6, 48, device=device)
    model(x).square().sum().backward()
    reference(x).square().sum().backward()
    for ours, theirs in zip(model.parameters(), reference.parameters(), strict=True):
        torch.testing.assert_close(ours.grad, theirs.grad, rtol=1e-4, atol=1e-4)


def test_layer_compiles_without_graph_breaks(device):
    torch._dynamo.reset()
    model = _swap_forward(_model(96, device=device))
    x = torch.randn(8, 96, device=device)
    expected = model(x)
    torch.testing.assert_close(torch.compile(model, fullgraph=True)(x), expected)


def test_allocating_calls_reuse_released_memory_only():
    """Large outputs come from a pool (no page faults); live outputs are never reused."""
    x, weight, bias = torch.randn(512, 1024), torch.randn(1024), torch.randn(1024)
    expected = F.layer_norm(x, (1024,), weight, bias, 1e-5)
    first = layernorm.layer_norm(x, weight, bias, 1e-5)
    second = layernorm.layer_norm(x, weight, bias, 1e-5)
    assert second.data_ptr() != first.data_ptr()
    pointer = first.data_ptr()
    del first
    third = layernorm.layer_norm(x, weight, bias, 1e-5)
    assert third.data_ptr() == pointer, "released memory was not reused"
    torch.testing.assert_close(second, expected, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(third, expected, rtol=1e-5, atol=1e-5)
