"""The few-rows product ``linear`` (a decode step's projections: ``_widen.streams`` and
``layers.Linear``) against the exact product: one rounding of a float32 sum, on every
loop copy, for the shapes and inputs a model gives it."""

from __future__ import annotations

import types

import pytest
import torch
import torch.nn.functional as F
from rmsnorm import _widen, layers
from rmsnorm._ops import ops
from torch import nn

needs_streaming = pytest.mark.skipif(
    _widen.NATIVE_BF16, reason="this CPU multiplies bfloat16 natively: PyTorch keeps its product")


@pytest.fixture
def cpu_target(target):
    if target != "cpu":
        pytest.skip("linear's op is CPU-only (other devices keep PyTorch's product)")
    return target


def _rand(shape, seed: int, scale: float = 1.0, dtype=torch.bfloat16) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=generator, dtype=torch.float64) * scale).to(dtype)




@pytest.mark.parametrize("rows", [1, 2, 3, 5, 11])
@pytest.mark.parametrize("inputs,features", [(64, 96), (100, 7), (1000, 37), (4099, 13)])
def test_bfloat16_is_one_rounding_of_the_float32_sum(cpu_target, rows, inputs, features,
                                                     product_ulps):
    """Every loop copy, rows within one pass of four and past it, in-features with a tail
    under a 32-value block (and under 8), weight rows past a pass of four: within one
    bfloat16 ulp of the exact value, with and without bias and residual."""
    x, weight = _rand((rows, inputs), 0), _rand((features, inputs), 1, inputs ** -0.5)
    bias, residual = _rand((features,), 2), _rand((rows, features), 3)
    for b, r in ((None, None), (bias, None), (None, residual), (bias, residual)):
        got = ops.linear(x, weight, b, r)
        assert got.dtype == torch.bfloat16 and got.shape == (rows, features)
        assert product_ulps(got, x, weight, b, r) <= 1.0  # within 1 ulp (~0.5 + sum error)
        theirs = F.linear(x, weight, b) if r is None else r + F.linear(x, weight, b)
        torch.testing.assert_close(got, theirs, rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("dtype,tolerance", [(torch.float32, 1e-5), (torch.float64, 1e-12),
                                             (torch.float16, 2e-3)])
def test_other_dtypes_are_correct_too(cpu_target, dtype, tolerance, exact_product):
    """The op takes every dtype the kernel does (layers route only bfloat16 to it)."""
    x, weight = _rand((3, 130), 0, dtype=dtype), _rand((40, 130), 1, 130 ** -0.5, dtype)
    bias, residual = _rand((40,), 2, dtype=dtype), _rand((3, 40), 3, dtype=dtype)
    got = ops.linear(x, weight, bias, residual)
    assert got.dtype == dtype
    torch.testing.assert_close(got.double(), exact_product(x, weight, bias, residual),
                               rtol=tolerance, atol=tolerance)


def test_leading_dimensions_and_non_contiguous_inputs(cpu_target, product_ulps):
    base = _rand((2, 64, 3), 0)
    x = base.transpose(1, 2)  # [2, 3, 64], not contiguous
    weight = _rand((80, 96), 1, 0.1)[:, :64]  # a strided view
    residual = _rand((80, 2, 3), 2).permute(1, 2, 0)  # [2, 3, 80], not contiguous
    assert not (x.is_contiguous() or weight.is_contiguous() or residual.is_contiguous())
    got = ops.linear(x, weight, None, residual)
    assert got.shape == (2, 3, 80) and got.is_contiguous()
    expected = ops.linear(x.contiguous(), weight.contiguous(), None, residual.contiguous())
    assert torch.equal(got, expected)
    assert product_ulps(got, x, weight, None, residual) <= 1.0


def test_empty_products(cpu_target):
    """No rows or no features: an empty result; no in-features: bias and residual alone."""
    assert ops.linear(_rand((0, 16), 0), _rand((8, 16), 1)).shape == (0, 8)
    assert ops.linear(_rand((2, 16), 0), _rand((0, 16), 1)).shape == (2, 0)
    bias, residual = _rand((5,), 2), _rand((2, 5), 3)
    got = ops.linear(_rand((2, 0), 0), _rand((5, 0), 1), bias, residual)
    assert torch.equal(got, (bias.float() + residual.float()).bfloat16())


def test_errors_say_what_was_wrong(cpu_target):
    x, weight = torch.randn(2, 16), torch.randn(8, 16)
    with pytest.raises(RuntimeError, match=r"linear: weight must have shape \[8, 16\]"):
        ops.linear(x, weight[:, :4])
    with pytest.raises(RuntimeError, match=r"weight dtype \(BFloat16\) must match x"):
        ops.linear(x, weight.bfloat16())
    with pytest.raises(RuntimeError, match=r"bias must have shape \[8\]"):
        ops.linear(x, weight, torch.randn(7))
    with pytest.raises(RuntimeError, match=r"bias dtype \(BFloat16\) must match x"):
        ops.linear(x, weight, torch.randn(8).bfloat16())
    with pytest.raises(RuntimeError, match=r"residual must have shape \[2, 8\]"):
        ops.linear(x, weight, None, torch.randn(3, 8))
    with pytest.raises(RuntimeError, match=r"dtype must be float32"):
        ops.linear(x.int(), weight.int())


def test_meta_shapes_and_opcheck(cpu_target):
    x, weight = _rand((2, 3, 16), 0), _rand((8, 16), 1)
    meta = ops.linear(x.to("meta"), weight.to("meta"))
    assert meta.shape == (2, 3, 8) and meta.dtype == torch.bfloat16 and meta.device.type == "meta"
    bias, residual = _rand((8,), 2), _rand((2, 3, 8), 3)
    torch.library.opcheck(ops.linear, (x, weight, bias, residual))
    torch.library.opcheck(ops.linear, (x.float(), weight.float()))


@needs_streaming
def test_decode_rows_stream_and_the_rest_does_not(cpu_kernels):
    """1 to GEMV_ROWS - 1 rows run the op; more rows widen; another dtype, gradients, or a
    bias/residual the op does not take leave PyTorch's product."""
    weight = _rand((32, 64), 1)
    assert _widen.streams(_rand((1, 1, 64), 0), weight)
    assert _widen.streams(_rand((_widen.GEMV_ROWS - 1, 64), 0), weight)
    assert not _widen.streams(_rand((_widen.GEMV_ROWS, 64), 0), weight)
    assert _widen.widens(_rand((_widen.GEMV_ROWS, 64), 0), weight)
    assert not _widen.streams(_rand((0, 64), 0), weight)
    assert not _widen.streams(_rand((2, 64), 0, dtype=torch.float32), weight.float())
    assert not _widen.streams(_rand((2, 64), 0), weight, _rand((32,), 2, dtype=torch.float32))
    assert not _widen.streams(_rand((2, 64), 0), weight, None, _rand((1, 32), 3))  # broadcast
    trained = weight.clone().requires_grad_()
    assert not _widen.streams(_rand((2, 64), 0), trained)
    with torch.no_grad():
        assert _widen.streams(_rand((2, 64), 0), trained)
    x = _rand((2, 64), 0)
    got = _widen.linear(x, weight, _rand((32,), 2), _rand((2, 32), 3))
    assert torch.equal(got, ops.linear(x, weight, _rand((32,), 2), _rand((2, 32), 3)))


def _linear_layer(features: int, inputs: int) -> nn.Linear:
    torch.manual_seed(0)
    module = nn.Linear(inputs, features).to(torch.bfloat16).eval()
    module.forward = types.MethodType(layers.Linear.forward, module)
    return module


@needs_streaming
def test_the_linear_layer_streams_decode_and_training_keeps_pytorch(cpu_kernels, product_ulps):
    module = _linear_layer(96, 67)
    step = _rand((1, 1, 67), 0)
    with torch.no_grad():
        got = module(step)
    assert torch.equal(got, ops.linear(step, module.weight, module.bias))
    assert product_ulps(got, step, module.weight, module.bias) <= 1.0
    module.train()
    x = step.clone().requires_grad_()
    out = module(x)
    assert out.grad_fn is not None  # PyTorch's product, with its autograd
    out.float().sum().backward()
    assert x.grad is not None and module.weight.grad is not None
    assert torch.equal(out.detach(), F.linear(step, module.weight, module.bias))


@needs_streaming
def test_the_linear_layer_compiles_to_the_same_bits(cpu_kernels):
    module = _linear_layer(300, 64)
    x = _rand((1, 3, 64), 0)
    with torch.no_grad():
        eager = module(x)
        compiled = torch.compile(module, fullgraph=True)(x)
    assert torch.equal(compiled, eager)
    assert torch.equal(eager, ops.linear(x, module.weight, module.bias))
