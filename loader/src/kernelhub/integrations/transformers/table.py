"""The maintained table: which Transformers classes and functions our kernels replace.

Why a table: Transformers marks its layers (``kernel_layer_name``) only when its own
pinned ``kernels`` package is installed; otherwise its decorators do nothing and a
model carries no marks. So the integration names the layers itself, per model family,
and says clearly when a model is not covered. Marks, when present, are honoured too
(see :func:`registered_names`).

Three kinds of entries:

* layer classes (``*RMSNorm``, the activation classes of ``transformers.activations``):
  their ``forward`` is replaced per instance by ``kernelize``;
* module-global functions (each model's ``apply_rotary_pos_emb``): swapped in the
  model's module, reversibly, the way liger-kernel patches models;
* attention: registered with Transformers' ``AttentionInterface`` under the hub string.

Keys are the names Transformers itself registers (``"RMSNorm"``, ``"SiLU"``,
``"rotary_pos_emb"``), so a ``KernelConfig`` written for Transformers' own kernel
support means the same here.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from ...system import BACKENDS

ALL_MODES = "inference|training|torch_compile"
"""Shorthand used in the default table: the entry applies in every mode it supports."""

ATTENTION_KEY = "attention"
"""The KernelConfig key that chooses the attention kernel used with ``use_kernels=True``."""

DEVICE_TYPES = BACKENDS
"""Device keys a KernelConfig may use: backend names (:mod:`kernelhub.system`), so
``"mps"`` is accepted for ``"metal"``."""

COVERED_MODEL_TYPES = ("llama", "qwen2", "qwen3", "mistral", "gemma")
"""``config.model_type`` values whose layers the table names."""


@dataclass(frozen=True)
class KernelRef:
    """One hub kernel: ``repo_id`` and the layer or function it exports, at a version."""

    repo_id: str
    name: str
    version: int | str | None = None

    def spec(self) -> str:
        return f"{self.repo_id}:{self.name}"


_ACT = "transformers.activations"

LAYER_CLASSES: dict[str, str] = {
    # Norms: RMSNorm works as the forward of any module holding `weight` and
    # `variance_epsilon`; Gemma's (1 + weight) scaling and `eps` need their own layer.
    "transformers.models.llama.modeling_llama.LlamaRMSNorm": "RMSNorm",
    "transformers.models.qwen2.modeling_qwen2.Qwen2RMSNorm": "RMSNorm",
    "transformers.models.qwen3.modeling_qwen3.Qwen3RMSNorm": "RMSNorm",
    "transformers.models.mistral.modeling_mistral.MistralRMSNorm": "RMSNorm",
    "transformers.models.gemma.modeling_gemma.GemmaRMSNorm": "GemmaRMSNorm",
    # Activations, as ACT2FN instantiates them ("silu" → SiLUActivation, …). Llama-style
    # MLPs compute down(act(gate(x)) * up(x)): the product is outside the activation, so
    # the gated SiluAndMul kernel does not apply to them; the fused RMSNormMLP kernel
    # (module fusion through KernelConfig) covers norm + SwiGLU MLP instead.
    f"{_ACT}.SiLUActivation": "SiLU",
    f"{_ACT}.GELUActivation": "GeLU",
    f"{_ACT}.GELUTanh": "GeluTanh",
    f"{_ACT}.NewGELUActivation": "NewGELU",
    f"{_ACT}.FastGELUActivation": "FastGELU",
    f"{_ACT}.QuickGELUActivation": "QuickGELU",
}
"""Dotted class path → the layer name it registers as."""

# ---- fused decoder kernels (helper "kernels", issue 22) -------------------------------
# Kernels that fuse the work around a decoder layer's matmuls (kernels-community/rmsnorm):
# ``MLP`` runs SiLU * up in one pass between the projections, and a decode step's whole
# MLP as one op that streams each weight once; ``DecoderLayer`` adds the residual adds
# and the post-attention norm (one pass for add + norm, the second residual added by the
# down projection). Kept in one block so that the table's own entries can change
# around it.
FUSED_MODEL_TYPES = ("llama", "qwen2", "qwen3", "mistral")
"""Model families whose MLP and decoder layer have the structure the fused kernels need
(pre-norm, Llama-style RMSNorm, SwiGLU MLP)."""

_FUSED_FAMILIES = {"llama": "Llama", "qwen2": "Qwen2", "qwen3": "Qwen3", "mistral": "Mistral"}
FUSED_LAYER_CLASSES: dict[str, str] = {
    f"transformers.models.{m}.modeling_{m}.{prefix}{cls}": cls
    for m, prefix in _FUSED_FAMILIES.items()
    for cls in ("MLP", "DecoderLayer")
}
"""Dotted class path → layer name, for the fused kernels."""

UNVERIFIABLE_LAYERS = frozenset({"DecoderLayer"})
"""Layers whose forward updates state that is not a tensor argument (the decoder layer's
attention appends to the KV cache object), so ``verify=True`` cannot run it and PyTorch
twice on one call to compare them: with verification on they keep PyTorch's forward,
and the modules they would fuse (norm, MLP, attention) are verified one by one."""

LAYER_CLASSES.update(FUSED_LAYER_CLASSES)
# ---- end of fused decoder kernels -------------------------------------------------------

FUNCTIONS: dict[str, str] = {
    f"transformers.models.{m}.modeling_{m}.apply_rotary_pos_emb": "rotary_pos_emb"
    for m in COVERED_MODEL_TYPES
}
"""Dotted module-global function path → the function name it registers as."""

_ACTIVATION = "kernels-community/activation"
_RMSNORM = "kernels-community/rmsnorm"
_ROTARY = "kernels-community/rotary"
FLASH_ATTN2 = "kernels-community/flash-attn2"

DEFAULT_MAPPING: dict[str, dict[str, KernelRef]] = {
    "RMSNorm": {d: KernelRef(_RMSNORM, "RMSNorm", 1) for d in DEVICE_TYPES},
    "GemmaRMSNorm": {d: KernelRef(_RMSNORM, "GemmaRMSNorm", 1) for d in DEVICE_TYPES},
    "SiLU": {d: KernelRef(_ACTIVATION, "Silu", 1) for d in DEVICE_TYPES},
    "GeLU": {d: KernelRef(_ACTIVATION, "Gelu", 1) for d in DEVICE_TYPES},
    "GeluTanh": {d: KernelRef(_ACTIVATION, "GeluTanh", 1) for d in DEVICE_TYPES},
    "NewGELU": {d: KernelRef(_ACTIVATION, "NewGELU", 1) for d in DEVICE_TYPES},
    "FastGELU": {d: KernelRef(_ACTIVATION, "FastGELU", 1) for d in DEVICE_TYPES},
    "QuickGELU": {d: KernelRef(_ACTIVATION, "QuickGELU", 1) for d in DEVICE_TYPES},
    "rotary_pos_emb": {d: KernelRef(_ROTARY, "apply_rotary_transformers", 1) for d in DEVICE_TYPES},
    ATTENTION_KEY: {d: KernelRef(FLASH_ATTN2, "attention_forward", 1) for d in DEVICE_TYPES},
    # fused decoder kernels (see FUSED_LAYER_CLASSES)
    "MLP": {d: KernelRef(_RMSNORM, "MLP", 1) for d in DEVICE_TYPES},
    "DecoderLayer": {d: KernelRef(_RMSNORM, "DecoderLayer", 1) for d in DEVICE_TYPES},
}
"""Layer/function name → device type → the kernel used by ``use_kernels=True``.

Each kernel says itself whether it supports training (``has_backward``) and
``torch.compile`` (``can_torch_compile``); where it does not, that mode keeps PyTorch.
"""

FUNCTION_NAMES = frozenset(FUNCTIONS.values())
LAYER_NAMES = frozenset(LAYER_CLASSES.values())
KNOWN_NAMES = frozenset(DEFAULT_MAPPING) | LAYER_NAMES | FUNCTION_NAMES


def _split(path: str) -> tuple[str, str]:
    module, _, attr = path.rpartition(".")
    return module, attr


def import_target(path: str) -> tuple[ModuleType, str, Any] | None:
    """``(module, attribute, value)`` for a dotted path, or None where this Transformers lacks it.

    Transformers moves and renames things between releases; a missing entry means the
    table does not apply to this version, not that the user did something wrong.
    """
    module_name, attr = _split(path)
    try:
        module = importlib.import_module(module_name)
    except ImportError:
        return None
    if not hasattr(module, attr):
        return None
    return module, attr, getattr(module, attr)


def model_type(model: Any) -> str | None:
    config = getattr(model, "config", None)
    return getattr(config, "model_type", None)


def is_covered(model: Any) -> bool:
    return model_type(model) in COVERED_MODEL_TYPES


def coverage_message(model: Any) -> str:
    """What a user of an uncovered model is told (and what they can do about it)."""
    name = type(model).__name__
    kind = model_type(model)
    return (
        f"kernelhub's Transformers table does not cover {name} (model_type={kind!r}); it covers "
        f"{', '.join(COVERED_MODEL_TYPES)}. Its activation layers still get kernels; for its "
        "norms, rotary embedding or attention, name them in KernelConfig(kernel_mapping=…) by "
        "the layer names the model registers, or pass attn_implementation='org/repo'."
    )


def registered_names(model: Any) -> dict[str, str]:
    """Qualified module name → layer name, for every module of ``model`` that has one.

    A layer name comes from the class's own ``kernel_layer_name`` mark (set by
    Transformers' decorators or by :func:`~.patch.enable`).
    """
    found: dict[str, str] = {}
    for qualname, module in model.named_modules():
        layer = getattr(type(module), "kernel_layer_name", None)
        if isinstance(layer, str):
            found[qualname] = layer
    return found


def function_targets(model: Any) -> dict[str, tuple[ModuleType, str]]:
    """Function name → (module, global) of the functions ``model``'s own module calls."""
    targets: dict[str, tuple[ModuleType, str]] = {}
    modules = {type(m).__module__ for m in model.modules()}
    for path, name in FUNCTIONS.items():
        module_name, attr = _split(path)
        if module_name in modules and (hit := import_target(path)) is not None:
            targets[name] = (hit[0], attr)
    return targets
