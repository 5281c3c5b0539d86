"""Transformers' kernel protocol, served by kernelhub: what 5.25 documents for
``from_pretrained(kernels_mode=…)``, ``model.kernels_mode``, ``train()``/``eval()``,
``reset_kernels()``, ``use_kernels=False``, ``transformers.kernelize(model, mode,
kernel_config=, device_map=)``, ``USE_HUB_KERNELS`` read on every call, and the Trainer
switching kernels off before ``nn.DataParallel``. Items 5.24 does not have are skipped
on it, saying so; what both have runs on both (this directory runs on 5.24 too).
"""

from __future__ import annotations

import pytest
import torch
from seeds.seedkit import functions_in, ids, kernels_in, load, pytorch

transformers = pytest.importorskip("transformers")
HAS_KERNELS_MODE = isinstance(getattr(transformers.PreTrainedModel, "kernels_mode", None),
                              property)
needs_5_25 = pytest.mark.skipif(not HAS_KERNELS_MODE,
                                reason="this Transformers has no kernels_mode (before 5.25)")


def mode_class():
    """The Mode users import: ``kernels.Mode`` (the ecosystem's, or ours as ``kernels``)."""
    import kernels

    return kernels.Mode


def _act(model) -> bool:
    return any(n.endswith("act_fn") for n in kernels_in(model))


def _norm(model) -> bool:
    return any(n.endswith("input_layernorm") for n in kernels_in(model))


def _nothing(model) -> bool:
    return (not kernels_in(model) and not functions_in(model)
            and model.config._attn_implementation == "sdpa")


@needs_5_25
def test_kernels_mode_argument_property_and_train_eval(hub_env, model_dirs):
    Mode = mode_class()
    model = load(model_dirs["qwen3"], use_kernels=True, kernels_mode=Mode.TRAINING)
    assert model.kernels_mode == Mode.TRAINING
    assert _norm(model) and not _act(model)  # the activation kernels have no backward
    model.kernels_mode = Mode.INFERENCE  # the setter re-kernelizes
    assert _norm(model) and _act(model)
    model.train()  # train()/eval() go through kernels_mode
    assert model.kernels_mode == Mode.TRAINING and not _act(model)
    model.eval()
    assert model.kernels_mode == Mode.INFERENCE and _act(model)
    model.kernels_mode = None  # takes the kernels off
    assert model.use_kernels is False and _nothing(model)
    with pytest.raises(ValueError, match="not a Mode"):
        model.kernels_mode = "training"


@needs_5_25
def test_kernelhub_mode_is_accepted_and_reported_as_kernels_mode(hub_env, model_dirs):
    from kernelhub.layer import Mode as KernelhubMode

    model = load(model_dirs["qwen3"], use_kernels=True)
    model.kernels_mode = KernelhubMode.TRAINING
    assert not _act(model) and _norm(model)
    model.eval()
    assert model.kernels_mode == mode_class().INFERENCE


@needs_5_25
def test_reset_kernels_takes_everything_off_and_says_whether_any_was_on(hub_env, model_dirs):
    reference = pytorch(model_dirs["qwen3"])
    model = load(model_dirs["qwen3"], use_kernels=True)
    assert kernels_in(model) and functions_in(model)
    assert model.config._attn_implementation == "kernels-community/flash-attn2"
    assert model.reset_kernels() is True
    assert _nothing(model) and model.kernels_mode is None and model.use_kernels is False
    assert model.reset_kernels() is False
    with torch.no_grad():
        torch.testing.assert_close(model(ids()).logits, reference(ids()).logits)


def test_use_kernels_false_takes_the_kernels_off(hub_env, model_dirs):
    """``set_use_kernels(False)`` takes kernels off on every release; so does
    ``model.use_kernels = False`` on 5.25 (5.24's setter warns that it does nothing)."""
    model = load(model_dirs["qwen3"], use_kernels=True)
    assert kernels_in(model)
    model.set_use_kernels(False)
    assert _nothing(model) and model.use_kernels is False
    assert _nothing(pytorch(model_dirs["qwen3"]))
    if HAS_KERNELS_MODE:
        model.use_kernels = True
        assert kernels_in(model)
        model.use_kernels = False
        assert _nothing(model) and model.use_kernels is False


def test_transformers_kernelize_takes_mode_kernel_config_and_device_map(hub_env, model_dirs):
    from kernelhub.integrations.transformers import KernelConfig
    from transformers import kernelize

    Mode = mode_class()
    model = pytorch(model_dirs["qwen3"])
    assert _nothing(model)
    kernelize(model, mode=Mode.INFERENCE)
    assert _act(model) and _norm(model)
    if not HAS_KERNELS_MODE:
        return  # 5.24's kernelize(model, mode) has neither keyword
    kernelize(model, mode=Mode.INFERENCE, kernel_config=KernelConfig({"SiLU": None}),
              device_map={"": "cpu"})
    assert not _act(model) and _norm(model)
    assert model.kernels_mode is None  # as in 5.25: kernelize leaves the recorded mode alone


@needs_5_25
def test_use_hub_kernels_is_read_on_every_call(hub_env, model_dirs, monkeypatch):
    from kernelhub import settings
    from transformers import kernelize

    model = load(model_dirs["qwen3"], use_kernels=True)
    monkeypatch.setenv("USE_HUB_KERNELS", "0")
    monkeypatch.setattr(settings, "_warned_disabled", True)
    with pytest.raises(ValueError, match="USE_HUB_KERNELS=0"):
        kernelize(model, mode=mode_class().TRAINING)
    assert _act(model), "a refused kernelize changed the model"
    monkeypatch.delenv("USE_HUB_KERNELS")
    kernelize(model, mode=mode_class().TRAINING)
    assert not _act(model)


@needs_5_25
def test_trainer_takes_kernels_off_before_data_parallel(hub_env, model_dirs, tmp_path):
    """With more than one GPU and no distributed launch, Transformers' Trainer wraps the
    model in nn.DataParallel, whose replicas would all run the first device's kernels:
    it sets ``use_kernels = False`` first, which kernelhub serves by taking them off."""
    from transformers import Trainer, TrainingArguments

    model = load(model_dirs["qwen3"], use_kernels=True)
    trainer = Trainer(model=model, args=TrainingArguments(output_dir=str(tmp_path),
                                                          use_cpu=True, report_to=[]))
    trainer.args._n_gpu = 2  # what two visible GPUs would give; nothing runs on a GPU
    wrapped = trainer._wrap_model(model, training=True)
    assert isinstance(wrapped, torch.nn.DataParallel)
    assert model.use_kernels is False and _nothing(model)


def test_transformers_own_kernel_loads_come_from_kernelhub(hub_env):
    """What Transformers' quantization, MoE and model code load (``hub_kernels.get_kernel``,
    ``lazy_load_kernel``) comes from kernelhub's hub; a kernel it lacks is Transformers'
    FileNotFoundError fallback, not an error of ours."""
    from transformers.integrations import hub_kernels

    module = hub_kernels.get_kernel("kernels-community/activation", version=1)
    assert module.__name__.startswith("_activation_")
    with pytest.raises(FileNotFoundError, match="no repository kernels-community/finegrained-fp8"):
        hub_kernels.get_kernel("kernels-community/finegrained-fp8", version=4)
    assert hub_kernels.lazy_load_kernel("finegrained-fp8", mapping={}) is None
