"""SEEDS 13 — determinism: with seeds and PyTorch's determinism flags, two runs through
the kernels give identical outputs (docs/determinism.md says how and why)."""

from __future__ import annotations

import torch
from seeds.seedkit import ids, kernels_in, load


def test_two_deterministic_runs_are_identical(hub_env, model_dirs):
    previous = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        outputs = []
        for _ in range(2):
            torch.manual_seed(1234)
            model = load(model_dirs["qwen3"], use_kernels=True)
            assert kernels_in(model)
            with torch.no_grad():
                outputs.append(model.generate(ids(), max_new_tokens=4, do_sample=True,
                                              output_logits=True, return_dict_in_generate=True))
    finally:
        torch.use_deterministic_algorithms(previous)
    assert torch.equal(outputs[0].sequences, outputs[1].sequences)
    for a, b in zip(outputs[0].logits, outputs[1].logits, strict=True):
        assert torch.equal(a, b)
