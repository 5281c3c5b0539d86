"""Module fusion: one kernel runs the work of neighbouring modules of one parent.

A fusion key such as ``(("RMSNorm", "model.layers.*.post_attention_layernorm"),
("MLP", "model.layers.*.mlp"))`` names children of one parent; the kernel repository
exports ``Name`` (the fused forward) and ``NameLayout`` (a module holding those
children under their own attribute names, which ``Name.forward`` reads).

The model's module tree is left exactly as it was, so ``state_dict`` keys, parameter
names and ``save_pretrained`` checkpoints do not change: the Layout is built over the
existing children and kept beside the tree (in the first child's ``__dict__``, not
registered as a submodule). The first child's ``forward`` becomes ``Name.forward`` run
on the Layout; the other children pass their input through. Both are installed like
kernelize's own forwards, so :func:`kernelhub.layer.kernel_of` reports the fused kernel
and a mode that the kernel does not support (no backward, not compilable) puts the
children's own forwards back.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from ...errors import KernelHubError
from ...layer import install_forward, restore_forward, unsupported_reason, validate_layer
from ...layer.validate import forward_of
from .failures import load_failure
from .kernel_config import FusionKey, KernelConfig, KernelConfigError, KernelSpec, fusion_parents

if TYPE_CHECKING:
    from torch import nn

    from ...layer.mapping import Mode, Repository

LAYOUT_ATTR = "_kernelhub_fusion_layout"
"""First child's ``__dict__`` entry: the Layout its fused forward runs on."""

_fused_classes: dict[type, type] = {}


class _PassThrough:
    """The forward of every fused child but the first: its work is done by the first."""

    def forward(self, hidden_states: object, *args: object, **kwargs: object) -> object:
        return hidden_states


def _first_child_layer(kernel_cls: type) -> type:
    """A layer whose forward runs ``kernel_cls.forward`` on the first child's Layout."""
    if (cls := _fused_classes.get(kernel_cls)) is None:

        def forward(self: nn.Module, *args: object, **kwargs: object) -> object:
            return forward_of(kernel_cls)(self.__dict__[LAYOUT_ATTR], *args, **kwargs)

        cls = type(f"{kernel_cls.__name__}OnLayout", (), {"forward": forward})
        _fused_classes[kernel_cls] = cls
    return cls


def _load(spec: KernelSpec, key: FusionKey, device: str, repository: Repository
          ) -> tuple[type, type]:
    """(kernel class, Layout class) of a fusion entry; errors say what is missing."""
    try:
        kernel_cls = repository.load()
    except KernelHubError as e:
        raise load_failure(spec, key, device, e) from None
    layout_cls = getattr(sys.modules.get(kernel_cls.__module__), f"{spec.name}Layout", None)
    if layout_cls is None:
        raise KernelConfigError(
            f"fusion {key!r}: {spec.describe()} must provide {spec.name} and its companion "
            f"{spec.name}Layout (the module that holds the fused children's weights)"
        )
    validate_layer(kernel_cls, layout_cls, f"fused kernel {spec.describe()}")
    return kernel_cls, layout_cls


def apply_fusions(model: nn.Module, config: KernelConfig | None, device: str, mode: Mode,
                  repository_for: Callable[[KernelSpec], Repository]) -> None:
    """Fuse (or, where the mode does not allow the kernel, unfuse) every configured key.

    Runs after the layers were kernelized, so a fused first child overrides the kernel
    its own layer name would have given it.
    """
    if config is None or not config.fusions:
        return
    for key, spec in config.fusions_for_device(device).items():
        repository = repository_for(spec)
        kernel_cls, layout_cls = _load(spec, key, device, repository)
        usable = unsupported_reason(kernel_cls, mode) is None
        children = [pattern.rpartition(".")[2] for _, pattern in key]
        for _, parent in fusion_parents(model, key):
            first, *rest = (getattr(parent, name) for name in children)
            if not usable:
                for child in rest:
                    restore_forward(child)
                continue
            if LAYOUT_ATTR not in first.__dict__:
                first.__dict__[LAYOUT_ATTR] = layout_cls(first, *rest)
            install_forward(first, _first_child_layer(kernel_cls), repository)
            for child in rest:
                install_forward(child, _PassThrough, repository)
