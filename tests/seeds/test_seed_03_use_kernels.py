"""SEEDS 3 — ``from_pretrained(..., use_kernels=True)``: layers with a kernel get it,
the rest stay PyTorch; forwards are replaced, never the model code."""

from __future__ import annotations

import pytest
import torch
from kernelhub.integrations.transformers.rebind import overrides_of
from seeds.seedkit import ids, kernels_in, load, require_kernel


@pytest.mark.parametrize("family", ["qwen3", "llama"])
def test_use_kernels_matches_pytorch_and_generates(hub_env, model_dirs, family):
    reference = load(model_dirs[family])
    model = load(model_dirs[family], use_kernels=True)
    used = kernels_in(model)
    acts = [n for n in used if n.endswith("mlp.act_fn")]
    assert len(acts) == 2, used  # every decoder layer's SiLU runs the activation kernel
    assert all("kernels-community/activation" in used[n] for n in acts)
    assert type(model.model.layers[0].mlp.act_fn).forward is not model.model.layers[0].mlp.act_fn.forward
    with torch.no_grad():
        torch.testing.assert_close(model(ids()).logits, reference(ids()).logits,
                                   rtol=1e-4, atol=1e-5)
        out = model.generate(ids(), max_new_tokens=5, do_sample=False)
        ref = reference.generate(ids(), max_new_tokens=5, do_sample=False)
    assert torch.equal(out, ref)


def test_norm_rotary_attention_kernels_run(hub_env, model_dirs):
    for repo in ("kernels-community/rmsnorm", "kernels-community/rotary",
                 "kernels-community/flash-attn2"):
        require_kernel(repo)

    reference = load(model_dirs["qwen3"])
    model = load(model_dirs["qwen3"], use_kernels=True)
    used = kernels_in(model)
    assert any(n.endswith("input_layernorm") and "rmsnorm" in r for n, r in used.items())
    attention = model.model.layers[0].self_attn
    assert overrides_of(attention)["apply_rotary_pos_emb"].__name__ == "apply_rotary_transformers"
    assert model.config._attn_implementation == "kernels-community/flash-attn2"
    with torch.no_grad():
        torch.testing.assert_close(model(ids()).logits, reference(ids()).logits,
                                   rtol=1e-3, atol=1e-4)
        model.generate(ids(), max_new_tokens=3, do_sample=False)


def test_rotary_kernel_runs_only_in_the_kernelized_model(hub_env, model_dirs, monkeypatch):
    """Another model of the same family in the same process keeps PyTorch's rotary,
    whether it was loaded before or after; switching the kernel off restores it."""
    require_kernel("kernels-community/rotary")
    import transformers.models.qwen3.modeling_qwen3 as qwen3
    from kernelhub.integrations.transformers import KernelConfig

    pytorch_calls = []
    original = qwen3.apply_rotary_pos_emb

    def counted(*args, **kwargs):
        pytorch_calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(qwen3, "apply_rotary_pos_emb", counted)
    before = load(model_dirs["qwen3"])
    model = load(model_dirs["qwen3"], use_kernels=True)
    after = load(model_dirs["qwen3"])
    layers = model.config.num_hidden_layers
    with torch.no_grad():
        model(ids())
        assert pytorch_calls == [], "the kernelized model ran PyTorch's rotary"
        for other in (before, after):
            torch.testing.assert_close(other(ids()).logits, model(ids()).logits,
                                       rtol=1e-3, atol=1e-4)
        assert len(pytorch_calls) == 2 * layers, "a model that was not kernelized ran our rotary"
    assert qwen3.apply_rotary_pos_emb is counted, "the family's module global was replaced"
    assert not any(overrides_of(m) for other in (before, after) for m in other.modules())
    model.set_use_kernels(True, KernelConfig({"rotary_pos_emb": None}))
    assert not any(overrides_of(m) for m in model.modules())
    with torch.no_grad():
        model(ids())
    assert len(pytorch_calls) == 3 * layers


def test_model_with_the_rotary_kernel_compiles(hub_env, model_dirs):
    """torch.compile of a use_kernels model whose attention sees our rotary through its
    own globals: the graph guards on those globals, not the family module's."""
    require_kernel("kernels-community/rotary")
    reference = load(model_dirs["qwen3"])
    model = load(model_dirs["qwen3"], use_kernels=True)
    assert any(overrides_of(m) for m in model.modules())
    model.forward = torch.compile(model.forward)
    with torch.no_grad():
        torch.testing.assert_close(model(ids()).logits, reference(ids()).logits,
                                   rtol=1e-3, atol=1e-4)
