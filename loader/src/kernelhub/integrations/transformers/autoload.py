"""The integration engaged by import, not by user code (the other half of ``_kernelhub_autoload``).

The import hook calls :func:`imported` with each watched Transformers module right after
it executed; the seams that module defines are patched there and then, so the user's
``from_pretrained(..., use_kernels=True)`` and ``from transformers import kernelize``
work as Transformers' documentation writes them.

Precedence: when the ecosystem's own ``kernels`` distribution is installed, Transformers
uses it and we do nothing (decided once per process). ``KERNELHUB_TRANSFORMERS=0`` keeps
the hook from being installed at all. An explicit :func:`~.patch.enable` still works
either way.
"""

from __future__ import annotations

import logging
from functools import cache
from types import ModuleType

logger = logging.getLogger("kernelhub.transformers")


@cache
def ecosystem_kernels_installed() -> bool:
    """Whether the ecosystem's ``kernels`` distribution is installed (it then wins)."""
    from importlib.metadata import PackageNotFoundError, distribution

    try:
        distribution("kernels")
    except PackageNotFoundError:
        return False
    return True


@cache
def _supported() -> bool:
    from .patch import check_transformers

    try:
        check_transformers()
    except ImportError as e:
        logger.warning("kernelhub: not engaging the Transformers integration: %s", e)
        return False
    return True


def imported(module: ModuleType) -> None:
    """Patch what ``module`` (a Transformers module that just executed) defines."""
    if ecosystem_kernels_installed() or not _supported():
        return
    from . import patch

    name = module.__name__
    if name == "transformers.integrations.hub_kernels":
        patch.patch_hub_kernels(module)
    elif name == "transformers.modeling_utils":
        pretrained = getattr(module, "PreTrainedModel", None)
        if isinstance(pretrained, type):
            patch.patch_pretrained_model(pretrained)
    else:
        patch.mark_module(module)
