"""The table is keyed by layer name: every model in the installed Transformers whose classes
register a name kernelhub serves on the CPU gets that kernel, whatever its model type.

The walk reads which names each ``modeling_*.py`` registers
(``@use_kernel_forward_from_hub("…")``, ``@use_kernel_func_from_hub("…")``,
``@use_experts_implementation``), builds the model from a tiny version of its own config
(random weights: nothing is downloaded), runs PyTorch, kernelizes, and checks that every
module registering a served name now runs a hub kernel (experts: the model switched to
the experts kernel) and that the output equals PyTorch's. A model the generic tiny config
cannot build or PyTorch cannot run (multimodal inputs, derived sizes), or a name whose
kernel this session's hub lacks, is skipped with the reason; the MoE and norm families of
issue 31 must build.
"""

from __future__ import annotations

import contextlib
import gc
import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import torch
from seeds.seedkit import functions_in, kernels_in

transformers = pytest.importorskip("transformers")

from packaging.version import Version  # noqa: E402

if Version(transformers.__version__).release < (5, 25):
    pytest.skip("the layer-name table is written for Transformers 5.25's registered names; "
                f"{transformers.__version__} is walked by the seed tests' own families only "
                "(open: laguna and qwen3_5 differ there)", allow_module_level=True)

_REGISTERS = re.compile(r'use_kernel_(?:forward|func)_from_hub\("(\w+)"\)|(@use_experts_implementation)')
_NOT_WALKED = {"attention", "MLP", "DecoderLayer", "SiLU", "GeLU", "GeluTanh", "NewGELU",
               "FastGELU", "QuickGELU"}
"""Served names not walked here: activations (every model has them, tested elsewhere),
attention (a separate switch) and the per-family fused layers (the table's own families)."""

MUST_BUILD = ("qwen3_moe", "mixtral", "qwen3_5_moe", "qwen3_5", "qwen3_next", "olmoe",
              "qwen2_moe", "laguna")
"""Families whose tiny model must build and be served (a skip there fails)."""

MAX_PARAMETERS = 5_000_000
"""A tiny model has well under a million parameters; a config whose sizes live under names
the shrink does not know would build a real-sized model (gigabytes on a 24 GiB machine)."""

_TINY: dict[str, Any] = dict(
    vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
    num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=64,
    moe_intermediate_size=32, shared_expert_intermediate_size=32, num_experts=8,
    num_local_experts=8, n_routed_experts=8, num_experts_per_tok=2, n_shared_experts=1,
    first_k_dense_replace=0, linear_num_key_heads=2, linear_num_value_heads=4,
    linear_key_head_dim=16, linear_value_head_dim=16, layer_types=None, tie_word_embeddings=False,
)


_MLA_TINY: dict[str, Any] = dict(
    num_key_value_heads=4, linear_num_heads=4, linear_head_dim=16, kv_lora_rank=32,
    qk_rope_head_dim=16, qk_nope_head_dim=16, v_head_dim=16)
"""Multi-head latent attention at the tiny size: as many key/value heads as query heads (the
generic two does not divide into MLA's per-head projections), rotary width = head_dim."""

FAMILY_TINY: dict[str, tuple[dict[str, Any], str]] = {
    "bailing_hybrid": (dict(_MLA_TINY, num_experts_per_token=2, num_expert_group=1,
                            topk_group=1),
                       "MLA heads and linear-attention heads under their own names; routing "
                       "groups over 8 experts"),
    "kimi_linear": (dict(_MLA_TINY, num_experts_per_token=2, num_expert_group=1, topk_group=1),
                    "MLA heads and KDA heads under their own names"),
    "glm5_next": (dict(_MLA_TINY, hidden_size=64, num_attention_heads=4, q_lora_rank=32,
                       qk_rope_head_dim=0, index_head_dim=16, index_n_heads=2, index_topk=16),
                  "its config validates heads and the indexer's top-k (a multiple of its "
                  "16-token pool) when built, so they are given to the constructor"),
    "qwen4_exp": (dict(hidden_size=64, num_attention_heads=4, num_key_value_heads=2,
                       head_dim=16, num_experts=8, num_experts_per_tok=2,
                       moe_intermediate_size=32, shared_expert_intermediate_size=32,
                       indexer_n_heads=2, indexer_kv_heads=1, indexer_head_dim=16,
                       indexer_budget=8, indexer_compress_ratio=4, hc_lowrank=16),
                  "its indexed-attention layers need the sparse-attention indexer's sizes, "
                  "which default to unset"),
    "zamba2": (dict(hidden_size=64, num_hidden_layers=2,
                    layers_block_type=["linear_attention", "hybrid"], num_attention_heads=4,
                    num_key_value_heads=4, n_mamba_heads=4, mamba_d_state=16,
                    intermediate_size=128, vocab_size=128),
               "Mamba head width, attention widths and the hybrid layer ids are derived from "
               "hidden_size and the layer list when the config is built"),
}
"""Per-family tiny sizes where the generic shrink cannot reach (model_type → (constructor
arguments, why)): given to the config's constructor, so the sizes it derives follow, and set
again after the shrink, so they win over its generic values."""


def served_names() -> set[str]:
    from kernelhub.integrations.transformers.table import DEFAULT_MAPPING

    return {name for name, devices in DEFAULT_MAPPING.items() if "cpu" in devices} - _NOT_WALKED


@cache
def registering_models() -> dict[str, set[str]]:
    """model_type → the served names its modeling code registers (or kernelhub's table puts
    on its classes, as it does for Qwen3-Next's gated delta net)."""
    from kernelhub.integrations.transformers.table import LAYER_CLASSES

    served, found = served_names(), {}
    for path in sorted((Path(transformers.__file__).parent / "models").glob("*/modeling_*.py")):
        names = {m.group(1) or "experts" for m in _REGISTERS.finditer(path.read_text())}
        module = f"transformers.models.{path.parent.name}.{path.stem}."
        names |= {name for cls, name in LAYER_CLASSES.items() if cls.startswith(module)}
        if names & served:
            found[path.parent.name] = names & served
    return found


def _shrink(config: Any) -> None:
    for key, value in _TINY.items():
        if key == "layer_types" and getattr(config, "layer_types", None) is not None:
            kinds = list(dict.fromkeys(config.layer_types))  # one layer of each kind
            with contextlib.suppress(AttributeError, TypeError, ValueError):
                config.layer_types = kinds
                config.num_hidden_layers = len(kinds)
        elif key != "layer_types" and hasattr(config, key) and not isinstance(
                getattr(config, key), (list, dict)):
            # a derived (read-only) setting is left to the config, which computes it
            with contextlib.suppress(AttributeError, TypeError, ValueError):
                setattr(config, key, value)
    for key in ("mlp_only_layers",):
        if isinstance(getattr(config, key, None), list):
            setattr(config, key, [])
    for key in ("pad_token_id", "bos_token_id", "eos_token_id"):  # token ids past the tiny vocab
        value = getattr(config, key, None)
        if isinstance(value, int) and value >= _TINY["vocab_size"]:
            with contextlib.suppress(AttributeError, TypeError, ValueError):
                setattr(config, key, _TINY["vocab_size"] - 1)


def tiny_model(model_type: str) -> torch.nn.Module:
    """The causal LM (else the base model) of ``model_type`` at a tiny size; its text model
    where the family is multimodal."""
    from transformers import AutoModel, AutoModelForCausalLM
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    kind = f"{model_type}_text" if f"{model_type}_text" in CONFIG_MAPPING else model_type
    if kind not in CONFIG_MAPPING:
        pytest.skip(f"{model_type}: no config class registered")
    overrides = FAMILY_TINY.get(model_type, ({}, ""))[0]
    config = CONFIG_MAPPING[kind](**overrides)
    _shrink(config)
    for key, value in overrides.items():
        setattr(config, key, value)
    torch.manual_seed(0)
    errors = []
    for auto in (AutoModelForCausalLM, AutoModel):
        try:
            with torch.device("meta"):  # sized first: a config the shrink missed stays huge
                size = sum(p.numel() for p in auto.from_config(config).parameters())
            if size > MAX_PARAMETERS:
                pytest.skip(f"{model_type}: the generic tiny config leaves {size:,} parameters "
                            f"(over {MAX_PARAMETERS:,}: sizes under names it does not shrink)")
            model = auto.from_config(config, torch_dtype=torch.float32)
        except pytest.skip.Exception:
            raise
        except Exception as e:  # any failure means the generic tiny config does not fit
            errors.append(f"{auto.__name__}: {type(e).__name__}: {str(e)[:120]}")
            continue
        return model.eval()
    pytest.skip(f"{model_type}: the generic tiny config does not build it ({'; '.join(errors)})")


def _output(model: torch.nn.Module, ids: torch.Tensor) -> torch.Tensor:
    out = model(input_ids=ids, use_cache=False)
    return out.logits if hasattr(out, "logits") else out.last_hidden_state


KNOWN_MISMATCH: dict[str, str] = {}
"""Families whose kernelized output is known to differ: strict xfails, so a fix is noticed."""


def _walked(model_type: str) -> Any:
    reason = KNOWN_MISMATCH.get(model_type)
    marks = [pytest.mark.xfail(reason=reason, strict=True)] if reason else []
    return pytest.param(model_type, marks=marks)


@pytest.mark.parametrize("model_type", [_walked(t) for t in sorted(registering_models())])
def test_every_model_registering_a_served_name_gets_its_kernel(hub_env, model_type):
    from kernelhub import Mode, has_kernel
    from kernelhub.integrations import transformers as kh
    from kernelhub.integrations.transformers.experts import experts_modules
    from kernelhub.integrations.transformers.machine import DECLINES, declined_names
    from kernelhub.integrations.transformers.table import (
        DEFAULT_MAPPING,
        FUNCTION_NAMES,
        registered_names,
    )
    from kernelhub.system import cpu_flags


    registered = registering_models()[model_type]
    names = {n for n in registered if has_kernel(DEFAULT_MAPPING[n]["cpu"][0].repo_id)}
    if not names:  # checked name by name below; a model with none left is skipped
        pytest.skip(f"{model_type}: no kernel for {sorted(registered)} is published to the "
                    "test hub (not in kernels.toml yet, or no build for this system)")
    ids = torch.randint(3, 120, (1, 10), generator=torch.Generator().manual_seed(0))
    try:
        model = tiny_model(model_type)
        with torch.no_grad():
            reference = _output(model, ids)
        if not experts_modules(model) and not set(registered_names(model).values()) & names:
            pytest.skip(f"{model_type}: the tiny config has no layer registering {names}")
    except pytest.skip.Exception:
        if model_type in MUST_BUILD:
            raise AssertionError(f"{model_type} must build with the tiny config") from None
        raise
    except Exception as e:  # PyTorch itself cannot run the generic tiny config
        if model_type in MUST_BUILD:
            raise
        pytest.skip(f"{model_type}: PyTorch does not run the generic tiny config "
                    f"({type(e).__name__}: {str(e)[:120]})")
    kh.kernelize(model, mode=Mode.INFERENCE)
    replaced = kernels_in(model)
    marked = {path: name for path, name in registered_names(model).items() if name in names}
    functions = functions_in(model)
    for path, name in marked.items():
        where = functions if name in FUNCTION_NAMES else replaced
        assert path in where, f"{path} registers {name!r} but runs PyTorch ({where})"
    if "experts" in names and experts_modules(model):
        from kernelhub import get_kernel

        kernel = get_kernel("kernels-community/moe", version=1)
        served = [m for m in experts_modules(model) if kernel.unsupported_reason(m) is None]
        # a machine rule (machine.DECLINES; none names the experts today) keeps PyTorch's experts on purpose
        kept = "experts" in declined_names(DECLINES, cpu_flags(), str(model.dtype).removeprefix(
            "torch."), model.config)
        switched = model.config._experts_implementation == "kernels-community/moe"
        assert switched == (bool(served) and not kept), (
            model.config._experts_implementation, served, kept)
    with torch.no_grad():
        torch.testing.assert_close(_output(model, ids), reference, rtol=1e-4, atol=1e-4)


@pytest.fixture(autouse=True)
def _collected() -> Iterator[None]:
    """Each model is freed before the next is built (a kept traceback can hold one)."""
    yield
    gc.collect()
