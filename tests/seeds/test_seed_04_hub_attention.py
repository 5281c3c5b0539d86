"""SEEDS 4 — hub attention kernels: ``attn_implementation="org/repo"``; repos outside the
trusted org are refused unless ``allow_all_kernels=True``."""

from __future__ import annotations

import pytest
import torch
from kernelhub.integrations.transformers import AttentionKernelError
from seeds.seedkit import ids, load, pytorch, require_kernel


def test_hub_attention_kernel_is_registered_and_runs(hub_env, model_dirs):
    require_kernel("kernels-community/flash-attn2")
    from transformers import AttentionInterface

    reference = pytorch(model_dirs["qwen3"])
    model = load(model_dirs["qwen3"], attn_implementation="kernels-community/flash-attn2")
    assert model.config._attn_implementation == "kernels-community/flash-attn2"
    assert "kernels-community/flash-attn2" in AttentionInterface._global_mapping
    with torch.no_grad():
        torch.testing.assert_close(model(ids()).logits, reference(ids()).logits,
                                   rtol=1e-3, atol=1e-4)


def test_untrusted_org_is_refused_with_a_clear_error(hub_env, model_dirs):
    with pytest.raises(AttentionKernelError, match="allow_all_kernels=True"):
        load(model_dirs["qwen3"], attn_implementation="someone-else/flash-attn2")


def test_allow_all_kernels_lifts_the_trust_check(hub_env, model_dirs):
    """With allow_all_kernels the trust gate passes; the hub then says the repo is absent."""
    with pytest.raises(AttentionKernelError) as err:
        load(model_dirs["qwen3"], attn_implementation="someone-else/flash-attn2",
             allow_all_kernels=True)
    assert "no repository someone-else/flash-attn2" in str(err.value)
    assert "trusted" not in str(err.value)
