"""Issue 31 — ``use_kernels=True`` on a bfloat16 model, on a CPU without native bfloat16
products: every ``nn.Linear`` runs rmsnorm's ``Linear`` (prefill products widened to
float32, decode steps its streaming few-rows product), composed with the fused decoder kernels, and greedy
decoding gives PyTorch's tokens; a float32 model, an explicit ``{"Linear": None}`` and
``set_use_kernels(False)`` (every supported Transformers release has it; ``reset_kernels``
is 5.25's) leave or put every ``nn.Linear`` back as PyTorch's."""

from __future__ import annotations

import pytest
import torch
from seeds.seedkit import TINY, kernels_in, load, pytorch, require_kernel


@pytest.fixture(autouse=True)
def _cpu_without_native_bf16(monkeypatch):
    """The decision is the table's; these tests check what it installs, so the CPU reads
    as this project's AVX2 machine whatever runs them (the kernel itself still widens
    only where its own check of the CPU says so)."""
    from kernelhub.integrations.transformers import machine, widen

    monkeypatch.setattr(machine, "cpu_flags", lambda: frozenset({"avx", "avx2", "fma"}))
    monkeypatch.setattr(machine, "DECLINES", ())
    monkeypatch.setattr(widen, "_told", set())


def _linear_paths(model) -> set[str]:
    return {name for name, m in model.named_modules() if type(m) is torch.nn.Linear}


def _generate(model, prompt):
    with torch.no_grad():
        return model.generate(prompt, max_new_tokens=8, do_sample=False,
                              output_logits=True, return_dict_in_generate=True)


@pytest.mark.parametrize("family", ["llama", "qwen3"])
def test_a_bfloat16_model_runs_widened_projections_and_decodes_alike(hub_env, model_dirs,
                                                                     family):
    require_kernel("kernels-community/rmsnorm")
    reference = pytorch(model_dirs[family], dtype=torch.bfloat16)
    model = load(model_dirs[family], dtype=torch.bfloat16, use_kernels=True)
    used = kernels_in(model)
    linears = _linear_paths(model)
    assert linears and all("kernels-community/rmsnorm" in used.get(p, "") for p in linears), (
        sorted(linears - set(used)))
    assert "kernels-community/rmsnorm" in used["model.layers.0"], used  # the fused layer too
    prompt = torch.randint(0, TINY["vocab_size"], (1, 20),
                           generator=torch.Generator().manual_seed(4))
    ours, theirs = _generate(model, prompt), _generate(reference, prompt)
    assert torch.equal(ours.sequences, theirs.sequences)
    for a, b in zip(ours.logits, theirs.logits, strict=True):
        torch.testing.assert_close(a, b, rtol=3e-2, atol=3e-2)
    model.set_use_kernels(False)
    assert not _linear_paths(model) & set(kernels_in(model))


def test_float32_models_and_an_explicit_none_keep_pytorchs_linear(hub_env, model_dirs):
    from kernelhub.integrations.transformers import KernelConfig

    require_kernel("kernels-community/rmsnorm")
    fp32 = load(model_dirs["llama"], dtype=torch.float32, use_kernels=True)
    assert not _linear_paths(fp32) & set(kernels_in(fp32))
    off = load(model_dirs["llama"], dtype=torch.bfloat16, use_kernels=True,
               kernel_config=KernelConfig({"Linear": None}))
    used = kernels_in(off)
    assert not _linear_paths(off) & set(used)
    assert "kernels-community/rmsnorm" in used["model.layers.0"], used  # the rest stays
