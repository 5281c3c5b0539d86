"""Every op against an eager PyTorch reference computed in float64.

The builder's test runner loads the built variant and registers it as
``sys.modules["activation"]`` before these tests run. ``conftest.py`` decides the
devices: ``target`` / ``device`` run on CPU (every compiled loop copy) and on
CUDA/ROCm, MPS and XPU where the variant has kernels for them and the machine has
the device (skipped with the reason otherwise); ``dtype`` comes with the device
(float64 on CPU only).
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

TOLERANCE = {
    torch.float32: {"rtol": 1e-5, "atol": 1e-5},
    torch.float64: {"rtol": 1e-10, "atol": 1e-12},
    torch.bfloat16: {"rtol": 1e-2, "atol": 1e-2},
    torch.float16: {"rtol": 1e-2, "atol": 1e-2},
}
# Odd d (not a multiple of any vector width), one row; and a batch of long rows.
GATED_SHAPES = [(1, 2 * 7), (1, 2 * 129), (5, 3, 2 * 4096)]
UNARY_SHAPES = [(1, 7), (1, 129), (5, 3, 4096)]


def _input(shape, dtype: torch.dtype, device: str = "cpu", seed: int = 0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    # Wide enough to reach the tails of every activation; drawn on CPU so every
    # device sees the same numbers.
    return (torch.randn(shape, generator=generator, dtype=torch.float64) * 3).to(dtype).to(device)


def _ref(fn, x: torch.Tensor) -> torch.Tensor:
    """The float64 eager reference, computed on CPU."""
    return fn(x.detach().cpu().double())


def _check(out: torch.Tensor, expected: torch.Tensor, dtype: torch.dtype) -> None:
    assert out.dtype == dtype
    torch.testing.assert_close(out.cpu().double(), expected, **TOLERANCE[dtype])


def _poisoned(shape, dtype: torch.dtype, device: str = "cpu") -> torch.Tensor:
    """An output full of NaN, so any element the kernel skips fails the comparison."""
    return torch.full(shape, float("nan"), dtype=dtype, device=device)


# ---- correctness ----------------------------------------------------------------


@pytest.mark.parametrize("shape", GATED_SHAPES, ids=str)
@pytest.mark.parametrize("name", sorted(GATED))
def test_gated_matches_reference(target, dtype, name, shape):
    x = _input(shape, dtype, target)
    out = _poisoned((*shape[:-1], shape[-1] // 2), dtype, target)
    returned = getattr(activation, name)(out, x)
    assert returned is out
    _check(out, _ref(GATED[name], x), dtype)


@pytest.mark.parametrize("shape", UNARY_SHAPES, ids=str)
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_matches_reference(target, dtype, name, shape):
    x = _input(shape, dtype, target)
    out = _poisoned(shape, dtype, target)
    returned = getattr(activation, name)(out, x)
    assert returned is out
    _check(out, _ref(UNARY[name], x), dtype)


@pytest.mark.parametrize("threshold", [0.0, 0.5, -1.0])
def test_fatrelu_and_mul_matches_reference(target, dtype, threshold):
    x = _input((5, 2 * 129), dtype, target)
    out = _poisoned((5, 129), dtype, target)
    activation.fatrelu_and_mul(out, x, threshold)
    _check(out, _ref(_fatrelu(threshold), x), dtype)


def test_one_long_row_is_split_across_threads_correctly(target):
    d = 300_001  # longer than the parallel grain / a block's sweep, and odd
    x = _input((1, 2 * d), torch.float32, target)
    out = _poisoned((1, d), torch.float32, target)
    activation.silu_and_mul(out, x)
    _check(out, _ref(GATED["silu_and_mul"], x), torch.float32)


def test_many_short_rows(target):
    x = _input((40_000, 2 * 3), torch.float32, target)
    out = _poisoned((40_000, 3), torch.float32, target)
    activation.gelu_tanh_and_mul(out, x)
    _check(out, _ref(GATED["gelu_tanh_and_mul"], x), torch.float32)


@pytest.mark.dtypes(torch.float32, torch.bfloat16)
def test_wide_rows_use_every_thread_and_vector(target, dtype):
    """d = 14336 (a Llama-3 MLP): several vector sweeps of a full block per row."""
    x = _input((3, 2 * 14336), dtype, target)
    out = _poisoned((3, 14336), dtype, target)
    activation.silu_and_mul(out, x)
    _check(out, _ref(GATED["silu_and_mul"], x), dtype)


@pytest.mark.dtypes(torch.float32, torch.float16)
def test_misaligned_tensors_take_the_element_path(target, dtype):
    """Views starting one element into their storage cannot use 16-byte accesses."""
    gated_x = _input((4 * 2 * 64 + 1,), dtype, target)[1:].view(4, 2 * 64)
    gated_out = _poisoned((4 * 64 + 1,), dtype, target)[1:].view(4, 64)
    activation.gelu_and_mul(gated_out, gated_x)
    _check(gated_out, _ref(GATED["gelu_and_mul"], gated_x), dtype)
    x = _input((1001,), dtype, target)[1:]
    out = _poisoned((1001,), dtype, target)[1:]
    activation.gelu_quick(out, x)
    _check(out, _ref(UNARY["gelu_quick"], x), dtype)


def test_extreme_inputs_stay_finite_and_correct(target):
    values = [-1e4, -100.0, -88.0, -20.0, -1e-6, 0.0, 1e-6, 20.0, 88.0, 100.0, 1e4]
    x = torch.tensor(values, dtype=torch.float32, device=target)
    for name, ref in UNARY.items():
        out = _poisoned(x.shape, torch.float32, target)
        getattr(activation, name)(out, x)
        _check(out, _ref(ref, x), torch.float32)


def test_nan_propagates(target):
    # a = [nan, 1], b = [2, nan]
    x = torch.tensor([float("nan"), 1.0, 2.0, float("nan")], device=target)
    out = torch.zeros(2, device=target)
    activation.silu_and_mul(out, x)
    assert torch.isnan(out).all()


def _bf16_products(rows: int, d: int, seed: int) -> torch.Tensor:
    """bf16 gated inputs whose float products span every rounding case: exponents from
    float-subnormal to overflow, exact ties (a bf16 product has up to 16 significant bits,
    so about one in 256 lies halfway), subnormal factors, inf and NaN, a partial last
    32-value step (d odd)."""
    generator = torch.Generator().manual_seed(seed)
    scale = torch.randint(-75, 75, (rows, 2 * d), generator=generator).double()
    x = torch.randn(rows, 2 * d, generator=generator, dtype=torch.float64) * 2.0**scale
    x[0, :8] = torch.tensor([1 + 2**-7, 1 + 3 * 2**-7, 1e-39, -3e-40, 3e38, 2.0, 1.0, -1.0])
    x[0, d:d + 8] = torch.tensor([1 + 2**-7, 1 + 2**-7, 2.0, 1.0, 4.0, float("inf"),
                                  float("nan"), 1e-38])
    x[1, 5] = float("nan")
    return x.to(torch.bfloat16)


def _same_bits_or_both_nan(out: torch.Tensor, expected: torch.Tensor) -> None:
    nan = torch.isnan(expected)
    assert torch.equal(torch.isnan(out), nan), "a NaN appeared or vanished"
    mismatch = (out.view(torch.int16) != expected.view(torch.int16)) & ~nan
    assert not mismatch.any(), (
        f"{int(mismatch.sum())} values rounded differently from torch, e.g. "
        f"{out[mismatch][:4].tolist()} for {expected[mismatch][:4].tolist()}"
    )


def test_bf16_rounding_is_torchs_bit_for_bit(target):
    """fatrelu_and_mul's float product of two bf16 values is exact (or one IEEE rounding
    when subnormal), so its bf16 result must be torch's rounding of it to the bit: ties to
    even, subnormal results kept (VCVTNE2PS2BF16 alone would flush them to zero),
    overflow to inf, NaN kept a NaN."""
    d = 4099
    x = _bf16_products(3, d, seed=5)
    out = _poisoned((3, d), torch.bfloat16, target)
    activation.fatrelu_and_mul(out, x.to(target), -3e38)
    a, b = x.float()[:, :d], x.float()[:, d:]
    expected = (torch.where(a > -3e38, a, torch.zeros_like(a)) * b).to(torch.bfloat16)
    assert (expected.float().abs() < 2.0**-126).logical_and(expected != 0).any()
    _same_bits_or_both_nan(out.cpu(), expected)


def test_bf16_subnormals_and_specials_survive(target):
    """Subnormal inputs and results stay (not flushed), inf and NaN propagate."""
    a = torch.tensor([2.0, 1e-39, 3e38, float("inf"), 1.0, float("nan"), 1.0, 2.0])
    b = torch.tensor([1e-39, 1.0, 4.0, 1.0, float("inf"), 1.0, float("nan"), -3e-39])
    x = torch.cat([a, b]).to(torch.bfloat16).repeat(1, 9)[:, : 16 * 9].reshape(9, 16)
    out = _poisoned((9, 8), torch.bfloat16, target)
    activation.silu_and_mul(out, x.to(target))
    expected = _ref(GATED["silu_and_mul"], x).to(torch.bfloat16)
    out = out.cpu()
    assert torch.equal(torch.isnan(out), torch.isnan(expected))
    assert torch.equal(torch.isinf(out), torch.isinf(expected))
    finite = torch.isfinite(expected)
    assert (out[finite] != 0).all(), "a subnormal result was flushed to zero"
    torch.testing.assert_close(out[finite].double(), expected[finite].double(), rtol=1e-2,
                               atol=0)
    unary = _poisoned((9, 8), torch.bfloat16, target)
    activation.silu(unary, x[:, :8].to(target))
    assert unary[:, 1].cpu().ne(0).all(), "silu of a subnormal was flushed to zero"


@pytest.mark.parametrize("name", ["silu_and_mul", "mul_and_silu", "silu", "gelu_quick"])
def test_bf16_results_are_nearly_correctly_rounded(target, name):
    """bf16 results are at most one ulp from the correctly rounded value and almost always
    equal to it: the AVX-512 loops' bf16 sigmoid (no Newton step, a shorter exp) stays
    under 1.1e-4 relative error, so about 1% of results near a tie may round the other
    way; a sloppier approximation would move many more."""
    x = _input((64, 2 * 1024), torch.bfloat16, target, seed=3)
    fn, shape = (GATED[name], (64, 1024)) if name in GATED else (UNARY[name], (64, 2048))
    out = _poisoned(shape, torch.bfloat16, target)
    getattr(activation, name)(out, x)
    exact = _ref(fn, x).to(torch.bfloat16)
    # The far tails (|result| < 1e-30, e.g. silu(-80)) are clamped on every copy (exp's
    # argument at 88) and stay within the absolute tolerance instead. (Not gelu_tanh: its
    # float64 reference loses digits in 1 + tanh(u) for x < -5.)
    normal = exact.abs() > 1e-30
    ulps = (out.cpu().view(torch.int16).int() - exact.view(torch.int16).int()).abs()[normal]
    assert ulps.max() <= 1
    assert (ulps > 0).float().mean() < 0.01


def test_float_infinities(target):
    """silu(inf) is inf and silu(-inf) is -inf or NaN (never a finite value)."""
    x = torch.tensor([float("inf"), float("-inf"), float("nan"), 5.0], device=target)
    out = _poisoned(x.shape, torch.float32, target)
    activation.silu(out, x)
    assert out[0] == float("inf") and out[3] == pytest.approx(5.0 / (1 + math.exp(-5.0)))
    assert not torch.isfinite(out[1]) and torch.isnan(out[2])


# ---- layouts ----------------------------------------------------------------------


def test_non_contiguous_input(device, dtype):
    base = _input((6, 2 * 2 * 33), dtype, device)
    x = base[::2, ::2]  # strided rows and a strided last dimension
    assert not x.is_contiguous()
    out = _poisoned((3, 33), dtype, device)
    activation.silu_and_mul(out, x)
    _check(out, _ref(GATED["silu_and_mul"], x), dtype)


def test_transposed_input(device):
    x = _input((2 * 16, 7), torch.float32, device).t()
    out = _poisoned((7, 16), torch.float32, device)
    activation.gelu_and_mul(out, x)
    _check(out, _ref(GATED["gelu_and_mul"], x), torch.float32)


def test_non_contiguous_out_is_filled(device):
    x = _input((4, 2 * 10), torch.float32, device)
    out = _poisoned((10, 4), torch.float32, device).t()  # [4, 10], column-major
    activation.silu_and_mul(out, x)
    _check(out, _ref(GATED["silu_and_mul"], x), torch.float32)
    unary_out = _poisoned((10, 4), torch.float32, device).t()
    activation.gelu_quick(unary_out, x[:, :10])
    _check(unary_out, _ref(_gelu_quick, x[:, :10]), torch.float32)


@pytest.mark.parametrize("shape", [(0, 2 * 8), (4, 0), (2, 0, 6)], ids=str)
def test_empty_tensors(device, shape):
    x = torch.empty(shape, device=device)
    out = torch.empty((*shape[:-1], shape[-1] // 2), device=device)
    activation.silu_and_mul(out, x)
    activation.silu(torch.empty(shape, device=device), x)
    assert out.shape == (*shape[:-1], shape[-1] // 2)


def test_zero_dim_tensor_for_unary_ops(device):
    x = torch.tensor(1.5, device=device)
    out = torch.tensor(float("nan"), device=device)
    activation.gelu(out, x)
    _check(out, _ref(_gelu, x), torch.float32)


# ---- errors ----------------------------------------------------------------------


def test_odd_last_dimension_is_rejected(device):
    with pytest.raises(RuntimeError, match="last dimension of input must be even"):
        activation.silu_and_mul(torch.empty(2, 3, device=device), torch.empty(2, 7, device=device))


def test_wrong_out_shape_is_rejected(device):
    with pytest.raises(RuntimeError, match=r"out must have shape \[2, 4\]"):
        activation.gelu_and_mul(torch.empty(2, 8, device=device), torch.empty(2, 8, device=device))
    with pytest.raises(RuntimeError, match="out must have the shape of input"):
        activation.gelu(torch.empty(3, device=device), torch.empty(4, device=device))


def test_dtype_mismatch_is_rejected(device):
    out = torch.empty(2, 4, dtype=torch.bfloat16, device=device)
    with pytest.raises(RuntimeError, match=r"out dtype \(BFloat16\) must match input dtype"):
        activation.silu_and_mul(out, torch.empty(2, 8, device=device))


def test_unsupported_dtype_is_rejected(device):
    allowed = (
        "float32, float64, bfloat16 or float16"
        if device == "cpu"
        else ("float32, bfloat16 or float16")
    )
    x = torch.zeros(4, dtype=torch.int32, device=device)
    with pytest.raises(RuntimeError, match=allowed):
        activation.silu(torch.empty(4, dtype=torch.int32, device=device), x)
    if device != "cpu":  # the GPU kernels are not compiled for float64
        x = torch.zeros(4, dtype=torch.float64, device=device)
        with pytest.raises(RuntimeError, match=allowed):
            activation.silu(torch.empty_like(x), x)


def test_scalar_input_to_gated_op_is_rejected(device):
    with pytest.raises(RuntimeError, match="at least one dimension"):
        activation.silu_and_mul(torch.empty((), device=device), torch.tensor(1.0, device=device))


def test_out_on_the_cpu_is_rejected(device):
    if device == "cpu":
        pytest.skip("needs a second device type")
    with pytest.raises(RuntimeError, match="expected"):
        activation.silu_and_mul(torch.empty(2, 4), torch.empty(2, 8, device=device))


def test_unknown_capability_is_rejected(device):
    if device != "cpu":
        pytest.skip("CPU loop selection only")
    with pytest.raises(RuntimeError, match="not available"):
        activation.set_cpu_capability("AVX9000")


def test_capability_reports_best_loops_by_default(device):
    if device != "cpu":
        pytest.skip("CPU loop selection only")
    order = ["DEFAULT", "AVX2", "AVX512", "AVX512_BF16"]
    best = activation.cpu_capability()
    assert best in order
    for better in order[order.index(best) + 1 :]:  # nothing better is runnable here
        with pytest.raises(RuntimeError, match="not available"):
            activation.set_cpu_capability(better)


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


@pytest.mark.dtypes(torch.float32, torch.bfloat16)
@pytest.mark.parametrize("layer", sorted(GATED_LAYERS))
def test_gated_layers_match_reference(device, dtype, layer):
    x = _input((3, 5, 2 * 65), dtype, device)
    out = getattr(activation.layers, layer)()(x)
    assert out.device == x.device
    _check(out, _ref(GATED[GATED_LAYERS[layer]], x), dtype)


@pytest.mark.dtypes(torch.float32, torch.bfloat16)
@pytest.mark.parametrize("layer", sorted(UNARY_LAYERS))
def test_unary_layers_match_reference(device, dtype, layer):
    x = _input((3, 5, 65), dtype, device)
    out = getattr(activation.layers, layer)()(x)
    assert out.device == x.device
    _check(out, _ref(UNARY[UNARY_LAYERS[layer]], x), dtype)


def test_fatrelu_layer_reads_threshold_of_the_replaced_layer(device):
    layer = activation.layers.FatreluAndMul()
    x = _input((4, 2 * 33), torch.float32, device)
    _check(layer(x), _ref(_fatrelu(0.0), x), torch.float32)
    layer.threshold = 0.75  # what kernelize leaves on the model's own layer
    _check(layer(x), _ref(_fatrelu(0.75), x), torch.float32)


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
        yield name, (torch.empty(3, 19), x)
    yield "fatrelu_and_mul", (torch.empty(3, 19), x, 0.25)
    for name in sorted(UNARY):
        yield name, (torch.empty(3, 38), x)


@pytest.mark.parametrize(
    ("name", "args"), list(_opcheck_cases()), ids=lambda v: v if isinstance(v, str) else ""
)
def test_opcheck(device, name, args):
    op = getattr(activation._ops.ops, name).default
    args = tuple(a.to(device) if isinstance(a, torch.Tensor) else a for a in args)
    torch.library.opcheck(op, args)


@pytest.mark.parametrize(("layer", "ref"), [("SiluAndMul", GATED["silu_and_mul"]),
                                            ("Silu", UNARY["silu"]),
                                            ("FatreluAndMul", _fatrelu(0.0))])
def test_layer_under_torch_compile(device, layer, ref):
    """Under torch.compile the layers call the traceable OpOverload (eager calls take the
    C++ entry point, which dynamo cannot trace): fullgraph must hold."""
    compiled = torch.compile(getattr(activation.layers, layer)(), fullgraph=True)
    x = _input((4, 2 * 40), torch.float32, device)
    _check(compiled(x), _ref(ref, x), torch.float32)


def test_layer_outputs_reuse_released_memory_only():
    """Large layer outputs come from a pool (no page faults); live outputs are never reused."""
    x = torch.randn(64, 2 * 8192)  # a 2 MB output: pooled
    layer = activation.layers.SiluAndMul()
    expected = F.silu(x[..., :8192]) * x[..., 8192:]
    first = layer(x)
    view = first[1:]
    second = layer(x)
    assert second.data_ptr() != first.data_ptr(), "an output still in use was handed out again"
    pointer = first.data_ptr()
    del first
    third = layer(x)
    assert third.data_ptr() != pointer, "memory still used by a view was handed out again"
    del view
    fourth = layer(x)
    assert fourth.data_ptr() == pointer, "released memory was not reused"
    for out in (second, third, fourth):
        torch.testing.assert_close(out, expected)
    small = layer(torch.randn(2, 16))  # below the pool's threshold: a plain allocation
    assert small.shape == (2, 8)
    unary = activation.layers.Silu()
    big = torch.randn(64, 8192)  # pooled too
    pooled = unary(big)
    torch.testing.assert_close(pooled, F.silu(big))
    pointer = pooled.data_ptr()
    del pooled
    assert unary(big).data_ptr() == pointer, "released memory was not reused"
