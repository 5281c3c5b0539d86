"""SEEDS 6 — ``attn_implementation="flash_attention_2"`` without a usable flash-attn
package → our hub kernel, with a one-line notice."""

from __future__ import annotations

import importlib.util
import logging

import pytest
import torch
from kernelhub.integrations.transformers import attention
from seeds.seedkit import ids, load, require_kernel


@pytest.mark.skipif(importlib.util.find_spec("flash_attn") is not None and torch.cuda.is_available(),
                    reason="flash-attn is usable here, so Transformers runs it itself")
def test_flash_attention_2_falls_back_to_the_hub_kernel(hub_env, model_dirs, caplog):
    assert attention.parse("flash_attention_2").repo_id == "kernels-community/flash-attn2"
    require_kernel("kernels-community/flash-attn2")
    with caplog.at_level(logging.WARNING, logger="kernelhub.transformers"):
        model = load(model_dirs["qwen3"], attn_implementation="flash_attention_2")
    assert model.config._attn_implementation == "kernels-community/flash-attn2"
    notices = [r.getMessage() for r in caplog.records if "flash_attention_2" in r.getMessage()]
    assert len(notices) >= 1 and all("\n" not in n for n in notices)
    with torch.no_grad():
        assert model(ids()).logits.isfinite().all()
