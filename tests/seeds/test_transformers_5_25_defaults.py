"""The two kernels Transformers 5.25's default mapping names that our library serves since
liger-kernels v4 and rotary v2's ``apply_rotary_transformers``: a Llama with
``use_kernels=True`` runs ``LigerRMSNorm`` in every norm and the rotary kernel in every
attention, and computes what PyTorch computes.

5.25 maps ``RMSNorm`` to liger-kernels on CUDA and ROCm only; on the CPU the default norm
is our rmsnorm kernel (docs/transformers.md says why), so here the Llama asks for
liger-kernels through a KernelConfig, exactly as 5.25's entry names it (version 4), and
keeps the decoder layers and MLPs unfused (on the CPU the table fuses them: the fused
decoder layer would compute the norms itself)."""

from __future__ import annotations

import pytest
import torch
from kernelhub.integrations.transformers import KernelConfig
from seeds.seedkit import functions_in, ids, kernels_in, load, pytorch, require_kernel

LIGER = "kernels-community/liger-kernels"
ROTARY = "kernels-community/rotary"


def _liger_config() -> KernelConfig:
    return KernelConfig({"RMSNorm": (f"{LIGER}:LigerRMSNorm", {"version": 4}),
                         "DecoderLayer": None, "MLP": None})


def test_llama_runs_liger_rms_norm_and_the_rotary_kernel(hub_env, model_dirs):
    require_kernel(LIGER)
    require_kernel(ROTARY)
    config = _liger_config()
    reference = pytorch(model_dirs["llama"])
    model = load(model_dirs["llama"], use_kernels=True, kernel_config=config)
    layers = model.config.num_hidden_layers
    norms = {n: r for n, r in kernels_in(model).items() if n.endswith("norm")}
    assert len(norms) == 2 * layers + 1, kernels_in(model)  # two per layer and the final one
    assert all(LIGER in r and "LigerRMSNorm" in r for r in norms.values()), norms
    rotary = functions_in(model)
    assert len(rotary) == layers and all(
        "apply_rotary_transformers" in what or "rotary" in what for what in rotary.values()
    ), rotary
    with torch.no_grad():
        torch.testing.assert_close(model(ids()).logits, reference(ids()).logits,
                                   rtol=1e-4, atol=1e-5)
        out = model.generate(ids(), max_new_tokens=5, do_sample=False)
        ref = reference.generate(ids(), max_new_tokens=5, do_sample=False)
    assert torch.equal(out, ref)


def test_training_step_through_liger_rms_norm_matches_pytorch(hub_env, model_dirs):
    require_kernel(LIGER)
    config = _liger_config()
    grads = []
    for model in (pytorch(model_dirs["llama"]),
                  load(model_dirs["llama"], use_kernels=True, kernel_config=config)):
        model.train()
        model(ids(), labels=ids()).loss.backward()
        grads.append({n: p.grad for n, p in model.named_parameters() if n.endswith("norm.weight")})
    reference, ours = grads
    assert reference.keys() == ours.keys() and reference
    for name, grad in reference.items():
        torch.testing.assert_close(ours[name], grad, rtol=1e-4, atol=1e-5, msg=name)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_apply_rotary_transformers_is_llama_s_apply_rotary_pos_emb(hub_env, dtype):
    """At Llama-3-8B's attention shapes (32 query heads, 8 key/value heads, head_dim 128,
    a 512-token prefill), against Transformers' own function and rotary embedding."""
    require_kernel(ROTARY)
    from kernelhub import get_kernel
    from transformers import LlamaConfig
    from transformers.models.llama import modeling_llama

    rotary = get_kernel(ROTARY, version=2)
    config = LlamaConfig(hidden_size=4096, num_attention_heads=32, num_key_value_heads=8,
                         max_position_embeddings=8192, rope_theta=500000.0)
    gen = torch.Generator().manual_seed(0)
    q = torch.randn(1, 32, 512, 128, generator=gen).to(dtype)
    k = torch.randn(1, 8, 512, 128, generator=gen).to(dtype)
    positions = torch.arange(512).unsqueeze(0)
    cos, sin = modeling_llama.LlamaRotaryEmbedding(config)(q, positions)
    theirs = modeling_llama.apply_rotary_pos_emb(q, k, cos, sin)
    ours = rotary.apply_rotary_transformers(q, k, cos, sin, position_ids=positions,
                                            unsqueeze_dim=1)
    # Each output element is a*cos + b*sin. float32: both round alike up to contraction.
    # bf16: Transformers rounds each product and the sum to bf16, the kernel only the
    # result, so they may differ by a few bf16 steps of the products (|q|*|cos| < 6 here)
    # where the sum cancels; the kernel must be at least as close to the exact value.
    tol = {"rtol": 1e-5, "atol": 1e-5} if dtype == torch.float32 else {"rtol": 1e-2, "atol": 5e-2}
    cos64, sin64 = cos.double().unsqueeze(1), sin.double().unsqueeze(1)
    for a, b, x in zip(ours, theirs, (q, k), strict=True):
        assert a.dtype == b.dtype and a.shape == b.shape
        torch.testing.assert_close(a, b, **tol)
        x64 = x.double()
        exact = x64 * cos64 + modeling_llama.rotate_half(x64) * sin64
        assert (a.double() - exact).abs().max() <= (b.double() - exact).abs().max()
