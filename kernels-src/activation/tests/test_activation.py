"""Every op against an eager PyTorch reference computed in float64.

The builder's test runner loads the built variant and registers it as
``sys.modules["activation"]`` before these tests run.
"""

from __future__ import annotations

import math

import activation
import pytest
import torch
import torch.nn.functional as F

# ---- references (float64) ------------------------------------------------------


def _silu(x: torch.Tensor) -> torch.Tensor:
    return F.silu(x)


def _gelu(x: torch.Tensor) -> torch.Tensor:
    return F.gelu(x)


def _gelu_tanh(x: torch.Tensor) -> torch.Tensor:
    return F.gelu(x, approximate="tanh")


def _gelu_fast(x: torch.Tensor) -> torch.Tensor:
    return 0.5 * x * (1.0 + torch.tanh(x * 0.7978845608 * (1.0 + 0.044715 * x * x)))


def _gelu_new(x: torch.Tensor) -> torch.Tensor:
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))


def _gelu_quick(x: torch.Tensor) -> torch.Tensor:
    return x * torch.sigmoid(1.702 * x)


def _halves(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    d = x.shape[-1] // 2
    return x[..., :d], x[..., d:]


def _gated(act):
    def ref(x: torch.Tensor) -> torch.Tensor:
        a, b = _halves(x)
        return act(a) * b

    return ref


def _mul_and_silu(x: torch.Tensor) -> torch.Tensor:
    a, b = _halves(x)
    return a * F.silu(b)


def _fatrelu(threshold: float):
    def ref(x: torch.Tensor) -> torch.Tensor:
        a, b = _halves(x)
        return torch.where(a > threshold, a, torch.zeros_like(a)) * b

    return ref


GATED = {
    "silu_and_mul": _gated(_silu),
    "mul_and_silu": _mul_and_silu,
    "gelu_and_mul": _gated(_gelu),
    "gelu_tanh_and_mul": _gated(_gelu_tanh),
}
UNARY = {
    "silu": _silu,
    "gelu": _gelu,
    "gelu_tanh": _gelu_tanh,
    "gelu_fast": _gelu_fast,
    "gelu_new": _gelu_new,
    "gelu_quick": _gelu_quick,
}

DTYPES = [torch.float32, torch.float64, torch.bfloat16, torch.float16]
TOLERANCE = {
    torch.float32: {"rtol": 1e-5, "atol": 1e-5},
    torch.float64: {"rtol": 1e-10, "atol": 1e-12},
    torch.bfloat16: {"rtol": 1e-2, "atol": 1e-2},
    torch.float16: {"rtol": 1e-2, "atol": 1e-2},
}
# Odd d (not a multiple of any vector width), one row; and a batch of long rows.
GATED_SHAPES = [(1, 2 * 7), (1, 2 * 129), (5, 3, 2 * 4096)]
UNARY_SHAPES = [(1, 7), (1, 129), (5, 3, 4096)]


def _available_capabilities() -> list[str]:
    """The compiled loop copies this CPU can run; every test runs on each."""
    original = activation.cpu_capability()
    available = []
    for capability in ("DEFAULT", "AVX2", "AVX512"):
        try:
            activation.set_cpu_capability(capability)
        except RuntimeError:
            continue
        available.append(capability)
    activation.set_cpu_capability(original)
    return available


CAPABILITIES = _available_capabilities()


@pytest.fixture(params=CAPABILITIES)
def capability(request):
    previous = activation.set_cpu_capability(request.param)
    yield request.param
    activation.set_cpu_capability(previous)


def _input(shape, dtype: torch.dtype, seed: int = 0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    # Wide enough to reach the tails of every activation.
    return (torch.randn(shape, generator=generator, dtype=torch.float64) * 3).to(dtype)


def _check(out: torch.Tensor, expected: torch.Tensor, dtype: torch.dtype) -> None:
    assert out.dtype == dtype
    torch.testing.assert_close(out.double(), expected, **TOLERANCE[dtype])


def _poisoned(shape, dtype: torch.dtype) -> torch.Tensor:
    """An output full of NaN, so any element the kernel skips fails the comparison."""
    return torch.full(shape, float("nan"), dtype=dtype)


# ---- correctness ----------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", GATED_SHAPES, ids=str)
@pytest.mark.parametrize("name", sorted(GATED))
def test_gated_matches_reference(capability, name, shape, dtype):
    x = _input(shape, dtype)
    out = _poisoned((*shape[:-1], shape[-1] // 2), dtype)
    returned = getattr(activation, name)(out, x)
    assert returned is out
    _check(out, GATED[name](x.double()), dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", UNARY_SHAPES, ids=str)
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_matches_reference(capability, name, shape, dtype):
    x = _input(shape, dtype)
    out = _poisoned(shape, dtype)
    returned = getattr(activation, name)(out, x)
    assert returned is out
    _check(out, UNARY[name](x.double()), dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("threshold", [0.0, 0.5, -1.0])
def test_fatrelu_and_mul_matches_reference(capability, threshold, dtype):
    x = _input((5, 2 * 129), dtype)
    out = _poisoned((5, 129), dtype)
    activation.fatrelu_and_mul(out, x, threshold)
    _check(out, _fatrelu(threshold)(x.double()), dtype)


def test_one_long_row_is_split_across_threads_correctly(capability):
    d = 300_001  # longer than the parallel grain, and odd
    x = _input((1, 2 * d), torch.float32)
    out = _poisoned((1, d), torch.float32)
    activation.silu_and_mul(out, x)
    _check(out, GATED["silu_and_mul"](x.double()), torch.float32)


def test_many_short_rows(capability):
    x = _input((40_000, 2 * 3), torch.float32)
    out = _poisoned((40_000, 3), torch.float32)
    activation.gelu_tanh_and_mul(out, x)
    _check(out, GATED["gelu_tanh_and_mul"](x.double()), torch.float32)


def test_extreme_inputs_stay_finite_and_correct(capability):
    values = [-1e4, -100.0, -88.0, -20.0, -1e-6, 0.0, 1e-6, 20.0, 88.0, 100.0, 1e4]
    x = torch.tensor(values, dtype=torch.float32)
    for name, ref in UNARY.items():
        out = _poisoned(x.shape, torch.float32)
        getattr(activation, name)(out, x)
        _check(out, ref(x.double()), torch.float32)


def test_nan_propagates(capability):
    x = torch.tensor([float("nan"), 1.0, 2.0, float("nan")])  # a = [nan, 1], b = [2, nan]
    out = torch.zeros(2)
    activation.silu_and_mul(out, x)
    assert torch.isnan(out).all()


# ---- layouts ----------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_non_contiguous_input(dtype):
    base = _input((6, 2 * 2 * 33), dtype)
    x = base[::2, ::2]  # strided rows and a strided last dimension
    assert not x.is_contiguous()
    out = _poisoned((3, 33), dtype)
    activation.silu_and_mul(out, x)
    _check(out, GATED["silu_and_mul"](x.double()), dtype)


def test_transposed_input():
    x = _input((2 * 16, 7), torch.float32).t()
    out = _poisoned((7, 16), torch.float32)
    activation.gelu_and_mul(out, x)
    _check(out, GATED["gelu_and_mul"](x.double()), torch.float32)


def test_non_contiguous_out_is_filled():
    x = _input((4, 2 * 10), torch.float32)
    storage = _poisoned((10, 4), torch.float32)
    out = storage.t()  # [4, 10], column-major
    activation.silu_and_mul(out, x)
    _check(out, GATED["silu_and_mul"](x.double()), torch.float32)
    unary_out = _poisoned((10, 4), torch.float32).t()
    activation.gelu_quick(unary_out, x[:, :10])
    _check(unary_out, _gelu_quick(x[:, :10].double()), torch.float32)


@pytest.mark.parametrize("shape", [(0, 2 * 8), (4, 0), (2, 0, 6)], ids=str)
def test_empty_tensors(shape):
    x = torch.empty(shape)
    out = torch.empty((*shape[:-1], shape[-1] // 2))
    activation.silu_and_mul(out, x)
    activation.silu(torch.empty(shape), x)


def test_zero_dim_tensor_for_unary_ops():
    x = torch.tensor(1.5)
    out = torch.tensor(float("nan"))
    activation.gelu(out, x)
    _check(out, _gelu(x.double()), torch.float32)


# ---- errors ----------------------------------------------------------------------


def test_odd_last_dimension_is_rejected():
    with pytest.raises(RuntimeError, match="last dimension of input must be even"):
        activation.silu_and_mul(torch.empty(2, 3), torch.empty(2, 7))


def test_wrong_out_shape_is_rejected():
    with pytest.raises(RuntimeError, match=r"out must have shape \[2, 4\]"):
        activation.gelu_and_mul(torch.empty(2, 8), torch.empty(2, 8))
    with pytest.raises(RuntimeError, match="out must have the shape of input"):
        activation.gelu(torch.empty(3), torch.empty(4))


def test_dtype_mismatch_is_rejected():
    with pytest.raises(RuntimeError, match=r"out dtype \(BFloat16\) must match input dtype"):
        activation.silu_and_mul(torch.empty(2, 4, dtype=torch.bfloat16), torch.empty(2, 8))


def test_unsupported_dtype_is_rejected():
    with pytest.raises(RuntimeError, match="float32, float64, bfloat16 or float16"):
        activation.silu(torch.empty(4, dtype=torch.int32), torch.zeros(4, dtype=torch.int32))


def test_scalar_input_to_gated_op_is_rejected():
    with pytest.raises(RuntimeError, match="at least one dimension"):
        activation.silu_and_mul(torch.empty(()), torch.tensor(1.0))


def test_unknown_capability_is_rejected():
    with pytest.raises(RuntimeError, match="not available"):
        activation.set_cpu_capability("AVX9000")


def test_capability_reports_best_loops_by_default():
    assert activation.cpu_capability() == CAPABILITIES[-1]
    assert activation.cpu_capability() in ("DEFAULT", "AVX2", "AVX512")


# ---- layers ----------------------------------------------------------------------

GATED_LAYERS = {
    "SiluAndMul": "silu_and_mul",
    "MulAndSilu": "mul_and_silu",
    "GeluAndMul": "gelu_and_mul",
    "GeluTanhAndMul": "gelu_tanh_and_mul",
}
UNARY_LAYERS = {
    "Silu": "silu",
    "Gelu": "gelu",
    "GeluTanh": "gelu_tanh",
    "FastGELU": "gelu_fast",
    "NewGELU": "gelu_new",
    "QuickGELU": "gelu_quick",
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("layer", sorted(GATED_LAYERS))
def test_gated_layers_match_reference(layer, dtype):
    x = _input((3, 5, 2 * 65), dtype)
    out = getattr(activation.layers, layer)()(x)
    _check(out, GATED[GATED_LAYERS[layer]](x.double()), dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("layer", sorted(UNARY_LAYERS))
def test_unary_layers_match_reference(layer, dtype):
    x = _input((3, 5, 65), dtype)
    out = getattr(activation.layers, layer)()(x)
    _check(out, UNARY[UNARY_LAYERS[layer]](x.double()), dtype)


def test_fatrelu_layer_reads_threshold_of_the_replaced_layer():
    layer = activation.layers.FatreluAndMul()
    x = _input((4, 2 * 33), torch.float32)
    _check(layer(x), _fatrelu(0.0)(x.double()), torch.float32)
    layer.threshold = 0.75  # what kernelize leaves on the model's own layer
    _check(layer(x), _fatrelu(0.75)(x.double()), torch.float32)


@pytest.mark.parametrize("layer", sorted(GATED_LAYERS) + sorted(UNARY_LAYERS) + ["FatreluAndMul"])
def test_layers_are_pure(layer):
    cls = getattr(activation.layers, layer)
    assert issubclass(cls, torch.nn.Module)
    assert "__init__" not in vars(cls)
    own = {k for k in vars(cls) if not k.startswith("__")}
    assert own == {"forward", "has_backward", "can_torch_compile"}
    assert cls.has_backward is False


# ---- op registration -------------------------------------------------------------


def _opcheck_cases():
    x = _input((3, 2 * 19), torch.float32)
    for name in sorted(GATED):
        yield name, (torch.empty(3, 19), x), {}
    yield "fatrelu_and_mul", (torch.empty(3, 19), x, 0.25), {}
    for name in sorted(UNARY):
        yield name, (torch.empty(3, 38), x), {}


@pytest.mark.parametrize(
    ("name", "args", "kwargs"),
    list(_opcheck_cases()),
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_opcheck(name, args, kwargs):
    op = getattr(activation._ops.ops, name).default
    torch.library.opcheck(op, args, kwargs)


def test_layer_under_torch_compile():
    layer = activation.layers.SiluAndMul()
    compiled = torch.compile(layer, fullgraph=True)
    x = _input((4, 2 * 40), torch.float32)
    _check(compiled(x), GATED["silu_and_mul"](x.double()), torch.float32)
