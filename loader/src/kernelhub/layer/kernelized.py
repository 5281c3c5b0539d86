"""Which kernels a kernelized model runs, and where each came from.

The kernel ecosystem's ``get_kernelized_layers`` answers this for code written against
its API (a model's layers by their ``named_modules`` name, its attached function
modules by (owner name, function name)); :func:`kernelhub.layer.kernel_of` answers it
for one module. Both read what kernelize recorded on the instance, so a deep copy or a
pickled model reports what it runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..value_types import Record, field
from .decorators import KERNEL_FUNCS_ATTR
from .forwards import kernel_of
from .mapping import Repository

if TYPE_CHECKING:
    from torch import nn


class KernelizedLayer(Record, frozen=True):
    """A layer whose forward runs a kernel, and the repository the kernel came from."""

    module: nn.Module
    repo: Repository


class KernelizedFunc(Record, frozen=True):
    """A function module (attached with ``use_kernelized_func``) that runs a kernel, and
    the repository the kernel came from."""

    module: nn.Module
    repo: Repository


class KernelizedLayers(Record, frozen=True):
    """What :func:`get_kernelized_layers` found: ``layers`` by module name, ``funcs`` by
    (name of the module the function is attached to, function name)."""

    layers: dict[str, KernelizedLayer] = field(default_factory=dict)
    funcs: dict[tuple[str, str], KernelizedFunc] = field(default_factory=dict)


def get_kernelized_layers(model: nn.Module) -> KernelizedLayers:
    """Every layer and attached function of ``model`` that runs a kernel now."""
    found = KernelizedLayers()
    for name, module in model.named_modules():
        if (repo := kernel_of(module)) is not None:
            found.layers[name] = KernelizedLayer(module, repo)
        funcs = getattr(module, KERNEL_FUNCS_ATTR, None)
        if isinstance(funcs, dict):
            for func_name, func_module in funcs.items():
                if (repo := kernel_of(func_module)) is not None:
                    found.funcs[(name, func_name)] = KernelizedFunc(func_module, repo)
    return found
