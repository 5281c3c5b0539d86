"""SEEDS 12 — no kernel for an op, device or mode → standard PyTorch, never an error."""

from __future__ import annotations

import torch
from kernelhub.integrations.transformers import kernelize
from kernelhub.layer import Mode
from seeds.seedkit import ids, kernels_in, load, pytorch


def test_missing_kernels_and_modes_fall_back(hub_env, model_dirs, monkeypatch, tmp_path):
    reference = pytorch(model_dirs["llama"])
    model = load(model_dirs["llama"], use_kernels=True)
    kernelize(model, mode=Mode.TRAINING)  # no activation backward → PyTorch, no error
    assert not any(n.endswith("act_fn") for n in kernels_in(model))
    monkeypatch.setenv("KERNELHUB_HUB", str(tmp_path / "empty-hub"))
    monkeypatch.setenv("KERNELHUB_CACHE", str(tmp_path / "cache"))
    bare = load(model_dirs["llama"], use_kernels=True)  # a hub with nothing: all PyTorch
    with torch.no_grad():
        torch.testing.assert_close(bare(ids()).logits, reference(ids()).logits)
