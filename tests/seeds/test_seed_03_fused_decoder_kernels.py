"""SEEDS 3 — ``use_kernels=True`` with the table's fused decoder kernels: rmsnorm's
``DecoderLayer`` and ``MLP`` run on Llama/Qwen3 models and prefill and decode give
PyTorch's logits; with ``autotune=True`` the decoder layer keeps PyTorch's forward (its
attention updates the KV cache, so it cannot be run twice on one call) while the MLP is
judged."""

from __future__ import annotations

import logging

import pytest
import torch
from seeds.seedkit import TINY, kernels_in, load


def _generate(model, prompt):
    with torch.no_grad():
        return model.generate(prompt, max_new_tokens=6, do_sample=False,
                              output_logits=True, return_dict_in_generate=True)


@pytest.fixture(autouse=True)
def _no_machine_rules(monkeypatch):
    """These tests check the fused kernels themselves, so they run on every CPU, also where
    a machine rule keeps them off by default (integrations/transformers/machine.py: AMX)."""
    from kernelhub.integrations.transformers import machine

    monkeypatch.setattr(machine, "DECLINES", ())


@pytest.mark.parametrize("family", ["llama", "qwen3"])
def test_use_kernels_runs_the_fused_decoder_kernels(hub_env, model_dirs, family):
    reference = load(model_dirs[family])
    model = load(model_dirs[family], use_kernels=True)
    used = kernels_in(model)
    for i in range(TINY["num_hidden_layers"]):
        assert "kernels-community/rmsnorm" in used[f"model.layers.{i}"], used
        assert "kernels-community/rmsnorm" in used[f"model.layers.{i}.mlp"], used
    prompt = torch.randint(0, TINY["vocab_size"], (1, 9),
                           generator=torch.Generator().manual_seed(2))
    ours, theirs = _generate(model, prompt), _generate(reference, prompt)
    assert torch.equal(ours.sequences, theirs.sequences)
    for a, b in zip(ours.logits, theirs.logits, strict=True):  # prefill, then decode steps
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)


def test_verify_keeps_the_decoder_layer_and_judges_the_mlp(hub_env, model_dirs, tmp_path,
                                                           monkeypatch, caplog):
    from kernelhub import verification_report
    from kernelhub.integrations.transformers import KernelConfig

    monkeypatch.setenv("KERNELHUB_CACHE", str(tmp_path / "cache"))
    reference = load(model_dirs["llama"])
    with caplog.at_level(logging.WARNING, logger="kernelhub.transformers"):
        model = load(model_dirs["llama"], use_kernels=True,
                     kernel_config=KernelConfig(autotune=True))
    used = kernels_in(model)
    assert not any(name.startswith("model.layers.") and name.count(".") == 2 for name in used), used
    assert "kernels-community/rmsnorm" in used["model.layers.0.mlp"], used
    # Said once per process (this test may not be the first to meet it).
    assert "DecoderLayer" in _told()
    for record in caplog.records:
        if record.getMessage().startswith("DecoderLayer"):
            assert "keeping PyTorch's forward with autotune=True" in record.getMessage()
    prompt = torch.randint(0, TINY["vocab_size"], (1, 9),
                           generator=torch.Generator().manual_seed(3))
    ours, theirs = _generate(model, prompt), _generate(reference, prompt)
    assert torch.equal(ours.sequences, theirs.sequences)
    names = {seen.name for _, seen in verification_report(model)}
    assert "MLP" in names, names


def _told() -> set[str]:
    """The layers already said to keep PyTorch under verify in this process."""
    from kernelhub.integrations.transformers import apply

    return apply._told_unverifiable
