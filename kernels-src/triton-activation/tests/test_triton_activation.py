"""The Triton kernels against float64 eager PyTorch.

Runs on a CUDA or XPU device where one exists; otherwise on CPU under Triton's
interpreter, which ``builder test`` enables (``TRITON_INTERPRET=1``) for noarch
CUDA/XPU variants when Triton is installed. Without either, every test skips with
the reason. The builder's test runner registers the built variant as
``sys.modules["triton_activation"]``.
"""

from __future__ import annotations

import os

import pytest
import torch
import torch.nn.functional as F

pytest.importorskip("triton", reason="Triton is not installed in this torch environment")

import triton_activation  # after the skip: it imports triton


def _device() -> str | None:
    if torch.cuda.is_available():
        return "cuda"
    if hasattr(torch, "xpu") and torch.xpu.is_available():
        return "xpu"
    if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
        return "cpu"
    return None


DEVICE = _device()
pytestmark = pytest.mark.skipif(
    DEVICE is None, reason="needs a CUDA/XPU device or TRITON_INTERPRET=1"
)

REFERENCES = {
    "silu_and_mul": F.silu,
    "gelu_and_mul": F.gelu,
    "gelu_tanh_and_mul": lambda a: F.gelu(a, approximate="tanh"),
}
LAYERS = {"SiluAndMul": "silu_and_mul", "GeluAndMul": "gelu_and_mul",
          "GeluTanhAndMul": "gelu_tanh_and_mul"}
TOLERANCE = {
    torch.float32: {"rtol": 1e-5, "atol": 1e-5},
    torch.bfloat16: {"rtol": 1e-2, "atol": 1e-2},
    torch.float16: {"rtol": 1e-2, "atol": 1e-2},
}


def _reference(name: str, x: torch.Tensor) -> torch.Tensor:
    x = x.double().cpu()
    d = x.shape[-1] // 2
    return REFERENCES[name](x[..., :d]) * x[..., d:]


def _input(shape, dtype: torch.dtype, seed: int = 0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=generator, dtype=torch.float64) * 3).to(dtype).to(DEVICE)


def _check(out: torch.Tensor, expected: torch.Tensor, dtype: torch.dtype) -> None:
    assert out.dtype == dtype
    torch.testing.assert_close(out.double().cpu(), expected, **TOLERANCE[dtype])


# Odd d (masking), one row, several leading dims, d wider than one block (1024).
SHAPES = [(1, 2 * 7), (3, 2 * 129), (2, 3, 2 * 1500)]


@pytest.mark.parametrize("dtype", list(TOLERANCE), ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("name", sorted(REFERENCES))
def test_ops_match_reference_and_fill_every_element(name, shape, dtype):
    x = _input(shape, dtype)
    out = torch.full((*shape[:-1], shape[-1] // 2), float("nan"), dtype=dtype, device=DEVICE)
    returned = getattr(triton_activation, name)(out, x)
    assert returned is out
    _check(out, _reference(name, x), dtype)


def test_non_contiguous_input_and_out():
    x = _input((6, 2 * 2 * 40), torch.float32)[::2, ::2]
    assert not x.is_contiguous()
    out = torch.full((40, 3), float("nan"), device=DEVICE).t()
    triton_activation.silu_and_mul(out, x)
    _check(out, _reference("silu_and_mul", x), torch.float32)


@pytest.mark.parametrize("layer", sorted(LAYERS))
def test_layers(layer):
    x = _input((2, 5, 2 * 33), torch.bfloat16)
    out = getattr(triton_activation.layers, layer)()(x)
    _check(out, _reference(LAYERS[layer], x), torch.bfloat16)


@pytest.mark.parametrize("layer", sorted(LAYERS))
def test_layers_are_pure(layer):
    cls = getattr(triton_activation.layers, layer)
    assert "__init__" not in vars(cls)
    assert {k for k in vars(cls) if not k.startswith("__")} == {
        "forward", "has_backward", "can_torch_compile"
    }


def test_errors_say_what_was_wrong():
    x = _input((2, 8), torch.float32)
    with pytest.raises(RuntimeError, match=r"out must have shape \(2, 4\)"):
        triton_activation.silu_and_mul(torch.empty(2, 8, device=DEVICE), x)
    with pytest.raises(RuntimeError, match="must be even"):
        triton_activation.gelu_and_mul(torch.empty(2, 3, device=DEVICE), _input((2, 7), torch.float32))
    with pytest.raises(RuntimeError, match="one dtype of float32, float16 or bfloat16"):
        triton_activation.silu_and_mul(torch.empty(2, 4, device=DEVICE, dtype=torch.float64),
                                       x.double())


def test_empty_input():
    x = torch.empty(0, 8, device=DEVICE)
    out = torch.empty(0, 4, device=DEVICE)
    assert triton_activation.silu_and_mul(out, x) is out
