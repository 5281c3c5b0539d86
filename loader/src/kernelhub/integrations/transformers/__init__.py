"""kernelhub for Transformers models: ``use_kernels=True``, ``KernelConfig`` and hub
``attn_implementation`` strings, served from kernelhub's hubs.

    from kernelhub.integrations import transformers as kh
    kh.enable()  # once per process
    model = AutoModelForCausalLM.from_pretrained(path, use_kernels=True,
                                                 kernel_config=kh.KernelConfig({...}))

See docs/transformers.md for how it hooks in and what each part does.
"""

from __future__ import annotations

from typing import Any

from .apply import apply_kernels
from .attention import AttentionKernelError
from .kernel_config import KernelConfig, KernelConfigError, KernelSpec
from .patch import disable, enable, is_enabled
from .table import COVERED_MODEL_TYPES, DEFAULT_MAPPING, FUNCTIONS, LAYER_CLASSES


def kernelize(model: Any, *, mode: Any = None, kernel_config: Any = None) -> Any:
    """Kernelize a Transformers model explicitly (layers, functions and attention).

    ``mode`` is a :class:`kernelhub.layer.Mode` (default: from ``model.training``);
    ``Mode.TRAINING | Mode.TORCH_COMPILE`` selects kernels torch.compile can trace and
    is kept across later ``train()``/``eval()`` switches. Returns the model.
    """
    apply_kernels(model, kernel_config, mode)
    return model


__all__ = [
    "COVERED_MODEL_TYPES",
    "DEFAULT_MAPPING",
    "FUNCTIONS",
    "LAYER_CLASSES",
    "AttentionKernelError",
    "KernelConfig",
    "KernelConfigError",
    "KernelSpec",
    "disable",
    "enable",
    "is_enabled",
    "kernelize",
]
