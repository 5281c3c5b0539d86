"""SEEDS 9 — module fusion: a tuple key of (class_name, path_pattern) pairs maps
neighbouring modules to one fused kernel with a ``…Layout`` companion."""

from __future__ import annotations

import pytest
import torch
from kernelhub.integrations.transformers import KernelConfig, KernelConfigError
from seeds.seedkit import ids, kernels_in, load, pytorch, require_kernel

NORM = ("RMSNorm", "model.layers.*.post_attention_layernorm")
MLP = ("MLP", "model.layers.*.mlp")


def test_mismatched_parents_are_rejected():
    with pytest.raises(KernelConfigError, match="one parent"):
        KernelConfig({(NORM, ("MLP", "model.mlp")): "kernels-community/rmsnorm:RMSNormMLP"})


def test_unmatched_pattern_is_rejected(hub_env, model_dirs):
    key = (("RMSNorm", "decoder.blocks.*.norm"), ("MLP", "decoder.blocks.*.mlp"))
    with pytest.raises(KernelConfigError, match="no module of Qwen3ForCausalLM matches"):
        load(model_dirs["qwen3"], kernel_config=KernelConfig({key: "kernels-community/rmsnorm:RMSNormMLP"}))


def test_missing_layout_is_rejected(hub_env, model_dirs):
    with pytest.raises(KernelConfigError, match="SiluLayout"):
        load(model_dirs["llama"], kernel_config=KernelConfig({(NORM, MLP): "kernels-community/activation:Silu"}))


@pytest.mark.parametrize("family", ["qwen3", "llama"])
def test_fused_rmsnorm_mlp_matches_pytorch(hub_env, model_dirs, family):
    require_kernel("kernels-community/rmsnorm")
    reference = pytorch(model_dirs[family])
    model = load(model_dirs[family],
                 kernel_config=KernelConfig({(NORM, MLP): "kernels-community/rmsnorm:RMSNormMLP"}))
    used = kernels_in(model)
    assert "RMSNormMLP" in used["model.layers.0.post_attention_layernorm"]
    assert "RMSNormMLP" in used["model.layers.0.mlp"]
    with torch.no_grad():
        torch.testing.assert_close(model(ids()).logits, reference(ids()).logits,
                                   rtol=1e-3, atol=1e-4)


def test_fusion_keeps_the_checkpoint_format(hub_env, model_dirs, tmp_path):
    """Fusing changes no state_dict key: a fused model saves and reloads with every weight."""
    require_kernel("kernels-community/rmsnorm")
    config = KernelConfig({(NORM, MLP): "kernels-community/rmsnorm:RMSNormMLP"})
    reference = pytorch(model_dirs["llama"])
    model = load(model_dirs["llama"], kernel_config=config)
    assert sorted(model.state_dict()) == sorted(reference.state_dict())
    model.save_pretrained(tmp_path)
    again = pytorch(tmp_path)
    with torch.no_grad():
        torch.testing.assert_close(again(ids()).logits, reference(ids()).logits)


def test_fused_model_trains(hub_env, model_dirs):
    """The Layout sits beside the tree; RMSNormMLP has a backward, so training stays fused."""
    require_kernel("kernels-community/rmsnorm")
    model = load(model_dirs["llama"],
                 kernel_config=KernelConfig({(NORM, MLP): "kernels-community/rmsnorm:RMSNormMLP"}))
    from kernelhub.integrations.transformers import fusion

    kernel_cls = type(model.model.layers[0].post_attention_layernorm.__dict__[fusion.LAYOUT_ATTR])
    assert kernel_cls.__name__ == "RMSNormMLPLayout"
    model.train()
    assert "RMSNormMLP" in kernels_in(model)["model.layers.0.mlp"]
    model(ids(), labels=ids()).loss.backward()
    assert model.model.layers[0].mlp.gate_proj.weight.grad is not None
