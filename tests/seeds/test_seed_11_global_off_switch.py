"""SEEDS 11 — ``USE_HUB_KERNELS=0`` (or OFF, NO) disables hub kernels everywhere."""

from __future__ import annotations

import warnings

import pytest
from kernelhub import settings
from seeds.seedkit import kernels_in, load


@pytest.mark.parametrize("value", ["0", "OFF", "no"])
def test_off_switch_keeps_pytorch(hub_env, model_dirs, monkeypatch, value):
    monkeypatch.setenv("USE_HUB_KERNELS", value)
    monkeypatch.setattr(settings, "_warned_disabled", False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = load(model_dirs["qwen3"], use_kernels=True,
                     attn_implementation="kernels-community/flash-attn2")
    assert kernels_in(model) == {}
    assert model.config._attn_implementation == "sdpa"
    told = [w for w in caught if "USE_HUB_KERNELS" in str(w.message)]
    assert len(told) == 1
