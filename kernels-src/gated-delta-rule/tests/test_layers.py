"""The gated delta net layers swapped into tiny models by ``kernelhub.kernelize`` from the
local build (``LocalLayerRepository``): ``Qwen3_5GatedDeltaNet`` in a Qwen3.5 and
``Qwen3NextGatedDeltaNet`` (per-key-head projection layout) in a Qwen3-Next. Prefill, cached
decode and gradients equal the model's own PyTorch path within the dtype's tolerance.
"""

from __future__ import annotations

import copy
import os

import pytest
import torch

transformers = pytest.importorskip("transformers")
kernelhub = pytest.importorskip("kernelhub")

from kernelhub import LocalFuncRepository, LocalLayerRepository, Mode, kernelize, use_kernel_mapping  # noqa: E402
from kernelhub.integrations.transformers import patch  # noqa: E402
from kernelhub.layer import get_kernelized_layers, kernel_of  # noqa: E402
from transformers.models.qwen3_5 import Qwen3_5ForCausalLM, Qwen3_5TextConfig  # noqa: E402
from transformers.models.qwen3_next import (  # noqa: E402
    Qwen3NextConfig,
    Qwen3NextForCausalLM,
    modeling_qwen3_next,
)

VARIANT = os.environ.get("KERNELHUB_TEST_VARIANT")
pytestmark = pytest.mark.skipif(
    VARIANT is None, reason="needs the built variant (KERNELHUB_TEST_VARIANT)"
)

_LINEAR = dict(
    vocab_size=96,
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    layer_types=["linear_attention", "full_attention"],
    num_attention_heads=2,
    num_key_value_heads=1,
    head_dim=32,
    linear_num_key_heads=2,
    linear_num_value_heads=4,
    linear_key_head_dim=16,
    linear_value_head_dim=24,
    linear_conv_kernel_dim=4,
)

FAMILIES = {
    "Qwen3_5GatedDeltaNet": lambda: Qwen3_5ForCausalLM(Qwen3_5TextConfig(**_LINEAR)),
    "Qwen3NextGatedDeltaNet": lambda: Qwen3NextForCausalLM(
        Qwen3NextConfig(
            **_LINEAR,
            num_experts=4,
            num_experts_per_tok=2,
            moe_intermediate_size=32,
            shared_expert_intermediate_size=32,
        )
    ),
}
"""Layer name → a tiny causal LM with one linear-attention and one full-attention layer."""


def tiny_model(dtype: torch.dtype, layer: str = "Qwen3_5GatedDeltaNet") -> torch.nn.Module:
    torch.manual_seed(0)
    return FAMILIES[layer]().to(dtype).eval()


def kernelized(model: torch.nn.Module, mode: Mode, layer: str = "Qwen3_5GatedDeltaNet"):
    swapped = copy.deepcopy(model)
    mapping = {layer: {"cpu": LocalLayerRepository(VARIANT, layer_name=layer)}}
    with use_kernel_mapping(mapping, inherit_mapping=False):
        kernelize(swapped, mode=mode, device="cpu")
    assert kernel_of(swapped.model.layers[0].linear_attn) is not None, "the layer was not swapped"
    return swapped


@pytest.fixture(autouse=True, scope="module")
def _qwen3_next_marked():
    """Transformers registers no hub name for Qwen3-Next's layer; kernelhub's table marks
    the class (as the import hook does for a user)."""
    patch.mark_module(modeling_qwen3_next)
    assert modeling_qwen3_next.Qwen3NextGatedDeltaNet.kernel_layer_name == "Qwen3NextGatedDeltaNet"


TOLERANCE = {torch.float32: dict(atol=1e-4, rtol=1e-3), torch.bfloat16: dict(atol=5e-2, rtol=5e-2)}


@pytest.mark.parametrize("layer", list(FAMILIES))
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["float32", "bfloat16"])
def test_prefill_and_cached_decode_match_pytorch(dtype, layer):
    model = tiny_model(dtype, layer)
    ours = kernelized(model, Mode.INFERENCE, layer)
    ids = torch.randint(0, 96, (2, 70), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        want = model(ids).logits
        got = ours(ids).logits
    torch.testing.assert_close(got.float(), want.float(), **TOLERANCE[dtype])
    generate = dict(max_new_tokens=6, do_sample=False, use_cache=True)
    assert torch.equal(
        ours.generate(ids[:1, :20], **generate), model.generate(ids[:1, :20], **generate)
    )


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["float32", "bfloat16"])
def test_qwen3_next_layer_matches_pytorch_with_cache(dtype):
    """The layer alone, on one model's cache each: a 40-token prefill, then decode steps
    (the conv and recurrent states advanced in place) give PyTorch's outputs."""
    from transformers.cache_utils import DynamicCache

    model = tiny_model(dtype, "Qwen3NextGatedDeltaNet")
    ours = kernelized(model, Mode.INFERENCE, "Qwen3NextGatedDeltaNet")
    theirs_layer, our_layer = model.model.layers[0].linear_attn, ours.model.layers[0].linear_attn
    caches = [DynamicCache(config=m.config) for m in (model, ours)]
    x = torch.randn(2, 41, 64, generator=torch.Generator().manual_seed(6)).to(dtype)
    tolerance = TOLERANCE[dtype]
    with torch.no_grad():
        for step in (slice(0, 40), slice(40, 41)):
            want = theirs_layer(x[:, step], cache=caches[0])
            got = our_layer(x[:, step], cache=caches[1])
            torch.testing.assert_close(got.float(), want.float(), **tolerance)
        for i in range(3):  # further decode steps on the states both advanced
            step = torch.randn(2, 1, 64, generator=torch.Generator().manual_seed(7 + i)).to(dtype)
            torch.testing.assert_close(
                our_layer(step, cache=caches[1]).float(),
                theirs_layer(step, cache=caches[0]).float(),
                **tolerance,
            )


@pytest.mark.parametrize("layer", list(FAMILIES))
def test_training_gradients_match_pytorch(layer):
    model = tiny_model(torch.float32, layer).train()
    ours = kernelized(model, Mode.TRAINING, layer)
    ids = torch.randint(0, 96, (2, 33), generator=torch.Generator().manual_seed(4))
    for m in (model, ours):
        m(ids, labels=ids).loss.backward()
    for (name, p), q in zip(model.named_parameters(), ours.parameters(), strict=True):
        assert q.grad is not None, name
        torch.testing.assert_close(q.grad, p.grad, atol=1e-4, rtol=1e-3, msg=name)


def test_function_entries_swap_the_models_fallbacks():
    """Transformers also maps the two functions by name (``use_kernelized_func``): with
    only those entries the model's own layer runs, calling this kernel's functions."""
    model = tiny_model(torch.float32)
    swapped = copy.deepcopy(model)
    names = ("chunk_gated_delta_rule", "fused_recurrent_gated_delta_rule")
    mapping = {name: {"cpu": LocalFuncRepository(VARIANT, func_name=name)} for name in names}
    with use_kernel_mapping(mapping, inherit_mapping=False):
        kernelize(swapped, mode=Mode.INFERENCE, device="cpu")
    layer = swapped.model.layers[0].linear_attn
    assert kernel_of(layer) is None  # the layer itself keeps PyTorch's forward
    funcs = {func for (_, func) in get_kernelized_layers(swapped).funcs}
    assert set(names) <= funcs, f"both functions should run this kernel, got {funcs}"
    ids = torch.randint(0, 96, (1, 40), generator=torch.Generator().manual_seed(5))
    generate = dict(max_new_tokens=5, do_sample=False, use_cache=True)
    with torch.no_grad():
        torch.testing.assert_close(
            swapped(ids).logits, model(ids).logits, **TOLERANCE[torch.float32]
        )
    assert torch.equal(swapped.generate(ids, **generate), model.generate(ids, **generate))
