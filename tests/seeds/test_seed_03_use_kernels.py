"""SEEDS 3 — ``from_pretrained(..., use_kernels=True)``: layers with a kernel get it,
the rest stay PyTorch; forwards are replaced, never the model code."""

from __future__ import annotations

import pytest
import torch
from seeds.seedkit import functions_in, ids, kernels_in, load, pytorch, require_kernel


@pytest.mark.parametrize("family", ["qwen3", "llama"])
def test_use_kernels_matches_pytorch_and_generates(hub_env, model_dirs, family):
    reference = pytorch(model_dirs[family])
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

    reference = pytorch(model_dirs["qwen3"])
    model = load(model_dirs["qwen3"], use_kernels=True)
    used = kernels_in(model)
    assert any(n.endswith("input_layernorm") and "rmsnorm" in r for n, r in used.items())
    rotary = [what for where, what in functions_in(model).items()
              if where.startswith("model.layers.0.self_attn.")]
    assert rotary and all("apply_rotary_transformers" in what or "rotary" in what
                          for what in rotary), functions_in(model)
    assert model.config._attn_implementation == "kernels-community/flash-attn2"
    with torch.no_grad():
        torch.testing.assert_close(model(ids()).logits, reference(ids()).logits,
                                   rtol=1e-3, atol=1e-4)
        model.generate(ids(), max_new_tokens=3, do_sample=False)


def test_rotary_kernel_runs_only_in_the_kernelized_model(hub_env, model_dirs, monkeypatch):
    """Another model of the same family in the same process keeps PyTorch's rotary,
    whether it was loaded before or after; switching the kernel off restores it. Where
    Transformers attaches its rotary function to each attention module, the kernel runs
    in those of the kernelized model; elsewhere kernelhub rebinds the module global for
    the kernelized model's forwards only, and the family's global stays as it is."""
    require_kernel("kernels-community/rotary")
    import transformers.models.qwen3.modeling_qwen3 as qwen3
    from kernelhub.integrations.transformers import KernelConfig

    pytorch_calls = []
    original = qwen3.apply_rotary_pos_emb
    rotate_half = qwen3.rotate_half

    def counted(x):
        pytorch_calls.append(1)
        return rotate_half(x)

    # PyTorch's rotary calls rotate_half twice (q and k); the kernel calls neither.
    monkeypatch.setattr(qwen3, "rotate_half", counted)
    before = pytorch(model_dirs["qwen3"])
    model = load(model_dirs["qwen3"], use_kernels=True)
    after = pytorch(model_dirs["qwen3"])
    layers = model.config.num_hidden_layers
    with torch.no_grad():
        model(ids())
        assert pytorch_calls == [], "the kernelized model ran PyTorch's rotary"
        for other in (before, after):
            torch.testing.assert_close(other(ids()).logits, model(ids()).logits,
                                       rtol=1e-3, atol=1e-4)
        assert len(pytorch_calls) == 2 * 2 * layers, "a model that was not kernelized ran our rotary"
    assert qwen3.apply_rotary_pos_emb is original, "the family's module global was replaced"
    assert len(functions_in(model)) == layers, functions_in(model)
    assert not any(functions_in(other) for other in (before, after))
    model.set_use_kernels(True, KernelConfig({"rotary_pos_emb": None}))
    assert not functions_in(model)
    with torch.no_grad():
        model(ids())
    assert len(pytorch_calls) == 3 * 2 * layers


def test_model_with_the_rotary_kernel_compiles(hub_env, model_dirs):
    """torch.compile of a use_kernels model whose attention sees our rotary through its
    own globals: the graph guards on those globals, not the family module's."""
    require_kernel("kernels-community/rotary")
    reference = pytorch(model_dirs["qwen3"])
    model = load(model_dirs["qwen3"], use_kernels=True)
    assert functions_in(model)
    model.forward = torch.compile(model.forward)
    with torch.no_grad():
        torch.testing.assert_close(model(ids()).logits, reference(ids()).logits,
                                   rtol=1e-3, atol=1e-4)
