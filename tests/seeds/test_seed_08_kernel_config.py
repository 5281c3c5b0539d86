"""SEEDS 8 — ``KernelConfig(kernel_mapping=…)``: layer and function keys, per-device
dicts, ``(spec, {"version": N})``, ``inherit_mapping=False``, disabling one kernel;
mistakes rejected before any download; a failed load suggests a newer version."""

from __future__ import annotations

import pytest
from kernelhub.integrations.transformers import KernelConfig, KernelConfigError
from seeds.seedkit import kernels_in, load, pytorch

SILU = "kernels-community/activation:Silu"


@pytest.mark.parametrize(("mapping", "message"), [
    ({"SiLU": {"tpu": SILU}}, "unknown device 'tpu'; valid devices: cpu, cuda, rocm, xpu, metal"),
    ({"SiLU": "activation-without-org"}, "expected 'org/repo:LayerName'"),
    ({"SiLU": (SILU, {"versoin": 1})}, "unknown metadata"),
    ({"SiLU": (SILU, {"version": 1, "revision": "main"})}, "not both"),
    ({"SiLU": "/abs/path:Silu"}, "use_local_kernel=True"),
])
def test_malformed_configs_are_rejected_at_construction(mapping, message):
    with pytest.raises(KernelConfigError, match=message.replace("(", r"\(")):
        KernelConfig(mapping)


def test_unknown_key_is_rejected_before_any_download(hub_env, model_dirs, monkeypatch, tmp_path):
    monkeypatch.setenv("KERNELHUB_CACHE", str(tmp_path / "cache"))
    with pytest.raises(KernelConfigError) as err:
        load(model_dirs["qwen3"], kernel_config=KernelConfig({"RMSNrom": "org/x:Y"}))
    assert "'RMSNrom'" in str(err.value) and "RMSNorm" in str(err.value) and "SiLU" in str(err.value)
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").rglob("metadata.json"))


def test_per_device_dict_and_version_metadata(hub_env, model_dirs):
    config = KernelConfig({"SiLU": {"cpu": (SILU, {"version": 1}), "cuda": "other/repo:Silu"}})
    model = load(model_dirs["qwen3"], kernel_config=config)
    assert all(r == "kernels-community/activation version 1:Silu"
               for n, r in kernels_in(model).items() if n.endswith("act_fn"))
    assert config.for_device("cuda")["SiLU"].source == "other/repo"  # kept, not applied here


def test_inherit_mapping_false_uses_only_given_entries(hub_env, model_dirs):
    model = load(model_dirs["qwen3"], kernel_config=KernelConfig({"SiLU": SILU},
                                                                 inherit_mapping=False))
    used = kernels_in(model)
    assert used and all(n.endswith("act_fn") for n in used)
    assert model.config._attn_implementation == "sdpa"


def test_one_kernel_can_be_disabled(hub_env, model_dirs):
    model = load(model_dirs["qwen3"], kernel_config=KernelConfig({"SiLU": None}))
    assert not any(n.endswith("act_fn") for n in kernels_in(model))


def test_failed_load_suggests_a_newer_version_that_exists(hub_env, model_dirs):
    with pytest.raises(KernelConfigError) as err:
        load(model_dirs["qwen3"], kernel_config=KernelConfig({"SiLU": (SILU, {"version": 0})}))
    text = str(err.value)
    assert "newer version" in text and "'version': 1" in text and "cpu" in text


def test_failed_load_names_no_version_that_does_not_exist(hub_env, model_dirs):
    with pytest.raises(KernelConfigError) as err:
        load(model_dirs["qwen3"], kernel_config=KernelConfig({"SiLU": (SILU, {"version": 7})}))
    text = str(err.value)
    assert "'version': 8" not in text
    assert "no version newer than 7" in text and "it has: version 1" in text


def test_version_after_at_sign_is_the_one_grammar(hub_env, model_dirs):
    config = KernelConfig({"SiLU": "kernels-community/activation@>=1.0,<2.0:Silu"})
    assert config.entries["SiLU"]["cpu"].version == ">=1.0,<2.0"
    model = load(model_dirs["qwen3"], kernel_config=config)
    assert any(n.endswith("act_fn") for n in kernels_in(model))
    with pytest.raises(KernelConfigError, match="given twice"):
        KernelConfig({"SiLU": ("kernels-community/activation@1:Silu", {"version": 1})})
    with pytest.raises(KernelConfigError, match="malformed"):
        KernelConfig({"SiLU": "kernels-community/activation@>=1.0,<<2:Silu"})


def test_autotune_judges_every_swapped_call_site_with_the_real_kernels(hub_env, model_dirs,
                                                                       monkeypatch, tmp_path):
    """KernelConfig(autotune=True): norms, activation, rotary and attention are each run
    against the PyTorch code they replace on the model's own shapes; whatever is chosen,
    the model's output matches PyTorch and every decision says why."""
    import torch
    from kernelhub import autotune_report
    from seeds.seedkit import ids

    monkeypatch.setenv("KERNELHUB_CACHE", str(tmp_path / "cache"))
    reference = pytorch(model_dirs["llama"])
    model = load(model_dirs["llama"], use_kernels=True, kernel_config=KernelConfig(autotune=True))
    with torch.no_grad():
        expected, got = reference(ids()).logits, model(ids()).logits
    torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-4)
    names = {seen.name for _, seen in autotune_report(model)}
    assert {"RMSNorm", "SiLU", "rotary_pos_emb", "attention"} <= names, names
    for where, seen in autotune_report(model):
        assert seen.decision.reason.startswith("correct"), (where, seen.decision)
    assert any((tmp_path / "cache" / "autotune").rglob("*.json")), "decisions were not stored"


def test_autotune_report_lists_only_this_models_decisions(hub_env, model_dirs,
                                                          monkeypatch, tmp_path):
    """Function and attention call sites serve every model of the process; a model's
    report still lists only the decisions its own calls used."""
    import torch
    from kernelhub import autotune_report
    from seeds.seedkit import ids

    monkeypatch.setenv("KERNELHUB_CACHE", str(tmp_path / "cache"))
    short, long = (load(model_dirs["llama"], use_kernels=True,
                        kernel_config=KernelConfig(autotune=True)) for _ in range(2))
    with torch.no_grad():
        short(ids(1, 4))
        long(ids(1, 40))

    def buckets(model, name):
        return {seen.bucket for _, seen in autotune_report(model) if seen.name == name}

    for name in ("rotary_pos_emb", "attention", "RMSNorm"):
        assert buckets(short, name), name
        assert buckets(short, name).isdisjoint(buckets(long, name)), (name, buckets(long, name))
    assert autotune_report(pytorch(model_dirs["llama"])) == []


def test_autotuned_functions_reach_only_their_model(hub_env, model_dirs, monkeypatch, tmp_path):
    """Issue 22: Transformers' attention registry and the family's rotary global are the
    process's. A model loaded with autotuning runs its attention and rotary through the
    autotuner; models of the same family loaded with plain use_kernels=True, before or
    after it, run the kernels as they are — and loading them takes nothing from it."""
    import torch
    from kernelhub import autotune_report
    from kernelhub.layer.autotune.call_site import site_of
    from seeds.seedkit import ids
    from transformers import AttentionInterface

    monkeypatch.setenv("KERNELHUB_CACHE", str(tmp_path / "cache"))
    before = load(model_dirs["llama"], use_kernels=True)
    tuned = load(model_dirs["llama"], use_kernels=True, kernel_config=KernelConfig(autotune=True))
    with torch.no_grad():
        before(ids())
        after = load(model_dirs["llama"], use_kernels=True)
        tuned(ids())
        after(ids())
    assert {"rotary_pos_emb", "attention"} <= {s.name for _, s in autotune_report(tuned)}
    assert autotune_report(before) == [], "a model loaded earlier ran the autotuned functions"
    assert autotune_report(after) == [], "a model loaded later ran the autotuned functions"
    implementation = tuned.config._attn_implementation
    assert before.config._attn_implementation == implementation
    assert site_of(AttentionInterface._global_mapping[implementation]) is None, (
        "the process-wide attention registry holds the autotuned function")
