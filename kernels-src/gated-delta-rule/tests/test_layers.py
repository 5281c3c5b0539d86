"""The ``Qwen3_5GatedDeltaNet`` layer swapped into a tiny Qwen3.5 by ``kernelhub.kernelize``
from the local build (``LocalLayerRepository``): prefill, cached decode and gradients
equal the model's own PyTorch path within the dtype's tolerance.
"""

from __future__ import annotations

import copy
import os

import pytest
import torch

transformers = pytest.importorskip("transformers")
kernelhub = pytest.importorskip("kernelhub")

from kernelhub import LocalFuncRepository, LocalLayerRepository, Mode, kernelize, use_kernel_mapping  # noqa: E402
from kernelhub.layer import get_kernelized_layers, kernel_of  # noqa: E402
from transformers.models.qwen3_5 import Qwen3_5ForCausalLM, Qwen3_5TextConfig  # noqa: E402

VARIANT = os.environ.get("KERNELHUB_TEST_VARIANT")
pytestmark = pytest.mark.skipif(
    VARIANT is None, reason="needs the built variant (KERNELHUB_TEST_VARIANT)"
)


def tiny_model(dtype: torch.dtype) -> Qwen3_5ForCausalLM:
    torch.manual_seed(0)
    config = Qwen3_5TextConfig(
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
    return Qwen3_5ForCausalLM(config).to(dtype).eval()


def kernelized(model: Qwen3_5ForCausalLM, mode: Mode) -> Qwen3_5ForCausalLM:
    swapped = copy.deepcopy(model)
    mapping = {
        "Qwen3_5GatedDeltaNet": {
            "cpu": LocalLayerRepository(VARIANT, layer_name="Qwen3_5GatedDeltaNet")
        }
    }
    with use_kernel_mapping(mapping, inherit_mapping=False):
        kernelize(swapped, mode=mode, device="cpu")
    assert kernel_of(swapped.model.layers[0].linear_attn) is not None, "the layer was not swapped"
    return swapped


TOLERANCE = {torch.float32: dict(atol=1e-4, rtol=1e-3), torch.bfloat16: dict(atol=5e-2, rtol=5e-2)}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["float32", "bfloat16"])
def test_prefill_and_cached_decode_match_pytorch(dtype):
    model = tiny_model(dtype)
    ours = kernelized(model, Mode.INFERENCE)
    ids = torch.randint(0, 96, (2, 70), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        want = model(ids).logits
        got = ours(ids).logits
    torch.testing.assert_close(got.float(), want.float(), **TOLERANCE[dtype])
    generate = dict(max_new_tokens=6, do_sample=False, use_cache=True)
    assert torch.equal(
        ours.generate(ids[:1, :20], **generate), model.generate(ids[:1, :20], **generate)
    )


def test_training_gradients_match_pytorch():
    model = tiny_model(torch.float32).train()
    ours = kernelized(model, Mode.TRAINING)
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
