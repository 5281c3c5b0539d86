"""The table entries a machine declines before kernelize (integrations.transformers.machine):
rules keyed on CPU flags, dtype and the model's shape; the user's explicit names kept; each
decline said once; and use_kernels on a real (tiny) Transformers model loading nothing that
a rule declined."""

from __future__ import annotations

import logging

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from kernelhub.integrations.transformers import machine  # noqa: E402
from kernelhub.integrations.transformers.machine import (  # noqa: E402
    DECLINES,
    Decline,
    declined_names,
    drop_declined,
)
from kernelhub.system import cpu_flags  # noqa: E402

AVX2 = frozenset({"avx2", "fma"})
AMX = AVX2 | {"avx512f", "avx512_bf16", "amx_tile", "amx_bf16"}


def tiny_llama(dtype: torch.dtype = torch.float32) -> torch.nn.Module:
    config = transformers.LlamaConfig(hidden_size=64, intermediate_size=128,
                                      num_hidden_layers=1, num_attention_heads=4,
                                      num_key_value_heads=2, vocab_size=128)
    return transformers.LlamaForCausalLM(config).to(dtype).eval()


def test_a_rule_applies_only_where_all_its_conditions_hold():
    config = tiny_llama().config
    rule = Decline(("MLP",), "slower here", dtypes=("bfloat16",), with_flags=("amx_bf16",),
                   without_flags=("avx512_fp16",), shape=lambda c: c.hidden_size >= 64)
    assert rule.applies(AMX, "bfloat16", config)
    assert not rule.applies(AMX, "float32", config)  # dtype
    assert not rule.applies(AVX2, "bfloat16", config)  # a flag missing
    assert not rule.applies(AMX | {"avx512_fp16"}, "bfloat16", config)  # a flag present
    config.hidden_size = 32
    assert not rule.applies(AMX, "bfloat16", config)  # shape


def test_the_first_rule_that_names_a_name_gives_its_reason():
    rules = (Decline(("MLP",), "first", with_flags=("amx_bf16",)),
             Decline(("MLP", "RMSNorm"), "second"))
    assert declined_names(rules, AMX, "float32", None) == {"MLP": "first", "RMSNorm": "second"}
    assert declined_names(rules, AVX2, "float32", None) == {"MLP": "second",
                                                            "RMSNorm": "second"}


def test_declined_entries_are_dropped_said_once_and_explicit_ones_kept(monkeypatch, caplog):
    monkeypatch.setattr(machine, "_told", set())
    rules = (Decline(("MLP", "RMSNorm", "experts"), "measured slower", dtypes=("float32",)),)
    model = tiny_llama()
    entries = {"MLP": [1], "RMSNorm": [2], "SiLU": [3], "experts": [4]}
    with caplog.at_level(logging.INFO, logger="kernelhub.transformers"):
        removed = drop_declined(entries, {"RMSNorm"}, model, "cpu", rules)
        drop_declined({"MLP": [1]}, set(), model, "cpu", rules)  # a second model: silent
    assert removed == {"MLP": "measured slower", "experts": "measured slower"}
    assert entries == {"RMSNorm": [2], "SiLU": [3]}
    lines = [r.getMessage() for r in caplog.records]
    assert lines == ["MLP: keeping PyTorch on this CPU (measured slower)",
                     "experts: keeping PyTorch on this CPU (measured slower)"]


def test_no_rule_applies_off_the_cpu_or_to_another_dtype():
    rules = (Decline(("MLP",), "slower", dtypes=("bfloat16",)),)
    entries = {"MLP": [1]}
    assert drop_declined(entries, set(), tiny_llama(torch.bfloat16), "cuda", rules) == {}
    assert drop_declined(entries, set(), tiny_llama(torch.float32), "cpu", rules) == {}
    assert entries == {"MLP": [1]}


def test_every_shipped_rule_is_well_formed():
    from kernelhub.integrations.transformers.table import DEFAULT_MAPPING, EXPERTS_KEY

    for rule in DECLINES:
        assert rule.why and len(rule.why.splitlines()) == 1, rule
        assert set(rule.names) <= set(DEFAULT_MAPPING) | {EXPERTS_KEY}, rule
        assert set(rule.dtypes) <= {"float32", "bfloat16", "float16"}, rule


def test_use_kernels_loads_nothing_a_rule_declines(monkeypatch, caplog, tmp_path):
    """End to end through the Transformers seam: with every table name declined on this
    machine, kernelize tries to load no kernel (an empty hub: any attempt would be
    reported as a kernel that did not load) and the model's output is PyTorch's."""
    from kernelhub.integrations import transformers as kh
    from kernelhub.integrations.transformers.table import DEFAULT_MAPPING

    monkeypatch.setenv("KERNELHUB_HUB", str(tmp_path / "hub"))
    monkeypatch.setenv("KERNELHUB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(machine, "_told", set())
    monkeypatch.setattr(machine, "DECLINES", (
        Decline(tuple(DEFAULT_MAPPING), "declined by this test", dtypes=("float32",),
                with_flags=tuple(sorted(cpu_flags()))),))
    model = tiny_llama()
    ids = torch.arange(8).reshape(1, 8)
    with torch.no_grad():
        expected = model(ids).logits
    kh.enable()
    try:
        with caplog.at_level(logging.INFO, logger="kernelhub.transformers"):
            kh.kernelize(model)
            with torch.no_grad():
                got = model(ids).logits
    finally:
        kh.disable()
    messages = [r.getMessage() for r in caplog.records]
    assert not any("did not load" in m for m in messages), messages
    assert "RMSNorm: keeping PyTorch on this CPU (declined by this test)" in messages
    torch.testing.assert_close(got, expected, rtol=0, atol=0)


def test_the_amx_rule_declines_the_fused_mlp_on_amx_only():
    """Issue 32's rule fires on an AMX CPU's flags, in either dtype, and on no CPU without
    AMX (an AVX-512 server without AMX; this machine's kind, AVX2 and FMA)."""
    config = tiny_llama().config
    avx512 = AVX2 | {"avx512f", "avx512bw", "avx512_bf16"}
    for dtype in ("float32", "bfloat16"):
        assert declined_names(DECLINES, AMX, dtype, config) == {
            "DecoderLayer": machine.AMX_FUSED_MLP.why, "MLP": machine.AMX_FUSED_MLP.why}
        assert declined_names(DECLINES, avx512, dtype, config) == {}
    assert declined_names(DECLINES, AVX2, "bfloat16", config) == {}
    if "amx_bf16" not in cpu_flags():
        model = tiny_llama(torch.bfloat16)
        entries = {"DecoderLayer": [1], "MLP": [2], "RMSNorm": [3]}
        assert drop_declined(entries, set(), model, "cpu") == {}
        assert set(entries) == {"DecoderLayer", "MLP", "RMSNorm"}


def test_avx2_cpus_keep_the_fused_mlp_in_both_dtypes(monkeypatch):
    """This project's machine kind (AMD EPYC, avx2 fma, no AVX-512) declines nothing: the
    float32 rule it had (swiglu_mlp's op 0.68-0.92x the BLAS GEMV) was lifted when the
    op's loop came to read four weight rows a pass (rmsnorm 1.3.0, docs/decisions.md)."""
    config = tiny_llama().config
    for dtype in ("float32", "bfloat16"):
        assert declined_names(DECLINES, AVX2, dtype, config) == {}
    monkeypatch.setattr(machine, "cpu_flags", lambda: AVX2)
    entries = {"DecoderLayer": [1], "MLP": [2], "RMSNorm": [3]}
    assert drop_declined(entries, set(), tiny_llama(), "cpu") == {}
    assert set(entries) == {"DecoderLayer", "MLP", "RMSNorm"}


def test_experts_is_a_kernel_config_key_where_the_model_has_experts_modules():
    """So a user can name the experts kernel explicitly (which keeps it over a machine
    rule), and a model without experts modules refuses the key in one line."""
    from kernelhub.integrations.transformers.kernel_config import (
        KernelConfig,
        KernelConfigError,
    )

    config = transformers.MixtralConfig(hidden_size=64, intermediate_size=64,
                                        num_hidden_layers=1, num_attention_heads=4,
                                        num_key_value_heads=2, num_local_experts=4,
                                        vocab_size=128)
    mixtral = transformers.MixtralForCausalLM(config).eval()
    named = KernelConfig({"experts": "kernels-community/moe:experts_forward"})
    assert "experts" in named.valid_keys(mixtral)
    named.check_keys(mixtral)
    assert "experts" not in named.valid_keys(tiny_llama())
    with pytest.raises(KernelConfigError, match="'experts' is not a layer or function"):
        named.check_keys(tiny_llama())
