"""The maintained table: which kernel each layer and function name gets with
``use_kernels=True``, and which Transformers classes carry those names.

**The default mapping** (:data:`DEFAULT_MAPPING`) is Transformers 5.25's own
(``hub_kernels._build_kernel_mapping``): the same names, repositories, versions, layer
names, devices and modes, every mode entry registered as ``mode | TORCH_COMPILE`` as
5.25 does (an entry for a stronger mode serves a weaker one, see
:data:`kernelhub.layer.MODE_FALLBACK_ORDER`). To it we add what a kernelhub hub serves
beyond it: CPU entries (5.25 has none, so on a CPU ``use_kernels=True`` would change
nothing), Gemma's ``(1 + weight)`` norm, and the attention kernel ``use_kernels=True``
switches to (:data:`ATTENTION_KEY`). Each addition is marked as ours below.

**Names on classes.** Transformers marks its layers (``kernel_layer_name``) and attaches
its functions (``_kernel_funcs``) only when a compatible ``kernels`` package is
installed (5.24 wants ``>=0.18.2,<0.19``; from 5.25 it is a dependency); otherwise its
decorators do nothing. So the table also names the layers itself
(:data:`LAYER_CLASSES`) and the module-global functions
(:data:`FUNCTIONS`) of the families it covers, and marks that are present are honoured
as they are.

Keys are the names Transformers registers (``"RMSNorm"``, ``"SiLU"``,
``"rotary_pos_emb"``), so a ``KernelConfig`` written for Transformers' own kernel
support means the same here.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

from ...layer.mapping import Mode
from ...system import BACKENDS
from ...value_types import Record

ATTENTION_KEY = "attention"
"""The KernelConfig key that chooses the attention kernel used with ``use_kernels=True``."""

DEVICE_TYPES = BACKENDS
"""Device keys a KernelConfig may use: backend names (:mod:`kernelhub.system`), so
``"mps"`` is accepted for ``"metal"``."""

COVERED_MODEL_TYPES = ("llama", "qwen2", "qwen3", "mistral", "gemma")
"""``config.model_type`` values whose layers :data:`LAYER_CLASSES` and :data:`FUNCTIONS`
name (for a Transformers that marks nothing itself)."""

_I, _T = Mode.INFERENCE, Mode.TRAINING


class KernelRef(Record, frozen=True):
    """One mapping entry: the layer (or function) ``name`` of hub kernel ``repo_id`` at a
    version or revision, for ``modes``, on GPUs of a capability range when given."""

    repo_id: str
    name: str
    version: int | str | None = None
    revision: str | None = None
    modes: tuple[Mode, ...] = (Mode.FALLBACK,)
    trust_remote_code: bool = False
    capability: tuple[int, int] | None = None
    """(min, max) as ``major * 10 + minor``, both inclusive."""

    def spec(self) -> str:
        return f"{self.repo_id}:{self.name}"


def _entries(repo: str, version: int, names: list[tuple[str, str, tuple[str, ...],
                                                         tuple[Mode, ...]]],
             mapping: dict[str, dict[str, list[KernelRef]]]) -> None:
    """5.25's ``add_kernels_community_layers``: (key, layer name, devices, modes) rows of
    one ``kernels-community`` repository, each mode registered with TORCH_COMPILE."""
    for key, layer, devices, modes in names:
        ref = KernelRef(f"kernels-community/{repo}", layer, version,
                        modes=tuple(m | Mode.TORCH_COMPILE for m in modes))
        for device in devices:
            mapping.setdefault(key, {}).setdefault(device, []).append(ref)


_GPUS = ("cuda", "rocm", "xpu")
_TI = (_T, _I)


def _transformers_5_25() -> dict[str, dict[str, list[KernelRef]]]:
    """Transformers 5.25's default mapping, entry for entry."""
    m: dict[str, dict[str, list[KernelRef]]] = {
        "EsmFold2TriangleMultiplication": {"cuda": [KernelRef(
            "biohub/esmfold2-trimul", "EsmFold2TriangleMultiplication",
            revision="ab10a577bf38f385871eb9fc7c916ceadf3089a5",
            modes=(_I | Mode.TORCH_COMPILE,), trust_remote_code=True)]},
        "Qwen3_5GatedDeltaNet": {
            "cuda": [KernelRef("Atlas-Inference/gdn", "Qwen3_5GatedDeltaNet",
                               revision="531ae679ab5c13a3bf49607e1b6e6459300772e9",
                               trust_remote_code=True, capability=(121, 121))],
            "rocm": [KernelRef("Atlas-Inference/gdn", "Qwen3_5GatedDeltaNet",
                               revision="13462bf5e936315f341204ae06bf09068392d227",
                               trust_remote_code=True, capability=(115, 115))],
        },
    }
    _entries("fla", 3, [
        ("chunk_gated_delta_rule", "chunk_gated_delta_rule", _GPUS, _TI),
        ("fused_recurrent_gated_delta_rule", "recurrent_gated_delta_rule", _GPUS, (_I,)),
        ("fused_recurrent_kda", "recurrent_kimi_delta_attention", _GPUS, (_I,)),
        ("RMSNormGated", "FusedRMSNormGated", _GPUS, _TI),
        ("chunk_kda", "chunk_kimi_delta_attention", ("cuda", "rocm"), _TI),
        ("chunk_kda", "chunk_kimi_delta_attention", ("xpu",), (_I,)),
    ], m)
    _entries("mamba-ssm", 5, [
        (name, name, _GPUS, _TI) for name in (
            "causal_conv1d_fn", "causal_conv1d_update", "mamba_chunk_scan_combined",
            "mamba_split_conv1d_scan_combined", "mamba_inner_fn", "selective_scan_fn",
            "selective_state_update")
    ], m)
    _entries("liger-kernels", 4, [("RMSNorm", "LigerRMSNorm", ("cuda", "rocm"), _TI)], m)
    _entries("activation", 1, [
        ("FastGELU", "FastGELU", _GPUS, (_I,)),
        ("QuickGELU", "QuickGELU", _GPUS, (_I,)),
        ("NewGELU", "NewGELU", _GPUS, (_I,)),
        ("SiLU", "Silu", _GPUS, (_I,)),
        ("GeLU", "Gelu", _GPUS, (_I,)),
        ("GeluTanh", "GeluTanh", _GPUS, (_I,)),
    ], m)
    _entries("rotary", 2, [("rotary_pos_emb", "apply_rotary_transformers",
                            ("cuda", "xpu"), _TI)], m)
    _entries("aiter-rope", 3, [("rotary_pos_emb", "apply_rotary_transformers",
                                ("rocm",), (_I,))], m)
    deformable = KernelRef("kernels-community/deformable-detr",
                           "MultiScaleDeformableAttention", 2)
    m["MultiScaleDeformableAttention"] = {"cuda": [deformable], "rocm": [deformable]}
    return m


FLASH_ATTN2 = "kernels-community/flash-attn2"
FLASH_ATTN2_VERSION = 4
"""The major Transformers 5.24 and 5.25 load for an unpinned ``flash-attn2`` (their
``FLASH_ATTN_KERNEL_VERSIONS``)."""


def _kernelhub_additions(m: dict[str, dict[str, list[KernelRef]]]) -> None:
    """Ours, beyond 5.25: CPU entries, Gemma's norm and the attention kernel."""
    _entries("activation", 1, [
        ("FastGELU", "FastGELU", ("cpu",), (_I,)),
        ("QuickGELU", "QuickGELU", ("cpu",), (_I,)),
        ("NewGELU", "NewGELU", ("cpu",), (_I,)),
        ("SiLU", "Silu", ("cpu",), (_I,)),
        ("GeLU", "Gelu", ("cpu",), (_I,)),
        ("GeluTanh", "GeluTanh", ("cpu",), (_I,)),
    ], m)
    _entries("rotary", 2, [("rotary_pos_emb", "apply_rotary_transformers", ("cpu",), _TI)], m)
    # 5.25 takes RMSNorm from liger-kernels v4 (CUDA, ROCm). Ours has a CPU build too,
    # faster than PyTorch's norm, but on the CPU the norm comes from our rmsnorm kernel,
    # which is as fast to 512 tokens and faster beyond (it reuses released output memory;
    # docs/transformers.md has the figures); so does Gemma's (1 + weight) norm.
    _entries("rmsnorm", 1, [
        ("RMSNorm", "RMSNorm", ("cpu",), _TI),
        ("GemmaRMSNorm", "GemmaRMSNorm", ("cpu", "cuda", "rocm"), _TI),
    ], m)
    # The fused decoder kernels (see FUSED_LAYER_CLASSES): their ops are CPU code.
    _entries("rmsnorm", 1, [("MLP", "MLP", ("cpu",), _TI),
                            ("DecoderLayer", "DecoderLayer", ("cpu",), _TI)], m)
    # bfloat16 projections widened to float32 on CPUs without native bfloat16 products
    # (issue 31): every nn.Linear of a bfloat16 model, whatever its family (.widen says
    # when the entry stays and how nn.Linear carries the name).
    _entries("rmsnorm", 1, [("Linear", "Linear", ("cpu",), (_I,))], m)
    m[ATTENTION_KEY] = {d: [KernelRef(FLASH_ATTN2, "attention_forward", FLASH_ATTN2_VERSION,
                                      modes=(_I | Mode.TORCH_COMPILE,))]
                        for d in ("cpu", "cuda")}
    _by_layer_name(m)


EXPERTS_KEY = "experts"
"""The KernelConfig key of the experts kernel: a function with Transformers' experts-interface
signature, registered in ``ALL_EXPERTS_FUNCTIONS`` for the experts modules
(``@use_experts_implementation``) of any model (:mod:`.experts`)."""

BY_LAYER_NAME: tuple[tuple[str, str, int, str, tuple[str, ...], tuple[Mode, ...]], ...] = (
    # (name the model registers, kernels-community repository, major, the kernel's layer or
    #  function, devices, modes). One row per name: every model class that registers the
    #  name gets the kernel, whatever its model type.
    ("RMSNormZeroCentered", "rmsnorm", 1, "GemmaRMSNorm", ("cpu", "cuda", "rocm"), _TI),
    # Gated delta nets' (and Falcon-H1's) gated norm: a CPU op of the rmsnorm kernel (the
    # GPUs keep 5.25's fla FusedRMSNormGated).
    ("RMSNormGated", "rmsnorm", 1, "RMSNormGated", ("cpu",), _TI),
    ("SoftmaxTopKRouter", "moe", 1, "SoftmaxTopKRouter", ("cpu",), (_I,)),
    (EXPERTS_KEY, "moe", 1, "experts_forward", ("cpu",), (_I,)),
    # Issue 31's CPU kernels, under the names Transformers 5.25 registers: the gated delta
    # net layer and the functions its decorators (use_kernel_func_from_hub_with_fallback)
    # attach to Qwen3.5/Qwen3-Next, Mamba and Mamba-2 mixers. CPU only: kernels-community's
    # mamba-ssm on the Hugging Face Hub is the GPU kernel at major 5, ours is major 1.
    ("Qwen3_5GatedDeltaNet", "gated-delta-rule", 1, "Qwen3_5GatedDeltaNet", ("cpu",), _TI),
    # Qwen3-Next's layer registers no hub name (5.25 attaches only its functions): the
    # name is ours, put on the class by QWEN3_NEXT_LAYER below.
    ("Qwen3NextGatedDeltaNet", "gated-delta-rule", 1, "Qwen3NextGatedDeltaNet", ("cpu",), _TI),
    *((name, "gated-delta-rule", 1, name, ("cpu",), _TI)
      for name in ("chunk_gated_delta_rule", "fused_recurrent_gated_delta_rule")),
    *((name, "mamba-ssm", 1, name, ("cpu",), _TI)
      for name in ("causal_conv1d_fn", "causal_conv1d_update", "mamba_chunk_scan_combined",
                   "selective_state_update", "selective_scan_fn")),
    # Not served: the cache-managing wrappers causal_conv1d_forward / mamba2_scan_forward / mamba_scan_forward (our kernels provide
    # the functions they call, not the wrappers).
)
"""Ours, beyond 5.25: kernels for the layer names Transformers registers (``RMSNormZeroCentered``
is Gemma's ``(1 + weight)`` norm over ``weight`` and ``eps``, the same computation, so
rmsnorm's ``GemmaRMSNorm`` serves it)."""


def _by_layer_name(m: dict[str, dict[str, list[KernelRef]]]) -> None:
    for key, repo, version, layer, devices, modes in BY_LAYER_NAME:
        _entries(repo, version, [(key, layer, devices, modes)], m)


DEFAULT_MAPPING: dict[str, dict[str, list[KernelRef]]] = _transformers_5_25()
_kernelhub_additions(DEFAULT_MAPPING)
"""Layer/function name → device type → its entries (one per mode set or capability
range), used by ``use_kernels=True``.

Each kernel says itself whether it supports training (``has_backward``) and
``torch.compile`` (``can_torch_compile``); where it does not, that mode keeps PyTorch.
"""

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
attention appends to the KV cache object), so ``autotune=True`` cannot run it and PyTorch
twice on one call to compare them: with verification on they keep PyTorch's forward,
and the modules they would fuse (norm, MLP, attention) are verified one by one."""

LAYER_CLASSES.update(FUSED_LAYER_CLASSES)
# ---- end of fused decoder kernels -------------------------------------------------------

QWEN3_NEXT_LAYER = {
    "transformers.models.qwen3_next.modeling_qwen3_next.Qwen3NextGatedDeltaNet":
        "Qwen3NextGatedDeltaNet",
}
"""Qwen3-Next's gated delta net, served whole as Qwen3.5's is (its forward differs only in
the layout of its input projections), under a name of ours: Transformers marks it with none."""
LAYER_CLASSES.update(QWEN3_NEXT_LAYER)

FUNCTIONS: dict[str, str] = {
    f"transformers.models.{m}.modeling_{m}.apply_rotary_pos_emb": "rotary_pos_emb"
    for m in COVERED_MODEL_TYPES
}
"""Dotted module-global function path → the function name it registers as (used where
the model has no ``_kernel_funcs`` of its own)."""

KERNEL_FUNCTION_NAMES = frozenset({
    "chunk_gated_delta_rule", "fused_recurrent_gated_delta_rule", "fused_recurrent_kda",
    "chunk_kda", "causal_conv1d_fn", "causal_conv1d_update", "mamba_chunk_scan_combined",
    "mamba_split_conv1d_scan_combined", "mamba_inner_fn", "selective_scan_fn",
    "selective_state_update",
})
"""Names Transformers 5.25 registers for functions (``use_kernel_func_from_hub_with_fallback``)
and attaches to the layers that call them (``_kernel_funcs``): their entries are kernel
functions, not layers."""

FUNCTION_NAMES = frozenset(FUNCTIONS.values()) | KERNEL_FUNCTION_NAMES
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


_ACTIVATION_NAMES = frozenset({"SiLU", "GeLU", "GeluTanh", "NewGELU", "FastGELU", "QuickGELU"})


def is_covered(model: Any) -> bool:
    """Whether the table serves more than the model's activations: its family is one whose
    classes the table names itself, or a layer or function name it registers has entries
    (whatever its model type)."""
    if model_type(model) in COVERED_MODEL_TYPES:
        return True
    served = set(DEFAULT_MAPPING) - _ACTIVATION_NAMES - {ATTENTION_KEY}
    return bool(served & set(registered_names(model).values()))


def coverage_message(model: Any) -> str:
    """What a user of a model none of whose names the table serves is told (and what they
    can do about it)."""
    name = type(model).__name__
    kind = model_type(model)
    names = sorted(set(registered_names(model).values()) - _ACTIVATION_NAMES)
    registers = (f"the layer names it registers ({', '.join(names)}) have" if names
                 else "it registers no layer names, so its classes have")
    return (
        f"kernelhub's Transformers table has no kernel for {name} (model_type={kind!r}): "
        f"{registers} no entry, beyond its activations. Name kernels for them in "
        "KernelConfig(kernel_mapping=…), or pass attn_implementation='org/repo'."
    )


def registered_names(model: Any) -> dict[str, str]:
    """Qualified module name → layer name, for every module of ``model`` that has one,
    and ``<module>.<function>`` → name for the function modules it attaches.

    A layer name comes from the class's own ``kernel_layer_name`` mark (set by
    Transformers' decorators or by :func:`~.patch.enable`).
    """
    found: dict[str, str] = {}
    for qualname, module in model.named_modules():
        layer = getattr(type(module), "kernel_layer_name", None)
        if isinstance(layer, str):
            found[qualname] = layer
        funcs = getattr(module, "_kernel_funcs", None)
        if isinstance(funcs, dict):
            for key, func in funcs.items():
                name = getattr(type(func), "kernel_layer_name", None) or key
                found[f"{qualname}.{key}" if qualname else key] = name
    return found


def has_function_modules(model: Any, name: str) -> bool:
    """Whether ``model`` attaches function modules registered as ``name`` (Transformers
    does when its ``kernels`` package is usable); kernelize reaches those itself."""
    for module in model.modules():
        funcs = getattr(module, "_kernel_funcs", None)
        if isinstance(funcs, dict) and any(
                (getattr(type(f), "kernel_layer_name", None) or k) == name
                for k, f in funcs.items()):
            return True
    return False


def function_targets(model: Any) -> dict[str, tuple[ModuleType, str]]:
    """Function name → (module, global) of the functions ``model``'s own module calls."""
    targets: dict[str, tuple[ModuleType, str]] = {}
    modules = {type(m).__module__ for m in model.modules()}
    for path, name in FUNCTIONS.items():
        module_name, attr = _split(path)
        if module_name in modules and (hit := import_target(path)) is not None:
            targets[name] = (hit[0], attr)
    return targets
