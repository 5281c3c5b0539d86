"""Every op against an eager PyTorch reference computed in float64.

The builder's test runner loads the built variant and registers it as
``sys.modules["rotary"]`` before these tests run. ``target`` / ``device`` (see
conftest.py) run each test on CPU (every compiled loop copy) and on CUDA where the
variant has CUDA kernels and the machine a GPU (skipped with the reason otherwise). The reference is Transformers'
formula, ``x * cos + rotate_half(x) * sin``; where the ``transformers`` package is
importable, its own ``apply_rotary_pos_emb`` is compared too.
"""

from __future__ import annotations

import pytest
import rotary
import torch

DTYPES = [torch.float32, torch.float64, torch.bfloat16, torch.float16]
TOLERANCE = {
    torch.float32: {"rtol": 1e-5, "atol": 1e-5},
    torch.float64: {"rtol": 1e-10, "atol": 1e-12},
    torch.bfloat16: {"rtol": 1e-2, "atol": 1e-2},
    torch.float16: {"rtol": 1e-2, "atol": 1e-2},
}
# (batch, q heads, k heads, seq, head_dim): head_dim 64/80/128 (80: a half of 40 is
# not a multiple of the 16-float vector), one position, GQA head counts.
SHAPES = [(2, 4, 2, 37, 64), (1, 3, 1, 1, 80), (1, 8, 8, 19, 128), (3, 2, 2, 5, 6)]


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def _reference(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, conj: bool = False):
    """float64 rotation of the first cos.size(-1) columns (Transformers' formula)."""
    x, cos, sin = (t.detach().cpu().double() for t in (x, cos, sin))
    if cos.dim() == 3:
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
    rot = cos.shape[-1]
    x_rot, x_pass = x[..., :rot], x[..., rot:]
    sign = -1.0 if conj else 1.0
    return torch.cat((x_rot * cos + sign * _rotate_half(x_rot) * sin, x_pass), dim=-1)


def _tables(batch: int, seq: int, rot: int, dtype: torch.dtype, seed: int = 1, device="cpu"):
    """cos/sin as Transformers' rotary modules return them: angles repeated per half."""
    generator = torch.Generator().manual_seed(seed)
    angles = torch.rand(batch, seq, rot // 2, generator=generator, dtype=torch.float64) * 50
    angles = torch.cat((angles, angles), dim=-1)
    return angles.cos().to(dtype).to(device), angles.sin().to(dtype).to(device)


def _input(shape, dtype: torch.dtype, seed: int = 0, device="cpu") -> torch.Tensor:
    # Drawn on the CPU, so every device sees the same numbers.
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=generator, dtype=torch.float64).to(dtype).to(device)


def _check(out: torch.Tensor, expected: torch.Tensor, dtype: torch.dtype) -> None:
    assert out.dtype == dtype
    torch.testing.assert_close(out.detach().cpu().double(), expected.cpu(), **TOLERANCE[dtype])


# ---- correctness -----------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_apply_rotary_in_place(target, shape, dtype):
    b, hq, hk, s, d = shape
    q, k = _input((b, hq, s, d), dtype, 0, target), _input((b, hk, s, d), dtype, 2, target)
    cos, sin = _tables(b, s, d, dtype, device=target)
    expected_q, expected_k = _reference(q, cos, sin), _reference(k, cos, sin)
    returned = rotary.apply_rotary(q, k, cos, sin)
    assert returned[0] is q and returned[1] is k
    _check(q, expected_q, dtype)
    _check(k, expected_k, dtype)


@pytest.mark.parametrize("conj", [False, True])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_out_variant_writes_every_element(target, shape, dtype, conj):
    b, hq, hk, s, d = shape
    q, k = _input((b, hq, s, d), dtype, 0, target), _input((b, hk, s, d), dtype, 2, target)
    cos, sin = _tables(1, s, d, dtype, device=target)  # one table shared by the batch
    q_out = torch.full_like(q, float("nan"))
    k_out = torch.full_like(k, float("nan"))
    rotary.apply_rotary_out(q_out, k_out, q, k, cos, sin, conj)
    _check(q_out, _reference(q, cos, sin, conj), dtype)
    _check(k_out, _reference(k, cos, sin, conj), dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_rotation_and_its_conjugate_are_inverse(target, dtype):
    q, k = _input((2, 3, 9, 64), dtype, 0, target), _input((2, 1, 9, 64), dtype, 2, target)
    cos, sin = _tables(2, 9, 64, dtype, device=target)
    q1, k1 = rotary.rotary(q, k, cos, sin)
    q2, k2 = rotary.rotary(q1, k1, cos, sin, True)
    # bf16/fp16 round twice (after each rotation), hence twice their tolerance.
    tolerance = {key: 2 * value for key, value in TOLERANCE[dtype].items()}
    torch.testing.assert_close(q2, q, **tolerance)
    torch.testing.assert_close(k2, k, **tolerance)


def test_two_dimensional_tables_and_partial_rotary(target):
    q = _input((2, 4, 11, 96), torch.float32, 0, target)
    k = _input((2, 2, 11, 96), torch.float32, 0, target)
    cos, sin = _tables(1, 11, 32, torch.float32, device=target)
    cos, sin = cos[0], sin[0]  # [seq, rot]: only the first 32 of 96 columns rotate
    q_out, k_out = rotary.rotary(q, k, cos, sin)
    _check(q_out, _reference(q, cos, sin), torch.float32)
    _check(k_out, _reference(k, cos, sin), torch.float32)
    torch.testing.assert_close(q_out[..., 32:], q[..., 32:], rtol=0, atol=0)


def test_extreme_values_propagate(target):
    q = torch.tensor([1e30, -1e30, float("inf"), float("nan")], device=target).repeat(1, 1, 1, 4)
    k = q.clone()
    cos, sin = _tables(1, 1, 16, torch.float32, device=target)
    expected = _reference(q, cos, sin).float()
    out, _ = rotary.rotary(q, k, cos, sin)
    torch.testing.assert_close(out.cpu(), expected, equal_nan=True)


def test_half_subnormals_and_overflow_round_like_torch(target):
    # CPU fp16 conversions are done with integer arithmetic: compare with torch's rounding.
    values = torch.tensor([6e-8, 3e-6, 6.1e-5, 65504.0, 5e4, -2.5e-7, 1.0, 0.0], dtype=torch.float64)
    q = values.repeat(16).reshape(1, 1, 8, 16).to(torch.float16).to(target)
    cos = torch.ones(1, 8, 16, dtype=torch.float16, device=target)
    sin = torch.zeros(1, 8, 16, dtype=torch.float16, device=target)
    out, _ = rotary.rotary(q, q.clone(), cos, sin)
    torch.testing.assert_close(out, q, rtol=0, atol=0)
    scaled, _ = rotary.rotary(q, q.clone(), cos * 1.5, sin)
    torch.testing.assert_close(scaled, (q.float() * 1.5).half(), rtol=0, atol=0)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_misaligned_tensors_take_the_element_path(target, dtype):
    # One element of offset breaks 16-byte alignment: the GPU kernel's 128-bit path
    # must give way to its one-element path, with the same results.
    b, h, s, d = 2, 3, 5, 64
    numel = b * h * s * d
    q = _input((numel + 1,), dtype, 0, target)[1:].view(b, h, s, d)
    k = _input((numel + 1,), dtype, 2, target)[1:].view(b, h, s, d)
    cos, sin = _tables(b, s, d, dtype, device=target)
    cos = torch.cat((cos.new_zeros(1), cos.flatten()))[1:].view_as(cos)
    q_out = torch.full((numel + 1,), float("nan"), dtype=dtype, device=target)[1:].view_as(q)
    k_out = torch.full_like(k, float("nan"))
    rotary.apply_rotary_out(q_out, k_out, q, k, cos, sin)
    _check(q_out, _reference(q, cos, sin), dtype)
    _check(k_out, _reference(k, cos, sin), dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_wide_heads_long_sequences_and_partial_rotary(target, dtype):
    # head_dim 256 with 160 rotated columns: rows longer than one block's threads, a
    # pass-through tail wider than the pairs' vectors, many blocks of rows.
    q = _input((2, 6, 300, 256), dtype, 0, target)
    k = _input((2, 1, 300, 256), dtype, 2, target)
    cos, sin = _tables(2, 300, 160, dtype, device=target)
    q_out, k_out = torch.full_like(q, float("nan")), torch.full_like(k, float("nan"))
    rotary.apply_rotary_out(q_out, k_out, q, k, cos, sin, True)
    _check(q_out, _reference(q, cos, sin, conj=True), dtype)
    _check(k_out, _reference(k, cos, sin, conj=True), dtype)
    expected_q = _reference(q, cos, sin)
    rotary.apply_rotary(q, k, cos, sin)
    _check(q, expected_q, dtype)


# ---- layouts ---------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_transposed_views_from_attention_projections(target, dtype):
    # What Transformers passes: projections viewed as [b, s, h, d] then transposed.
    b, s, hq, hk, d = 2, 13, 4, 2, 64
    q = _input((b, s, hq, d), dtype, 0, target).transpose(1, 2)
    k = _input((b, s, hk, d), dtype, 3, target).transpose(1, 2)
    assert not q.is_contiguous()
    cos, sin = _tables(b, s, d, dtype, device=target)
    expected_q, expected_k = _reference(q, cos, sin), _reference(k, cos, sin)
    q_embed, k_embed = rotary.apply_rotary_transformers(q, k, cos, sin)
    assert q_embed.stride() == q.stride()  # the layout eager arithmetic would keep
    _check(q_embed, expected_q, dtype)
    _check(k_embed, expected_k, dtype)
    rotary.apply_rotary(q, k, cos, sin)  # in place, through the strides
    _check(q, expected_q, dtype)
    _check(k, expected_k, dtype)


def test_strided_last_dimension_and_strided_tables(device):
    q = _input((1, 2, 7, 2 * 32), torch.float32, 0, device)[..., ::2]  # head_dim stride 2
    k = _input((1, 2, 7, 32), torch.float32, 0, device)
    cos, sin = _tables(1, 7, 64, torch.float32, device=device)
    cos, sin = cos[..., ::2], sin[..., ::2]  # strided tables are copied inside
    cos, sin = cos.contiguous(), sin.contiguous()
    cos_strided = torch.empty(1, 7, 64, device=device)[..., ::2].copy_(cos)
    q_out, k_out = rotary.rotary(q, k, cos_strided, sin)
    _check(q_out, _reference(q, cos, sin), torch.float32)
    _check(k_out, _reference(k, cos, sin), torch.float32)
    with pytest.raises(RuntimeError, match="unit stride in head_dim"):
        rotary.apply_rotary(q, k, cos, sin)


def test_empty_tensors(device):
    q, k = torch.empty(0, 2, 5, 8, device=device), torch.empty(0, 1, 5, 8, device=device)
    cos, sin = _tables(1, 5, 8, torch.float32, device=device)
    rotary.apply_rotary(q, k, cos, sin)
    q_out, k_out = rotary.rotary(q, k, cos, sin)
    assert q_out.shape == q.shape and k_out.shape == k.shape


# ---- errors ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("q_shape", "cos_shape", "message"),
    [
        ((1, 2, 5, 8), (1, 6, 8), "cos has 6 positions"),
        ((1, 2, 5, 8), (1, 5, 10), "must be even and at most head_dim"),
        ((1, 2, 5, 8), (1, 5, 7), "must be even"),
        ((2, 2, 5, 8), (3, 5, 8), r"cos batch \(3\) must be 1 or q's batch"),
        ((2, 5, 8), (1, 5, 8), r"\[batch, heads, seq, head_dim\]"),
    ],
)
def test_bad_shapes_are_rejected(device, q_shape, cos_shape, message):
    q = torch.zeros(q_shape, device=device)
    cos = torch.zeros(cos_shape, device=device)
    with pytest.raises(RuntimeError, match=message):
        rotary.apply_rotary(q, q.clone(), cos, cos.clone())


def test_bad_dtypes_are_rejected(device):
    q = torch.zeros(1, 1, 2, 4, device=device)
    table64 = torch.zeros(2, 4, dtype=torch.float64, device=device)
    with pytest.raises(RuntimeError, match="must have the dtype of q and k"):
        rotary.apply_rotary(q, q.clone(), table64, torch.zeros(2, 4, device=device))
    qi = torch.zeros(1, 1, 2, 4, dtype=torch.int32, device=device)
    with pytest.raises(RuntimeError, match="float32, float64, bfloat16 or float16"):
        rotary.apply_rotary(qi, qi.clone(), qi[0, 0], qi[0, 0])


def test_tensors_on_another_device_are_rejected(device):
    if device == "cpu":
        pytest.skip("needs a second device type")
    q = torch.zeros(1, 2, 5, 8, device=device)
    cos = torch.zeros(1, 5, 8)
    with pytest.raises(RuntimeError, match="must be CUDA tensors on q's device"):
        rotary.apply_rotary(q, q.clone(), cos, cos.clone())
    with pytest.raises(RuntimeError, match="k must be a CUDA tensor"):
        rotary.apply_rotary(q, q.cpu(), cos.to(device), cos.to(device))


def test_unknown_capability_is_rejected(device):
    if device != "cpu":
        pytest.skip("CPU loop selection only")
    with pytest.raises(RuntimeError, match="not available"):
        rotary.set_cpu_capability("AVX9000")


def test_gpu_build_says_it_has_no_cpu_loops():
    if hasattr(rotary._ops.ops, "cpu_capability"):
        pytest.skip("the variant under test has CPU kernels")
    with pytest.raises(RuntimeError, match="this build has no CPU kernels"):
        rotary.cpu_capability()


# ---- the Transformers drop-in -----------------------------------------------------


@pytest.mark.parametrize("unsqueeze_dim", [1, 2])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_apply_rotary_transformers_matches_the_formula(device, dtype, unsqueeze_dim):
    b, s, hq, hk, d = 2, 9, 4, 2, 64
    if unsqueeze_dim == 1:
        q, k = _input((b, hq, s, d), dtype, 0, device), _input((b, hk, s, d), dtype, 2, device)
    else:  # [b, s, h, d] layout, cos/sin unsqueezed at dim 2
        q, k = _input((b, s, hq, d), dtype, 0, device), _input((b, s, hk, d), dtype, 2, device)
    cos, sin = _tables(b, s, d, dtype, device=device)
    cos_u, sin_u = (t.cpu().double().unsqueeze(unsqueeze_dim) for t in (cos, sin))
    q64, k64 = q.cpu().double(), k.cpu().double()
    expected_q = q64 * cos_u + _rotate_half(q64) * sin_u
    expected_k = k64 * cos_u + _rotate_half(k64) * sin_u
    q_embed, k_embed = rotary.apply_rotary_transformers(
        q, k, cos, sin, position_ids=None, unsqueeze_dim=unsqueeze_dim
    )
    _check(q_embed, expected_q, dtype)
    _check(k_embed, expected_k, dtype)


def test_apply_rotary_transformers_matches_transformers_itself(device):
    modeling_llama = pytest.importorskip("transformers.models.llama.modeling_llama")
    q = _input((2, 8, 33, 128), torch.float32, 0, device)
    k = _input((2, 2, 33, 128), torch.float32, 2, device)
    cos, sin = _tables(2, 33, 128, torch.float32, device=device)
    theirs = modeling_llama.apply_rotary_pos_emb(q, k, cos, sin)
    ours = rotary.apply_rotary_transformers(q, k, cos, sin)
    for a, b in zip(ours, theirs, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


def test_calls_only_the_model_can_say_are_refused(device):
    # kernelize hands a call with a reason back to the model's own function.
    reason = rotary.apply_rotary_transformers.unsupported_reason
    q, k = _input((2, 4, 7, 64), torch.float32, 0, device), _input((2, 2, 7, 64), torch.float32, 2, device)
    cos, sin = _tables(2, 7, 64, torch.float32, device=device)
    assert reason(q, k, cos, sin) is None
    assert reason(q, k, cos, sin, position_ids=None, unsqueeze_dim=1) is None
    # head_dim / 2 angles: halves (gpt-oss) or neighbours (the OpenAI privacy filter)
    assert "32 angles for heads of 64" in reason(q, k, cos[..., :32], sin[..., :32])
    # mixed dtypes: the model decides how it promotes and rounds
    assert "outside the kernel" in reason(q.bfloat16(), k.bfloat16(), cos, sin)


def test_a_prepared_call_is_the_verdict_and_the_call_in_one(device):
    # kernelize's prepare_call: the same reasons, or the call with its layout decided.
    prepare = rotary.apply_rotary_transformers.prepare_call
    q, k = _input((2, 4, 7, 64), torch.float32, 0, device), _input((2, 2, 7, 64), torch.float32, 2, device)
    cos, sin = _tables(2, 7, 64, torch.float32, device=device)
    assert "32 angles for heads of 64" in prepare(q, k, cos[..., :32], sin[..., :32])
    assert "outside the kernel" in prepare(q.bfloat16(), k.bfloat16(), cos, sin)
    for unsqueeze_dim, (qq, kk) in ((1, (q, k)), (2, (q.transpose(1, 2), k.transpose(1, 2)))):
        prepared = prepare(qq, kk, cos, sin, position_ids=None, unsqueeze_dim=unsqueeze_dim)
        assert callable(prepared)
        direct = rotary.apply_rotary_transformers(qq, kk, cos, sin, unsqueeze_dim=unsqueeze_dim)
        for a, b in zip(prepared(), direct, strict=True):
            torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_inputs_outside_the_kernel_run_the_formula(device):
    # Mixed dtypes promote exactly as Transformers' arithmetic does.
    q = _input((1, 2, 5, 8), torch.bfloat16, 0, device)
    k = _input((1, 2, 5, 8), torch.bfloat16, 2, device)
    cos, sin = _tables(1, 5, 8, torch.float32, device=device)
    q_embed, _ = rotary.apply_rotary_transformers(q, k, cos, sin)
    assert q_embed.dtype == torch.float32
    _check(q_embed, _reference(q.float(), cos, sin), torch.float32)


# ---- autograd, op registration, torch.compile ----------------------------------


def test_gradcheck_in_float64(device):
    q = _input((2, 3, 4, 8), torch.float64, 0, device).requires_grad_()
    k = _input((2, 1, 4, 8), torch.float64, 2, device).requires_grad_()
    cos, sin = _tables(2, 4, 8, torch.float64, device=device)
    cos.requires_grad_()
    sin.requires_grad_()
    assert torch.autograd.gradcheck(rotary.rotary, (q, k, cos, sin), eps=1e-6, atol=1e-8)
    shared_cos, shared_sin = (t.detach()[:1].clone().requires_grad_() for t in (cos, sin))
    assert torch.autograd.gradcheck(
        rotary.apply_rotary_transformers, (q, k, shared_cos, shared_sin), eps=1e-6, atol=1e-8
    )
    partial = (t.detach()[0, :, :4].clone().requires_grad_() for t in (cos, sin))
    assert torch.autograd.gradcheck(
        lambda q, k, c, s: rotary.rotary(q, k, c, s, True), (q, k, *partial), eps=1e-6, atol=1e-8
    )


def test_backward_matches_eager_autograd(device):
    q = _input((1, 4, 16, 64), torch.float32, 0, device).requires_grad_()
    k = _input((1, 2, 16, 64), torch.float32, 2, device).requires_grad_()
    cos, sin = _tables(1, 16, 64, torch.float32, device=device)
    q_embed, k_embed = rotary.apply_rotary_transformers(q, k, cos, sin)
    (q_embed.square().sum() + k_embed.sum()).backward()
    q_ref, k_ref = q.detach().clone().requires_grad_(), k.detach().clone().requires_grad_()
    eq = q_ref * cos.unsqueeze(1) + _rotate_half(q_ref) * sin.unsqueeze(1)
    ek = k_ref * cos.unsqueeze(1) + _rotate_half(k_ref) * sin.unsqueeze(1)
    (eq.square().sum() + ek.sum()).backward()
    torch.testing.assert_close(q.grad, q_ref.grad, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(k.grad, k_ref.grad, rtol=1e-5, atol=1e-5)


def _opcheck_cases():
    q, k = _input((2, 4, 6, 16), torch.float32), _input((2, 2, 6, 16), torch.float32, 2)
    cos, sin = _tables(1, 6, 16, torch.float32)
    q_t = _input((2, 6, 4, 16), torch.float32).transpose(1, 2)
    yield "apply_rotary", (q.clone(), k.clone(), cos, sin)
    yield "apply_rotary_out", (torch.empty_like(q), torch.empty_like(k), q, k, cos, sin, True)
    yield "rotary", (q, k, cos, sin, False)
    yield "rotary", (q_t, k, cos[0], sin[0], True)


@pytest.mark.parametrize(
    ("name", "args"), list(_opcheck_cases()), ids=lambda v: v if isinstance(v, str) else ""
)
def test_opcheck(device, name, args):
    op = getattr(rotary._ops.ops, name).default
    args = tuple(a.to(device) if isinstance(a, torch.Tensor) else a for a in args)
    torch.library.opcheck(op, args)


def test_opcheck_with_gradients(device):
    q = _input((1, 2, 5, 8), torch.float64, 0, device).requires_grad_()
    k = _input((1, 1, 5, 8), torch.float64, 2, device).requires_grad_()
    cos, sin = _tables(1, 5, 8, torch.float64, device=device)
    torch.library.opcheck(rotary._ops.ops.rotary.default, (q, k, cos, sin, False))


def test_torch_compile_fullgraph_forward_and_backward(device):
    compiled = torch.compile(rotary.apply_rotary_transformers, fullgraph=True)
    q = _input((1, 4, 10, 32), torch.float32, 0, device).requires_grad_()
    k = _input((1, 2, 10, 32), torch.float32, 2, device)
    cos, sin = _tables(1, 10, 32, torch.float32, device=device)
    q_embed, k_embed = compiled(q, k, cos, sin)
    _check(q_embed, _reference(q.detach(), cos, sin), torch.float32)
    _check(k_embed, _reference(k, cos, sin), torch.float32)
    q_embed.sum().backward()
    expected = _reference(torch.ones_like(q), cos, sin, conj=True)
    _check(q.grad, expected, torch.float32)


def test_in_place_op_under_torch_compile(device):
    @torch.compile(fullgraph=True)
    def rotate_in_place(q, k, cos, sin):
        rotary.apply_rotary(q, k, cos, sin)
        return q * 2

    q = _input((1, 2, 6, 16), torch.float32, 0, device)
    k = _input((1, 2, 6, 16), torch.float32, 2, device)
    cos, sin = _tables(1, 6, 16, torch.float32, device=device)
    expected_q, expected_k = _reference(q, cos, sin), _reference(k, cos, sin)
    doubled = rotate_in_place(q, k, cos, sin)
    _check(q, expected_q, torch.float32)
    _check(k, expected_k, torch.float32)
    _check(doubled, 2 * expected_q, torch.float32)


def test_transformers_entry_reuses_released_memory_only():
    """Large outputs come from a pool (no page faults); live outputs are never reused."""
    q, k = torch.randn(1, 8, 256, 128), torch.randn(1, 8, 256, 128)
    angles = torch.randn(1, 256, 64)
    cos, sin = torch.cat([angles.cos()] * 2, -1), torch.cat([angles.sin()] * 2, -1)
    q1, k1 = rotary.apply_rotary_transformers(q, k, cos, sin)
    q2, _ = rotary.apply_rotary_transformers(q, k, cos, sin)
    assert q2.data_ptr() not in (q1.data_ptr(), k1.data_ptr())
    pointer = q1.data_ptr()
    del q1, k1
    q3, k3 = rotary.apply_rotary_transformers(q, k, cos, sin)
    assert pointer in (q3.data_ptr(), k3.data_ptr()), "released memory was not reused"
    torch.testing.assert_close(q3, q2)
