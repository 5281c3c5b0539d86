"""Where a kernel's forward lives on a module instance, which kernel runs it, and how
PyTorch's forward comes back.

kernelize (and module fusion, which places kernels itself) installs a kernel layer's
forward on one instance, never on its class: a plain bound method in the instance's
``__dict__``, as torch.compile expects of a forward, which survives a deep copy
(rebound to the copy). The function itself marks the forward as ours, so restoring
never removes a forward someone else installed; the instance also records the
repository the kernel came from, which :func:`kernel_of` reports.
"""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import TYPE_CHECKING

from .validate import forward_of

if TYPE_CHECKING:
    from torch import nn

    from .mapping import Repository

_installed: set[Callable[..., object]] = set()
"""Forward functions installed here: how restore tells its own forwards apart."""

_REPO_ATTR = "_kernelhub_repository"
"""Instance attribute naming the repository whose kernel runs the instance's forward."""


def install_forward(module: nn.Module, layer: type, repo: Repository) -> None:
    """Run ``layer.forward`` as ``module``'s forward (per instance, undone by
    :func:`restore_forward`), reported by :func:`kernel_of` as ``repo``'s."""
    install_function(module, forward_of(layer), repo)


def install_function(module: nn.Module, forward: Callable[..., object], repo: Repository
                     ) -> None:
    """Run ``forward`` (a function taking the module first) as ``module``'s forward."""
    _installed.add(forward)
    module.__dict__[_slot(module)] = types.MethodType(forward, module)
    module.__dict__[_REPO_ATTR] = repo


def restore_forward(module: nn.Module) -> None:
    """Give ``module`` its class's forward back, if a kernel's forward was installed."""
    if _our_forward(module) is not None:
        slot = _slot(module)
        if slot == "forward":
            del module.__dict__["forward"]
        else:  # what the hook wrapped when it was added: the class's forward
            module.__dict__[slot] = types.MethodType(forward_of(type(module)), module)
        module.__dict__.pop(_REPO_ATTR, None)


def kernel_of(module: nn.Module) -> Repository | None:
    """The repository whose kernel runs ``module``'s forward, or None (PyTorch)."""
    if _our_forward(module) is None:
        return None
    repo: Repository | None = module.__dict__.get(_REPO_ATTR)
    return repo


def _slot(module: nn.Module) -> str:
    """Where ``module``'s own forward lives: ``forward``, or ``_old_forward`` under an
    accelerate hook (``device_map`` offloading wraps ``forward`` to move inputs to the
    module's device, then calls ``_old_forward``). Kernels go behind the hook, so an
    offloaded model keeps its hooks (as Transformers 5.25's kernelize keeps them)."""
    if "_hf_hook" in module.__dict__ and "_old_forward" in module.__dict__:
        return "_old_forward"
    return "forward"


def _our_forward(module: nn.Module) -> Callable[..., object] | None:
    current = module.__dict__.get(_slot(module))
    if (isinstance(current, types.MethodType) and current.__self__ is module
            and current.__func__ in _installed):
        return current.__func__
    return None
