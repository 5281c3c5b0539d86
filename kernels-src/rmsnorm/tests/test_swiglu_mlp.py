"""The ops of the decoder-layer fusions, ``swiglu_mlp`` and ``add_rms_norm``, against
PyTorch computing what the model computes (the layers that use them: test_layers.py).

References round where the model's PyTorch ops round (each matmul's output, the residual
sums), so only float summation order separates them from the kernels.
"""

from __future__ import annotations

import functools

import pytest
import rmsnorm
import torch
import torch.nn.functional as F
from rmsnorm._functional import GEMV_MAX_ROWS
from rmsnorm._ops import ops

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


@pytest.mark.parametrize("rows,hidden,inter",
                         [(3, 96, 200), (1, 130, 97), (5, 300, 262), (2, 1000, 7), (4, 33, 1029),
                          (1, 31, 5), (8, 64, 9)])
def test_swiglu_mlp_copies_agree_bitwise(cpu_kernels, rows, hidden, inter):
    """Every loop copy gives the same bits (fixed summation order, no FMA), except bf16 on
    the AVX512_BF16 copy, whose VDPBF16PS adds each pair's products in hardware. The shapes
    leave every remainder: rows of x past a pass of four, weight rows past a pass of four
    (1-3 left), row lengths with a tail under a 32-value block, and rows shorter than one."""
    copies = []
    for capability in ("DEFAULT", "AVX2", "AVX512", "AVX512_BF16"):
        try:
            previous = rmsnorm.set_cpu_capability(capability)
        except RuntimeError:
            continue
        rmsnorm.set_cpu_capability(previous)
        copies.append(capability)
    for dtype in (torch.float32, torch.bfloat16):
        weights = _weights(hidden, inter, dtype, seed=3)
        x, residual = _rand((rows, hidden), dtype, 4), _rand((rows, hidden), dtype, 5)
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


MODEL_SIZES = ((256, 704), (512, 1408), (1024, 2816), (2048, 5632), (4096, 11008))
"""hidden x intermediate of the op's benchmark (benchmarks/mlp_timing.py)."""


@functools.lru_cache(maxsize=2)
def _model_weights(hidden: int, inter: int, dtype: torch.dtype):
    """Like _weights, drawn in float32 (the largest set is 540 MB; float64 would double it)."""
    generator = torch.Generator().manual_seed(hidden)
    return tuple((torch.randn(shape, generator=generator) * fan_in ** -0.5).to(dtype)
                 for shape, fan_in in (((inter, hidden), hidden), ((inter, hidden), hidden),
                                       ((hidden, inter), inter)))


def _reference_by_blocks(x, w_gate, w_up, w_down, residual) -> torch.Tensor:
    """_reference_mlp, each weight widened to float64 a block of rows at a time."""
    dtype, xd = x.dtype, x.double()

    def product(a: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return torch.cat([a @ block.double().T for block in w.split(1024)], dim=-1).to(dtype)

    act = (F.silu(product(xd, w_gate).double()) * product(xd, w_up).double()).to(dtype)
    down = product(act.double(), w_down).double()
    return (residual.double() + down).to(dtype)


@pytest.mark.parametrize("size", MODEL_SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_swiglu_mlp_model_sizes(target, dtype, size):
    """The op at the benchmark's model sizes, on every loop copy, for 1 and 3 rows of x
    (one and several rows per pass over the weights)."""
    if target != "cpu":
        pytest.skip("swiglu_mlp's op is CPU-only")
    hidden, inter = size
    weights = _model_weights(hidden, inter, dtype)
    for rows in (1, 3):
        x = _rand((rows, hidden), dtype, 20 + rows)
        residual = _rand((rows, hidden), dtype, 30 + rows)
        expected = _reference_by_blocks(x, *weights, residual)
        _close(ops.swiglu_mlp(x, *weights, residual), expected, dtype)


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
