"""kernelhub for Transformers models: ``use_kernels=True``, ``KernelConfig`` and hub
``attn_implementation`` strings, served from kernelhub's hubs.

    from kernelhub.integrations import transformers as kh
    kh.enable()  # once per process
    model = AutoModelForCausalLM.from_pretrained(path, use_kernels=True,
                                                 kernel_config=kh.KernelConfig({...}))

See docs/transformers.md for how it hooks in and what each part does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .attention import AttentionKernelError
from .kernel_config import KernelConfig, KernelConfigError, KernelSpec
from .methods import hub_kernelize
from .patch import disable, enable, is_enabled
from .table import COVERED_MODEL_TYPES, DEFAULT_MAPPING, FUNCTIONS, LAYER_CLASSES

if TYPE_CHECKING:
    from .methods import ModelT

_kernelize = hub_kernelize(raise_when_off=False)


def kernelize(model: ModelT, mode: object = None, kernel_config: object = None,
              device_map: object = None) -> ModelT:
    """Kernelize a Transformers model explicitly (layers, functions and attention), as
    ``transformers.kernelize`` does once kernelhub serves it.

    ``mode`` is a Mode (kernelhub's or ``kernels.Mode``; default: the model's
    ``kernels_mode`` on Transformers 5.25, else its train/eval state);
    ``kernel_config`` defaults to the model's. Returns the model. With
    ``USE_HUB_KERNELS=0`` nothing changes (one warning per process).
    """
    return _kernelize(model, mode, kernel_config, device_map)


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
