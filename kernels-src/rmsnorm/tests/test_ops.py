"""Every op against an eager PyTorch reference computed in float64.

The builder's test runner loads the built variant and registers it as
``sys.modules["rmsnorm"]`` before these tests run.
"""

from __future__ import annotations

import pytest
import rmsnorm
import torch
import torch.nn.functional as F
from rmsnorm._ops import ops

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
EPS = 1e-6


def _rand(shape, dtype, seed: int, device: str = "cpu") -> torch.Tensor:
    """Random values drawn on the CPU (the same on every device), moved to `device`."""
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=generator, dtype=torch.float64).to(device, dtype)


def _ref_rms_norm(x, weight, eps=EPS, unit_offset=False) -> torch.Tensor:
    h = x.double()
    w = weight.double() + (1.0 if unit_offset else 0.0)
    return w * h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)


def _poisoned(like: torch.Tensor) -> torch.Tensor:
    return torch.full_like(like, float("nan"))


def _close(actual: torch.Tensor, expected: torch.Tensor, dtype: torch.dtype) -> None:
    assert actual.dtype == dtype
    assert not torch.isnan(actual).any(), "an output element was not written"
    torch.testing.assert_close(actual.double(), expected.double(), **TOLERANCE[dtype])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_rms_norm(target, shape, dtype):
    x, w = _rand(shape, dtype, 0, target), _rand(shape[-1:], dtype, 1, target)
    expected = _ref_rms_norm(x, w)
    _close(rmsnorm.rms_norm(x, w, EPS), expected, dtype)
    out = _poisoned(x)
    assert rmsnorm.rms_norm(x, w, EPS, out=out) is out
    _close(out, expected, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_gemma_rms_norm(target, shape, dtype):
    x, w = _rand(shape, dtype, 2, target), _rand(shape[-1:], dtype, 3, target)
    expected = _ref_rms_norm(x, w, unit_offset=True)
    _close(rmsnorm.gemma_rms_norm(x, w, EPS), expected, dtype)
    out = _poisoned(x)
    _close(rmsnorm.gemma_rms_norm(x, w, EPS, out=out), expected, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_fused_add_rms_norm(target, shape, dtype):
    x, residual, w = (
        _rand(shape, dtype, 4, target),
        _rand(shape, dtype, 5, target),
        _rand(shape[-1:], dtype, 6, target),
    )
    summed = x + residual  # rounded to dtype, as the model's own add would be
    expected = _ref_rms_norm(summed, w)
    res = residual.clone()
    _close(rmsnorm.fused_add_rms_norm(x, res, w, EPS), expected, dtype)
    assert torch.equal(res, summed)
    res, out = residual.clone(), _poisoned(x)
    assert rmsnorm.fused_add_rms_norm(x, res, w, EPS, out=out) is out
    _close(out, expected, dtype)
    assert torch.equal(res, summed)


@pytest.mark.parametrize("dtype", DTYPES)
def test_silu_mul(target, dtype):
    gate, up = _rand((3, 1000), dtype, 7, target) * 4, _rand((3, 1000), dtype, 8, target)
    expected = F.silu(gate.double()) * up.double()
    _close(rmsnorm.silu_mul(gate, up), expected, dtype)
    out = _poisoned(gate)
    _close(rmsnorm.silu_mul(gate, up, out=out), expected, dtype)


def test_silu_mul_extremes(device):
    gate = torch.tensor(
        [-1000.0, -90.0, -20.0, 0.0, 20.0, 90.0, 1000.0, float("inf")], device=device
    )
    up = torch.ones_like(gate)
    expected = F.silu(gate.double()) * up.double()
    torch.testing.assert_close(rmsnorm.silu_mul(gate, up).double(), expected, rtol=1e-5, atol=1e-6)


def test_llama_rounding_is_exact_in_bf16(device):
    """y = weight * round_bf16(x * rstd), as LlamaRMSNorm rounds; the float32 sum
    order may move rstd by an ulp, so only a small share may differ by one bf16 ulp."""
    x, w = _rand((64, 4096), torch.bfloat16, 9, device), _rand((4096,), torch.bfloat16, 10, device)
    h = x.float()
    llama = w * (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + EPS)).to(torch.bfloat16)
    ours = rmsnorm.rms_norm(x, w, EPS)
    assert (ours != llama).float().mean().item() < 0.01


def _bf16_edge_rows(hidden: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """bf16 rows that take the bf16 loops' exits, among ordinary rows: a subnormal x
    (x * rstd is subnormal: VCVTNEPS2BF16 would flush it), a NaN, an inf, a zero row,
    a row of tiny values next to a huge one; an ordinary weight, and one with a tiny
    value (weight * normed is subnormal), zeros and a huge value."""
    x = _rand((8, hidden), torch.float32, 31)
    x[2, 5] = 1e-39
    x[3, 7] = float("nan")
    x[4, 9] = float("inf")
    x[5] = 0.0
    x[6] *= 1e-30
    x[6, 3] = 1e18
    w = _rand((hidden,), torch.float32, 32)
    edge_w = w.clone()
    edge_w[0], edge_w[1], edge_w[2] = 1e-38, 0.0, -0.0
    edge_w[hidden - 1] = 3e38
    return x.to(torch.bfloat16), w.to(torch.bfloat16), edge_w.to(torch.bfloat16)


def _each_capability(fn) -> list:
    original = rmsnorm.cpu_capability()
    results = []
    for capability in ("DEFAULT", "AVX2", "AVX512", "AVX512_BF16"):
        try:
            rmsnorm.set_cpu_capability(capability)
        except RuntimeError:
            continue
        results.append(fn())
    rmsnorm.set_cpu_capability(original)
    return results


def _same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bitwise equality, NaNs included (torch.equal says NaN != NaN)."""
    if a.dtype == torch.bfloat16:
        return torch.equal(a.view(torch.int16), b.view(torch.int16))
    return torch.equal(a.view(torch.int32), b.view(torch.int32))


def test_capabilities_agree_bitwise(cpu_kernels):
    """Every loop copy sums in the same order without FMA, so results are identical."""
    x, w = _rand((8, 1000), torch.float32, 11), _rand((1000,), torch.float32, 12)
    results = _each_capability(lambda: rmsnorm.rms_norm(x, w, EPS))
    assert all(torch.equal(results[0], r) for r in results[1:])


@pytest.mark.parametrize("hidden", [4096, 1000, 37])
def test_capabilities_agree_bitwise_bf16(cpu_kernels, hidden):
    """The bf16 loops (intrinsics in the AVX-512 copies, VCVTNEPS2BF16 in AVX512_BF16)
    round every value as the plain loop does: subnormal products, NaN and inf included,
    at widths with and without a partial last vector."""
    x, w, edge_w = _bf16_edge_rows(hidden)
    residual = _rand((8, hidden), torch.bfloat16, 33)

    def run() -> list[torch.Tensor]:
        results = []
        for weight in (w, edge_w):
            fused_residual = residual.clone()
            fused = rmsnorm.fused_add_rms_norm(x, fused_residual, weight, EPS)
            results += [rmsnorm.rms_norm(x, weight, EPS), rmsnorm.gemma_rms_norm(x, weight, EPS),
                        fused, fused_residual]
        return results

    results = _each_capability(run)
    assert len(results) >= 1
    for other in results[1:]:
        assert all(_same_bits(a, b) for a, b in zip(results[0], other, strict=True))


def test_non_contiguous_inputs_and_outputs(device):
    base = _rand((6, 2 * 130), torch.float32, 13, device)
    x = base[:, ::2]  # strided rows
    w = _rand((260,), torch.float32, 14, device)[::2]
    expected = _ref_rms_norm(x, w)
    _close(rmsnorm.rms_norm(x, w, EPS), expected, torch.float32)
    out = _poisoned(base)[:, 1::2]
    rmsnorm.rms_norm(x, w, EPS, out=out)
    _close(out, expected, torch.float32)
    residual_base = _rand((130, 6), torch.float32, 15, device)
    residual = residual_base.t()  # a transposed residual is updated in place
    summed = x + residual
    _close(rmsnorm.fused_add_rms_norm(x, residual, w, EPS), _ref_rms_norm(summed, w), torch.float32)
    assert torch.equal(residual_base.t(), summed)


def test_empty_input(device):
    x = torch.empty(0, 64, device=device)
    assert rmsnorm.rms_norm(x, torch.ones(64, device=device), EPS).shape == (0, 64)


def test_errors_say_what_was_wrong(device):
    x = torch.randn(4, 8, device=device)
    with pytest.raises(RuntimeError, match="weight must have shape \\[8\\]"):
        rmsnorm.rms_norm(x, torch.ones(7, device=device), EPS)
    with pytest.raises(RuntimeError, match="weight dtype"):
        rmsnorm.rms_norm(x, torch.ones(8, dtype=torch.float64, device=device), EPS)
    with pytest.raises(RuntimeError, match="dtype must be float32"):
        rmsnorm.rms_norm(x.int(), torch.ones(8, device=device).int(), EPS)
    with pytest.raises(RuntimeError, match="out must have shape"):
        rmsnorm.rms_norm(x, torch.ones(8, device=device), EPS, out=torch.empty(4, 9, device=device))
    with pytest.raises(RuntimeError, match="residual must have shape"):
        rmsnorm.fused_add_rms_norm(
            x, torch.randn(4, 9, device=device), torch.ones(8, device=device), EPS
        )
    with pytest.raises(RuntimeError, match="not available"):
        rmsnorm.set_cpu_capability("AVX1024")
    with pytest.raises(RuntimeError, match="does not support autograd"):
        rmsnorm.rms_norm(
            x.requires_grad_(),
            torch.ones(8, device=device),
            EPS,
            out=torch.empty(4, 8, device=device),
        )


# ---- backward ---------------------------------------------------------------------


@pytest.mark.parametrize("unit_offset", [False, True])
@pytest.mark.parametrize("shape", [(1, 7), (5, 33), (2, 3, 64)])
def test_rms_norm_gradcheck(shape, unit_offset, device):
    x = _rand(shape, torch.float64, 16, device).requires_grad_()
    w = _rand(shape[-1:], torch.float64, 17, device).requires_grad_()
    fn = rmsnorm.gemma_rms_norm if unit_offset else rmsnorm.rms_norm
    assert torch.autograd.gradcheck(lambda a, b: fn(a, b, EPS), (x, w))


def test_add_rms_norm_gradcheck(device):
    x = _rand((5, 33), torch.float64, 18, device).requires_grad_()
    r = _rand((5, 33), torch.float64, 19, device).requires_grad_()
    w = _rand((33,), torch.float64, 20, device).requires_grad_()

    def fn(a, b, c):
        residual = b * 1.0  # a non-leaf, updated in place as in a decoder layer
        normed = rmsnorm.fused_add_rms_norm(a, residual, c, EPS)
        return normed, residual

    assert torch.autograd.gradcheck(fn, (x, r, w))


def test_silu_mul_gradcheck(device):
    gate = _rand((4, 19), torch.float64, 21, device).requires_grad_()
    up = _rand((4, 19), torch.float64, 22, device).requires_grad_()
    assert torch.autograd.gradcheck(rmsnorm.silu_mul, (gate, up))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_backward_matches_eager(dtype, device):
    """Gradients in float32/bf16 agree with eager autograd of the float64 reference."""
    x, w = _rand((8, 1000), dtype, 23, device), _rand((1000,), dtype, 24, device)
    grad = _rand((8, 1000), dtype, 25, device)
    xk, wk = x.clone().requires_grad_(), w.clone().requires_grad_()
    rmsnorm.rms_norm(xk, wk, EPS).backward(grad)
    xr, wr = x.double().requires_grad_(), w.double().requires_grad_()
    _ref_rms_norm(xr, wr).backward(grad.double())
    tol = {"rtol": 1e-4, "atol": 1e-4} if dtype == torch.float32 else {"rtol": 2e-2, "atol": 5e-2}
    torch.testing.assert_close(xk.grad.double(), xr.grad, **tol)
    torch.testing.assert_close(wk.grad.double(), wr.grad, **tol)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_backward_many_rows_is_deterministic(dtype, device):
    """More rows than the GPU backward has blocks, so grad_weight goes through several
    partial rows; it matches the reference and is bitwise the same on a second run."""
    shape = (1500, 264)
    x, w, grad = (
        _rand(shape, dtype, 26, device),
        _rand((264,), dtype, 27, device),
        _rand(shape, dtype, 28, device),
    )
    first = ops.rms_norm_backward(grad, x, w, EPS, False)
    second = ops.rms_norm_backward(grad, x, w, EPS, False)
    assert all(torch.equal(a, b) for a, b in zip(first, second, strict=True))
    xr, wr = x.double().requires_grad_(), w.double().requires_grad_()
    _ref_rms_norm(xr, wr).backward(grad.double())
    tol = {"rtol": 1e-4, "atol": 1e-3} if dtype == torch.float32 else {"rtol": 2e-2, "atol": 0.5}
    torch.testing.assert_close(first[0].double(), xr.grad, **tol)
    torch.testing.assert_close(first[1].double(), wr.grad, **tol)


# ---- torch.library registration checks ----------------------------------------------


def _opcheck_cases(device: str):
    x, w = torch.randn(3, 40, device=device), torch.randn(40, device=device)
    gx, gw = (
        torch.randn(3, 40, dtype=torch.float64, device=device),
        torch.randn(40, dtype=torch.float64, device=device),
    )
    return [
        (ops.rms_norm, (x.clone().requires_grad_(), w.clone().requires_grad_(), EPS)),
        (ops.rms_norm, (x, w, EPS, True)),
        (ops.rms_norm_out, (torch.empty(3, 40, device=device), x, w, EPS)),
        (ops.rms_norm_backward, (torch.randn(3, 40, device=device), x, w, EPS)),
        (ops.fused_add_rms_norm, (x, torch.randn(3, 40, device=device), w, EPS)),
        (
            ops.fused_add_rms_norm_out,
            (torch.empty(3, 40, device=device), x, torch.randn(3, 40, device=device), w, EPS),
        ),
        (ops.add_rms_norm, (gx.requires_grad_(), torch.randn_like(gx), gw.requires_grad_(), EPS)),
        (ops.silu_mul, (x.clone().requires_grad_(), torch.randn(3, 40, device=device))),
        (
            ops.silu_mul_out,
            (torch.empty(3, 40, device=device), x, torch.randn(3, 40, device=device)),
        ),
    ]


@pytest.mark.parametrize("case", range(len(_opcheck_cases("cpu"))))
def test_opcheck(case, device):
    op, args = _opcheck_cases(device)[case]
    torch.library.opcheck(op, args)
