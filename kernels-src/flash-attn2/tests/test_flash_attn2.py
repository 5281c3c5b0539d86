"""Every entry point against an explicit-softmax reference computed in float64.

The builder's test runner loads the built variant and registers it as
``sys.modules["flash_attn2"]`` before these tests run.
"""

from __future__ import annotations

import math

import flash_attn2
import pytest
import torch

# ---- reference (float64, explicit softmax) ---------------------------------------


def reference(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None = None,
    *,
    causal: bool = False,
    scale: float | None = None,
    window: tuple[int, int] = (-1, -1),
    softcap: float = 0.0,
) -> torch.Tensor:
    """softmax(QK^T * scale + mask) V on [B, H, S, D]; rows with no visible key are 0."""
    q, k, v = q.double(), k.double(), v.double()
    group = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    scores = q @ k.transpose(-1, -2) * scale
    if softcap > 0:
        scores = softcap * torch.tanh(scores / softcap)
    seq_q, seq_k = scores.shape[-2:]
    rows = torch.arange(seq_q)[:, None] + (seq_k - seq_q)  # bottom-right aligned
    cols = torch.arange(seq_k)[None, :]
    keep = torch.ones(seq_q, seq_k, dtype=torch.bool)
    right = 0 if causal else window[1]
    if right >= 0:
        keep &= cols <= rows + right
    if window[0] >= 0:
        keep &= cols >= rows - window[0]
    scores = scores.masked_fill(~keep, float("-inf"))
    if mask is not None:
        scores = scores + (
            torch.zeros(mask.shape, dtype=torch.float64).masked_fill(~mask, float("-inf"))
            if mask.dtype == torch.bool
            else mask.double()
        )
    return torch.softmax(scores, dim=-1).nan_to_num(0.0) @ v


TOLERANCE = {
    torch.float32: {"rtol": 1e-5, "atol": 1e-5},
    torch.bfloat16: {"rtol": 1e-2, "atol": 1e-2},
    torch.float16: {"rtol": 1e-2, "atol": 1e-2},
}


def _capabilities() -> list[str]:
    original = flash_attn2.cpu_capability()
    available = []
    for capability in ("DEFAULT", "AVX2", "AVX512", "AVX512_BF16", "BRGEMM_BF16"):
        try:
            flash_attn2.set_cpu_capability(capability)
        except RuntimeError:
            continue
        available.append(capability)
    flash_attn2.set_cpu_capability(original)
    return available


CAPABILITIES = _capabilities()


@pytest.fixture(params=CAPABILITIES)
def capability(request):
    """The loop copy under test, with the per-shape choice of torch's sdpa switched off:
    every call runs these loops."""
    previous = flash_attn2.set_cpu_capability(request.param)
    previous_dispatch = flash_attn2.set_attention_dispatch("kernel")
    yield request.param
    flash_attn2.set_attention_dispatch(previous_dispatch)
    flash_attn2.set_cpu_capability(previous)


def qkv(batch, heads_q, heads_kv, seq_q, seq_k, dim, dtype, seed=0, dim_v=None, device="cpu"):
    g = torch.Generator().manual_seed(seed)

    def make(*shape):
        return torch.randn(*shape, generator=g, dtype=torch.float64).to(dtype).to(device)

    return (
        make(batch, heads_q, seq_q, dim),
        make(batch, heads_kv, seq_k, dim),
        make(batch, heads_kv, seq_k, dim_v or dim),
    )


def check(out: torch.Tensor, expected: torch.Tensor, dtype: torch.dtype) -> None:
    assert out.dtype == dtype
    assert not out.isnan().any(), "an output element was never written"
    torch.testing.assert_close(out.double().cpu(), expected, **TOLERANCE[dtype])


def poisoned(shape, dtype, device="cpu") -> torch.Tensor:
    return torch.full(shape, float("nan"), dtype=dtype, device=device)


# (batch, heads_q, heads_kv, seq_q, seq_k, head_dim)
SHAPES = [
    (1, 1, 1, 1, 1, 64),  # seq 1
    (2, 4, 4, 77, 77, 64),  # not a multiple of any block or vector width
    (1, 4, 2, 130, 130, 80),  # GQA, head_dim 80, two query blocks
    (2, 8, 2, 1, 300, 128),  # decode step against a KV cache, GQA 4
    (1, 2, 2, 37, 290, 128),  # chunked prefill: seq_q < seq_k
    (1, 2, 1, 300, 100, 64),  # seq_q > seq_k: early causal rows see nothing
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_matches_reference(capability, shape, causal, dtype):
    q, k, v = qkv(*shape, dtype)
    out = poisoned(q.shape, dtype)
    flash_attn2.attention(q, k, v, causal=causal, out=out)
    check(out, reference(q, k, v, causal=causal), dtype)


def test_float16():
    q, k, v = qkv(1, 2, 2, 50, 70, 64, torch.float16)
    check(
        flash_attn2.attention(q, k, v, causal=True), reference(q, k, v, causal=True), torch.float16
    )


def test_long_sequence_many_key_blocks(capability):
    q, k, v = qkv(1, 2, 1, 600, 1100, 64, torch.float32, seed=3)
    check(
        flash_attn2.attention(q, k, v, causal=True), reference(q, k, v, causal=True), torch.float32
    )


def test_different_value_head_dim():
    q, k, v = qkv(1, 2, 2, 20, 40, 64, torch.float32, dim_v=48)
    out = flash_attn2.attention(q, k, v)
    assert out.shape == (1, 2, 20, 48)
    check(out, reference(q, k, v), torch.float32)


def test_padding_mask_bool_and_additive(capability):
    q, k, v = qkv(2, 4, 2, 40, 40, 64, torch.float32, seed=1)
    lengths = torch.tensor([40, 23])
    keep = torch.arange(40)[None, :] < lengths[:, None]  # left-aligned padding
    bool_mask = keep[:, None, None, :] & torch.ones(40, 40, dtype=torch.bool).tril()
    check(flash_attn2.attention(q, k, v, bool_mask), reference(q, k, v, bool_mask), torch.float32)
    additive = torch.zeros(bool_mask.shape).masked_fill(~bool_mask, torch.finfo(torch.float32).min)
    check(flash_attn2.attention(q, k, v, additive), reference(q, k, v, additive), torch.float32)


def test_fully_masked_rows_are_zero():
    q, k, v = qkv(1, 2, 2, 8, 8, 64, torch.float32)
    mask = torch.ones(1, 1, 8, 8, dtype=torch.bool)
    mask[..., 3, :] = False
    out = flash_attn2.attention(q, k, v, mask)
    assert (out[:, :, 3] == 0).all()
    check(out, reference(q, k, v, mask), torch.float32)


@pytest.mark.parametrize("mask_shape", [(40,), (1, 40), (2, 1, 1, 40), (2, 4, 40, 40)], ids=str)
def test_mask_broadcasting(mask_shape):
    q, k, v = qkv(2, 4, 4, 40, 40, 64, torch.float32)
    mask = torch.randn(mask_shape, generator=torch.Generator().manual_seed(5))
    check(flash_attn2.attention(q, k, v, mask), reference(q, k, v, mask), torch.float32)


def test_bf16_additive_mask_with_bf16_inputs():
    q, k, v = qkv(1, 2, 2, 33, 33, 64, torch.bfloat16)
    mask = torch.zeros(1, 1, 33, 33, dtype=torch.bfloat16)
    mask[..., :5] = torch.finfo(torch.bfloat16).min
    check(flash_attn2.attention(q, k, v, mask), reference(q, k, v, mask), torch.bfloat16)


@pytest.mark.parametrize("window", [(16, 0), (10, 5), (-1, 3)], ids=str)
def test_sliding_window(capability, window):
    q, k, v = qkv(1, 2, 2, 90, 120, 64, torch.float32)
    out = flash_attn2.attention(q, k, v, window_size=window)
    check(out, reference(q, k, v, window=window), torch.float32)


# bf16 prefill on every loop: AVX512_BF16 / BRGEMM_BF16 multiply in bf16 with packed
# k and v, key blocks aligned to the packed blocks (windows start mid-block).
BF16_PREFILL = {
    "many key blocks, GQA, Sq < Sk": ((1, 4, 2, 600, 1100, 128), {"causal": True}),
    "sliding window": ((1, 2, 2, 700, 700, 64), {"window_size": (300, 0)}),
    "odd lengths, dim 80, dim_v 48, softcap": ((2, 2, 1, 257, 513, 80), {"softcap": 5.0}),
    "padding mask": ((2, 2, 2, 129, 129, 128), {"mask": True}),
}


@pytest.mark.parametrize("case", list(BF16_PREFILL), ids=str)
def test_bf16_prefill(capability, case):
    shape, kwargs = BF16_PREFILL[case]
    dim_v = 48 if shape[-1] == 80 else None
    q, k, v = qkv(*shape, torch.bfloat16, seed=11, dim_v=dim_v)
    mask = None
    if kwargs.pop("mask", False):
        keep = torch.arange(shape[4])[None, :] < torch.tensor([shape[4], 70])[:, None]
        mask = keep[:, None, None, :]
    # [batch, seq, heads, dim] transposed: strided rows, as flash_attn_func passes them
    q, k, v = (t.transpose(1, 2).contiguous().transpose(1, 2) for t in (q, k, v))
    out = flash_attn2.attention(q, k, v, mask, **kwargs)
    expected = reference(q, k, v, mask, causal=kwargs.get("causal", False),
                         window=kwargs.get("window_size", (-1, -1)),
                         softcap=kwargs.get("softcap", 0.0))
    check(out, expected, torch.bfloat16)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("seq_q", [1, 3])
def test_decode_path_window_mask_softcap(capability, seq_q, dtype):
    """Short queries (decode) read k/v in their own dtype; every option still applies."""
    q, k, v = qkv(2, 6, 2, seq_q, 530, 72, dtype, seed=7, dim_v=40)
    mask = torch.randn(2, 1, seq_q, 530, generator=torch.Generator().manual_seed(2)).to(dtype)
    mask[1, ..., 100:200] = float("-inf")
    for kwargs in ({"causal": True}, {"window_size": (300, 0)}, {"softcap": 4.0, "scale": 0.2}):
        out = flash_attn2.attention(q, k, v, mask, **kwargs)
        expected = reference(q, k, v, mask, causal=kwargs.get("causal", False),
                             window=kwargs.get("window_size", (-1, -1)), softcap=kwargs.get("softcap", 0.0),
                             scale=kwargs.get("scale"))
        check(out, expected, dtype)


def test_softcap_and_scale():
    q, k, v = qkv(1, 2, 2, 30, 30, 64, torch.float32)
    out = flash_attn2.attention(q, k, v, causal=True, scale=0.3, softcap=5.0)
    check(out, reference(q, k, v, causal=True, scale=0.3, softcap=5.0), torch.float32)


def test_non_contiguous_inputs_and_output():
    base = torch.randn(2, 50, 4, 2 * 64, dtype=torch.float32)
    q = base[..., ::2].transpose(1, 2)  # strided last dimension, [B, H, S, D]
    k = torch.randn(2, 50, 4, 64).transpose(1, 2)
    v = torch.randn(2, 50, 4, 64).transpose(1, 2)
    out = poisoned((2, 64, 4, 50), torch.float32).permute(0, 2, 3, 1)  # strided last dim
    flash_attn2.attention(q, k, v, causal=True, out=out)
    check(out, reference(q, k, v, causal=True), torch.float32)


def test_empty_inputs():
    q, k, v = qkv(1, 2, 2, 0, 5, 64, torch.float32)
    assert flash_attn2.attention(q, k, v).shape == (1, 2, 0, 64)
    q, k, v = qkv(1, 2, 2, 3, 0, 64, torch.float32)
    assert (flash_attn2.attention(q, k, v) == 0).all()


# ---- errors -------------------------------------------------------------------------


def test_errors_say_what_was_wrong():
    q, k, v = qkv(1, 3, 2, 4, 4, 64, torch.float32)
    with pytest.raises(RuntimeError, match="multiple of the key/value heads"):
        flash_attn2.attention(q, k, v)
    q, k, v = qkv(1, 2, 2, 4, 4, 64, torch.float32)
    with pytest.raises(RuntimeError, match="must share a dtype"):
        flash_attn2.attention(q, k.double(), v)
    with pytest.raises(RuntimeError, match="float32, bfloat16 or float16"):
        flash_attn2.attention(q.double(), k.double(), v.double())
    with pytest.raises(RuntimeError, match="does not broadcast"):
        flash_attn2.attention(q, k, v, torch.zeros(3, 4))
    with pytest.raises(RuntimeError, match="4-D"):
        flash_attn2.attention(q[0], k[0], v[0])
    with pytest.raises(RuntimeError, match="out must have shape"):
        flash_attn2.attention(q, k, v, out=torch.empty(1, 2, 4, 32))


def test_unsupported_flash_options_are_named():
    q = torch.randn(1, 4, 2, 64)
    with pytest.raises(NotImplementedError, match="dropout_p"):
        flash_attn2.flash_attn_func(q, q, q, dropout_p=0.1)
    with pytest.raises(NotImplementedError, match="alibi_slopes"):
        flash_attn2.flash_attn_func(q, q, q, alibi_slopes=torch.ones(2))
    with pytest.raises(NotImplementedError, match="return_attn_probs"):
        flash_attn2.flash_attn_func(q, q, q, return_attn_probs=True)


def test_unknown_capability_is_rejected():
    with pytest.raises(RuntimeError, match="not available"):
        flash_attn2.set_cpu_capability("AVX9000")


# ---- FlashAttention-2 entry points ----------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_flash_attn_func(causal, dtype):
    q, k, v = qkv(2, 6, 2, 45, 60, 64, dtype)
    out = flash_attn2.flash_attn_func(
        q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), causal=causal
    )
    assert out.shape == (2, 45, 6, 64)
    check(out.transpose(1, 2), reference(q, k, v, causal=causal), dtype)


def test_flash_attn_func_window_and_softcap():
    q, k, v = qkv(1, 2, 2, 64, 64, 64, torch.float32)
    out = flash_attn2.flash_attn_func(
        q.transpose(1, 2),
        k.transpose(1, 2),
        v.transpose(1, 2),
        softmax_scale=0.2,
        causal=True,
        window_size=(7, 7),
        softcap=3.0,
    )
    expected = reference(q, k, v, causal=True, scale=0.2, window=(7, 7), softcap=3.0)
    check(out.transpose(1, 2), expected, torch.float32)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_flash_attn_varlen_func(causal):
    lengths_q, lengths_k = [5, 0, 70, 1], [5, 3, 90, 40]
    heads_q, heads_kv, dim = 4, 2, 64
    g = torch.Generator().manual_seed(7)
    q = torch.randn(sum(lengths_q), heads_q, dim, generator=g)
    k = torch.randn(sum(lengths_k), heads_kv, dim, generator=g)
    v = torch.randn(sum(lengths_k), heads_kv, dim, generator=g)
    cu_q = torch.tensor([0, *torch.tensor(lengths_q).cumsum(0).tolist()], dtype=torch.int32)
    cu_k = torch.tensor([0, *torch.tensor(lengths_k).cumsum(0).tolist()], dtype=torch.int32)
    out = flash_attn2.flash_attn_varlen_func(
        q, k, v, cu_q, cu_k, max(lengths_q), max(lengths_k), causal=causal
    )
    assert out.shape == q.shape
    for i in range(len(lengths_q)):
        if lengths_q[i] == 0:
            continue
        sq, sk = slice(cu_q[i], cu_q[i + 1]), slice(cu_k[i], cu_k[i + 1])

        def heads_first(t, s):
            return t[s].unsqueeze(0).transpose(1, 2)

        expected = reference(
            heads_first(q, sq), heads_first(k, sk), heads_first(v, sk), causal=causal
        )
        check(heads_first(out, sq), expected, torch.float32)


# ---- Transformers' attention interface ------------------------------------------------


class _Attention(torch.nn.Module):
    """What Transformers' attention modules carry that the interface reads."""

    def __init__(self, groups: int, is_causal: bool = True) -> None:
        super().__init__()
        self.num_key_value_groups = groups
        self.is_causal = is_causal


def _transformers_sdpa():
    sdpa = pytest.importorskip(
        "transformers.integrations.sdpa_attention",
        reason="transformers is not installed in this torch environment",
    )
    return sdpa.sdpa_attention_forward


@pytest.mark.parametrize(
    ("seq_q", "seq_k", "mask_kind"),
    [(33, 33, None), (1, 50, None), (20, 20, "padding"), (1, 50, "padding"), (9, 30, None)],
    ids=["prefill", "decode", "padded-prefill", "padded-decode", "static-cache-prefill"],
)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_attention_forward_matches_transformers_sdpa(seq_q, seq_k, mask_kind, dtype):
    sdpa_attention_forward = _transformers_sdpa()
    module = _Attention(groups=2).eval()
    q, k, v = qkv(2, 4, 2, seq_q, seq_k, 64, dtype, seed=11)
    mask = None
    if mask_kind == "padding":
        keep = torch.ones(2, seq_k, dtype=torch.bool)
        keep[1, :4] = False  # left padding in the second sequence
        causal = torch.ones(seq_q, seq_k, dtype=torch.bool).tril(seq_k - seq_q)
        mask = keep[:, None, None, :] & causal
    ours, none = flash_attn2.attention_forward(module, q, k, v, mask, scaling=0.125)
    theirs, _ = sdpa_attention_forward(module, q, k, v, mask, scaling=0.125)
    assert none is None
    assert ours.shape == theirs.shape == (2, seq_q, 4, 64)
    torch.testing.assert_close(ours.double(), theirs.double(), **TOLERANCE[dtype])


def test_attention_forward_semantics_without_transformers():
    """The decisions sdpa_attention_forward makes, checked against the reference."""
    q, k, v = qkv(1, 4, 2, 12, 12, 64, torch.float32)
    causal_module = _Attention(groups=2, is_causal=True)
    out, _ = flash_attn2.attention_forward(causal_module, q, k, v, None)
    check(out.transpose(1, 2), reference(q, k, v, causal=True), torch.float32)
    out, _ = flash_attn2.attention_forward(causal_module, q, k, v, None, is_causal=False)
    check(out.transpose(1, 2), reference(q, k, v), torch.float32)
    encoder = _Attention(groups=2, is_causal=False)
    out, _ = flash_attn2.attention_forward(encoder, q, k, v, None)
    check(out.transpose(1, 2), reference(q, k, v), torch.float32)
    bias = torch.randn(1, 4, 12, 12)
    out, _ = flash_attn2.attention_forward(causal_module, q, k, v, None, position_bias=bias)
    keep = torch.ones(12, 12, dtype=torch.bool).tril()
    check(
        out.transpose(1, 2),
        reference(q, k, v, bias.masked_fill(~keep, float("-inf"))),
        torch.float32,
    )
    with pytest.raises(NotImplementedError, match="dropout"):
        flash_attn2.attention_forward(causal_module.train(), q, k, v, None, dropout=0.1)


# ---- op registration ------------------------------------------------------------------


def _opcheck_cases():
    q, k, v = qkv(1, 4, 2, 9, 13, 64, torch.float32)
    mask = torch.randn(1, 1, 9, 13)
    yield "attention", (q, k, v, None, 0.125, True, -1, -1, 0.0)
    yield "attention", (q, k, v, mask, 0.125, False, 4, 2, 2.0)
    yield "attention_out", (torch.empty(1, 4, 9, 64), q, k, v, mask, 0.125, True, -1, -1, 0.0)


@pytest.mark.parametrize(
    ("name", "args"), list(_opcheck_cases()), ids=lambda v: v if isinstance(v, str) else ""
)
def test_opcheck(name, args):
    torch.library.opcheck(getattr(flash_attn2._ops.ops, name).default, args)


def test_flash_attn_func_under_torch_compile():
    q, k, v = qkv(1, 4, 2, 16, 16, 64, torch.float32)
    compiled = torch.compile(flash_attn2.flash_attn_func, fullgraph=True)
    out = compiled(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), causal=True)
    check(out.transpose(1, 2), reference(q, k, v, causal=True), torch.float32)


# ---- the per-shape choice between these loops and torch's sdpa ----------------------
#
# Whatever is chosen, the result is the attention asked for: torch runs only where it
# computes exactly the same problem, and every other problem keeps the loops.


@pytest.fixture
def dispatch():
    """Sets a dispatch mode for one test and puts the previous one back."""
    previous = flash_attn2.set_attention_dispatch("auto")
    yield flash_attn2.set_attention_dispatch
    flash_attn2.set_attention_dispatch(previous)


# (batch, heads_q, heads_kv, seq_q, seq_k, head_dim), causal: problems torch's sdpa computes
# exactly as we do (GQA included: it runs with enable_gqa=True).
EQUIVALENT = [
    ((1, 8, 2, 70, 70, 64), True),  # causal prefill, Sq == Sk
    ((2, 4, 4, 33, 90, 64), False),  # full attention, Sq != Sk
    ((1, 8, 2, 1, 300, 128), True),  # a decode step: sees every key
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("case", EQUIVALENT, ids=str)
@pytest.mark.parametrize("mode", ["torch", "auto"])
def test_equivalent_problems_are_right_either_way(dispatch, mode, case, dtype):
    dispatch(mode)
    shape, causal = case
    q, k, v = qkv(*shape, dtype, seed=5)
    expected = reference(q, k, v, causal=causal)
    for _ in range(2):  # auto: the first call decides, the second runs the choice
        check(flash_attn2.attention(q, k, v, causal=causal), expected, dtype)
        out = torch.full_like(q, float("nan")).transpose(1, 2).contiguous().transpose(1, 2)
        check(flash_attn2.attention(q, k, v, causal=causal, out=out), expected, dtype)


@pytest.mark.parametrize("problem", ["mask", "softcap", "window", "chunked causal"])
def test_other_problems_keep_the_loops_in_torch_mode(dispatch, problem):
    """Torch's sdpa would compute something else here (fully masked rows, no softcap, no
    window, top-left causal alignment): the loops run even when torch is asked for."""
    dispatch("torch")
    seq_q, seq_k = (37, 290) if problem == "chunked causal" else (50, 50)
    q, k, v = qkv(1, 4, 2, seq_q, seq_k, 64, torch.float32, seed=6)
    mask = torch.rand(1, 1, seq_q, seq_k, generator=torch.Generator().manual_seed(1)) > 0.3
    mask[..., 7, :] = False  # a fully masked row: zeros here, NaN in sdpa's math path
    kwargs: dict = {"causal": problem == "chunked causal"}
    if problem == "softcap":
        kwargs["softcap"] = 5.0
    if problem == "window":
        kwargs["window_size"] = (8, 0)
    got = flash_attn2.attention(q, k, v, mask if problem == "mask" else None, **kwargs)
    expected = reference(q, k, v, mask if problem == "mask" else None,
                         causal=kwargs["causal"], softcap=kwargs.get("softcap", 0.0),
                         window=kwargs.get("window_size", (-1, -1)))
    check(got, expected, torch.float32)


def test_auto_records_one_decision_per_bucket(dispatch):
    dispatch("auto")
    q, k, v = qkv(1, 4, 1, 40, 40, 64, torch.float32, seed=7)
    flash_attn2.attention(q, k, v, causal=True)
    q2, k2, v2 = qkv(1, 4, 1, 50, 50, 64, torch.float32, seed=8)  # same bucket (<= 64)
    flash_attn2.attention(q2, k2, v2, causal=True)
    lines = [line for line in flash_attn2.attention_dispatch_decisions()
             if "[1, 4/1 heads, seq_q<=64, seq_k<=64, d 64] causal" in line]
    assert len(lines) == 1, flash_attn2.attention_dispatch_decisions()
    assert lines[0].startswith("Float") and ("kernel (" in lines[0] or "torch sdpa (" in lines[0])
    assert f"loops {flash_attn2.cpu_capability()}" in lines[0]


def _sdpa(q, k, v, causal):
    """What the op hands a shape to: torch's sdpa as the CPU dispatch calls it."""
    causal = causal and q.shape[2] > 1  # one query sees every key
    return torch.nn.functional.scaled_dot_product_attention(
        q, k, v, is_causal=causal, enable_gqa=True)


def _same_layout(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Same sizes and the same strides wherever a dimension is stepped along (size > 1)."""
    return a.shape == b.shape and all(
        n == 1 or sa == sb for n, sa, sb in zip(a.shape, a.stride(), b.stride(), strict=True))


def _as_transformers_hands_it(q: torch.Tensor) -> torch.Tensor:
    """q as Transformers' attention gets it: a [B, S, H, D] projection viewed [B, H, S, D]."""
    return q.transpose(1, 2).contiguous().transpose(1, 2)


@pytest.mark.parametrize("layout", ["contiguous", "transformers"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("case", EQUIVALENT, ids=str)
def test_handed_to_sdpa_is_sdpas_own_result(dispatch, case, dtype, layout):
    """A shape handed to sdpa: the allocating op, flash_attn_func and Transformers'
    interface give sdpa's bits in sdpa's layout, with no op of their own around sdpa's
    (no output allocated, nothing copied, transposed or made contiguous)."""
    from flash_attn2 import attention_forward
    from torch.profiler import ProfilerActivity, profile

    dispatch("torch")
    shape, causal = case
    q, k, v = qkv(*shape, dtype, seed=9)
    if layout == "transformers":
        q = _as_transformers_hands_it(q)
    expected = _sdpa(q, k, v, causal)
    got = flash_attn2.attention(q, k, v, causal=causal)
    assert torch.equal(got, expected) and _same_layout(got, expected)
    via_fa2 = flash_attn2.flash_attn_func(q.transpose(1, 2), k.transpose(1, 2),
                                          v.transpose(1, 2), causal=causal)
    assert torch.equal(via_fa2, expected.transpose(1, 2))
    module = torch.nn.Module()
    module.is_causal = causal
    out, _ = attention_forward(module, q, k, v, None)
    assert torch.equal(out, expected.transpose(1, 2)) and out.is_contiguous()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        flash_attn2.attention(q, k, v, causal=causal)
        if layout == "transformers":
            attention_forward(module, q, k, v, None)
    inside = [e.name for e in prof.events() if e.cpu_parent is not None
              and e.cpu_parent.name.endswith("::attention")]
    # sdpa, and at most a view that restrides dimensions of size 1 (a decode step's query).
    assert inside.count("aten::scaled_dot_product_attention") == (
        2 if layout == "transformers" else 1), inside
    assert set(inside) <= {"aten::scaled_dot_product_attention", "aten::as_strided"}, inside

    def outside_sdpa(event) -> bool:
        while event is not None:
            if event.name == "aten::scaled_dot_product_attention":
                return False
            event = event.cpu_parent
        return True

    # Transformers' layout: the interface's transpose is a view, its contiguous() a no-op.
    ours = [e.name for e in prof.events() if outside_sdpa(e)]
    assert not {"aten::copy_", "aten::clone", "aten::empty", "aten::empty_strided",
                "aten::contiguous"} & set(ours), ours


@pytest.mark.parametrize("layout", ["contiguous", "transformers"])
def test_own_output_has_sdpas_layout(dispatch, layout):
    """The loops' fresh output is laid out as sdpa's for the same query (a transposed
    [B, S, H, D] buffer for Transformers' query), so either side of the dispatch returns
    one layout, the one the fake describes."""
    dispatch("kernel")
    q, k, v = qkv(1, 8, 2, 70, 70, 64, torch.float32, seed=10)
    if layout == "transformers":
        q = _as_transformers_hands_it(q)
    got = flash_attn2.attention(q, k, v, causal=True)
    assert _same_layout(got, _sdpa(q, k, v, True))
    assert got.transpose(1, 2).is_contiguous() == (layout == "transformers")


def test_unknown_mode_is_rejected(dispatch):
    with pytest.raises(RuntimeError, match=r"'fastest' is not a dispatch mode; choose auto"):
        flash_attn2.set_attention_dispatch("fastest")
    assert flash_attn2.set_attention_dispatch("kernel") == "auto"


# ---- CUDA -----------------------------------------------------------------------------

cuda = pytest.mark.skipif(
    not torch.cuda.is_available()
    or not hasattr(flash_attn2._ops.ops, "attention")
    or not torch._C._dispatch_has_kernel_for_dispatch_key(
        flash_attn2._ops.add_op_namespace_prefix("attention"), "CUDA"
    ),
    reason="needs a CUDA device and a CUDA build of this kernel",
)


@cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_cuda_matches_reference(shape, causal, dtype):
    q, k, v = qkv(*shape, dtype, device="cuda")
    out = poisoned(q.shape, dtype, device="cuda")
    flash_attn2.attention(q, k, v, causal=causal, out=out)
    check(out, reference(q.cpu(), k.cpu(), v.cpu(), causal=causal), dtype)


@cuda
def test_cuda_mask_window_softcap_and_head_dim_256():
    q, k, v = qkv(2, 4, 2, 70, 90, 256, torch.float32, device="cuda")
    mask = torch.randn(2, 1, 70, 90, device="cuda")
    out = flash_attn2.attention(q, k, v, mask, window_size=(20, 3), softcap=4.0)
    expected = reference(q.cpu(), k.cpu(), v.cpu(), mask.cpu(), window=(20, 3), softcap=4.0)
    check(out, expected, torch.float32)
