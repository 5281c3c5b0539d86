"""The Transformers table's fused decoder kernels, end to end: ``use_kernels=True`` runs
rmsnorm's ``DecoderLayer`` and ``MLP`` on Llama/Qwen3 models (prefill and decode give
PyTorch's logits), and ``verify=True`` keeps the decoder layer PyTorch (its attention
updates the KV cache, so it cannot be run twice on one call) while the MLP is judged."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
from e2e import Workspace

transformers = pytest.importorskip("transformers")
torch = pytest.importorskip("torch")

SHAPE = dict(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
             num_attention_heads=4, num_key_value_heads=2, head_dim=16,
             max_position_embeddings=64)


@pytest.fixture
def integration(published: Workspace, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    from kernelhub.integrations import transformers as kh

    for key, value in published.env(cache="fused-cache").items():
        if key.startswith("KERNELHUB_"):
            monkeypatch.setenv(key, value)
    monkeypatch.delenv("USE_HUB_KERNELS", raising=False)
    kh.enable()
    yield
    kh.disable()


def _model(family: str):
    config_cls = {"llama": transformers.LlamaConfig, "qwen3": transformers.Qwen3Config}[family]
    torch.manual_seed(0)
    return transformers.AutoModelForCausalLM.from_config(config_cls(**SHAPE)).eval()


def _kernels(model) -> dict[str, str]:
    from kernelhub.layer import kernel_of

    return {n: str(k) for n, m in model.named_modules() if (k := kernel_of(m)) is not None}


def _generate(model, prompt):
    with torch.no_grad():
        return model.generate(prompt, max_new_tokens=6, do_sample=False,
                              output_logits=True, return_dict_in_generate=True)


@pytest.mark.parametrize("family", ["llama", "qwen3"])
def test_use_kernels_runs_the_fused_decoder_kernels(integration, family):
    reference = _model(family)
    model = _model(family)
    model.set_use_kernels(True)
    used = _kernels(model)
    for i in range(SHAPE["num_hidden_layers"]):
        assert "kernels-community/rmsnorm" in used[f"model.layers.{i}"], used
        assert "kernels-community/rmsnorm" in used[f"model.layers.{i}.mlp"], used
    prompt = torch.randint(0, SHAPE["vocab_size"], (1, 9),
                           generator=torch.Generator().manual_seed(2))
    ours, theirs = _generate(model, prompt), _generate(reference, prompt)
    assert torch.equal(ours.sequences, theirs.sequences)
    for a, b in zip(ours.logits, theirs.logits, strict=True):  # prefill, then decode steps
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)


def test_verify_keeps_the_decoder_layer_and_judges_the_mlp(integration, tmp_path, monkeypatch,
                                                           caplog):
    from kernelhub import verification_report
    from kernelhub.integrations.transformers import KernelConfig

    monkeypatch.setenv("KERNELHUB_CACHE", str(tmp_path / "cache"))
    reference = _model("llama")
    model = _model("llama")
    with caplog.at_level(logging.WARNING, logger="kernelhub.transformers"):
        model.set_use_kernels(True, KernelConfig(verify=True))
    used = _kernels(model)
    assert not any(name.startswith("model.layers.") and name.count(".") == 2 for name in used), used
    assert "kernels-community/rmsnorm" in used["model.layers.0.mlp"], used
    # Said once per process (this test may not be the first to meet it).
    assert "DecoderLayer" in _told()
    for record in caplog.records:
        if record.getMessage().startswith("DecoderLayer"):
            assert "keeping PyTorch's forward with verify=True" in record.getMessage()
    prompt = torch.randint(0, SHAPE["vocab_size"], (1, 9),
                           generator=torch.Generator().manual_seed(3))
    ours, theirs = _generate(model, prompt), _generate(reference, prompt)
    assert torch.equal(ours.sequences, theirs.sequences)
    names = {seen.name for _, seen in verification_report(model)}
    assert "MLP" in names, names


def _told() -> set[str]:
    """The layers already said to keep PyTorch under verify in this process."""
    from kernelhub.integrations.transformers import apply

    return apply._told_unverifiable
