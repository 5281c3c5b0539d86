"""``kernels.kernelize`` with the ecosystem's defaults over kernelhub's kernelize.

The one difference in behaviour from :func:`kernelhub.kernelize` is what
``use_fallback=True`` means: the ecosystem's ``KernelizeFallback.DEFAULT`` (a kernel that
fails to load is an error) rather than kernelhub's ``ALL`` (PyTorch, with a warning).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..layer.autotune.renamed import autotune_flag
from ..layer.kernelizing import KernelizeFallback
from ..layer.kernelizing import kernelize as _kernelize

if TYPE_CHECKING:
    from torch import nn


def kernelize(model: nn.Module, *, mode: Any = None, device: Any = None,
              use_fallback: bool | KernelizeFallback = True, autotune: bool = False,
              verify: bool | None = None) -> nn.Module:
    """Replace the forward of every marked layer of ``model`` with its mapped kernel.

    ``use_fallback``: ``True`` is ``KernelizeFallback.DEFAULT`` (PyTorch where the mapping
    has nothing for the layer, device, GPU or mode; an error where a kernel fails to
    load), ``False`` is ``KernelizeFallback.NONE``, a flag is taken as is. The rest is
    :func:`kernelhub.kernelize`.
    """
    cases: Any = use_fallback
    if use_fallback is True:
        cases = KernelizeFallback.DEFAULT
    elif use_fallback is False:
        cases = KernelizeFallback.NONE
    autotune = autotune_flag(autotune, verify, "kernelize")
    return _kernelize(model, mode=mode, device=device, use_fallback=cases, autotune=autotune)
