"""SEEDS 5 — version pins in attention strings: ``org/repo@v1.0.0`` (tag or branch) and
``org/repo@>=1.0,<2.0`` (semantic-version constraint)."""

from __future__ import annotations

import re

import pytest
import torch
from e2e import RELEASES
from kernelhub.integrations.transformers import AttentionKernelError, attention
from seeds.seedkit import ids, load, require_kernel


@pytest.mark.parametrize("pin", [f"@v{RELEASES['activation']}", "@v1", "@>=1.0,<2.0"])
def test_pinned_strings_resolve_on_the_hub(hub_env, pin):
    """Resolution of the pin is the same code for every kernel; activation is published."""
    request = attention.parse(f"kernels-community/activation{pin}:silu")
    assert request.version == pin[1:]
    kernel, fn = attention.load(request)
    assert fn is kernel.silu


def test_unsatisfiable_pin_lists_what_exists(hub_env):
    request = attention.parse("kernels-community/activation@>=2.0,<3.0:silu")
    with pytest.raises(AttentionKernelError, match=re.escape(f"v{RELEASES['activation']}")):
        attention.load(request)


@pytest.mark.parametrize("pin", [f"@v{RELEASES['flash-attn2']}", "@>=4.0,<5.0"])
def test_pinned_attention_kernel_runs_in_the_model(hub_env, model_dirs, pin):
    require_kernel("kernels-community/flash-attn2")
    name = f"kernels-community/flash-attn2{pin}"
    model = load(model_dirs["qwen3"], attn_implementation=name)
    assert model.config._attn_implementation == name
    with torch.no_grad():
        assert model(ids()).logits.isfinite().all()


def test_an_unpinned_string_loads_the_major_transformers_pins(hub_env):
    """``kernels-community/flash-attn2`` loads major 4 (Transformers' pin) and keeps its
    name; a repository Transformers does not pin loads the hub's newest major."""
    request = attention.parse("kernels-community/flash-attn2")
    assert (request.name, request.version, request.default_version) == (
        "kernels-community/flash-attn2", None, 4)
    assert attention.parse("someone/attention").default_version is None
