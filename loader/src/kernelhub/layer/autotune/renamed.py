"""The feature's former name, ``verify``, kept working: each old spelling warns once.

Autotuning was called verification (``kernelize(..., verify=True)``,
``KernelConfig(verify=True)``, ``KERNELHUB_VERIFY=1``, ``verification_report``,
``kernelhub verify-report``), which is also what kernelhub calls checking downloaded
bytes against their digests and signatures. The old spellings still work, so code and
scripts written for them keep running; each says once per process what to write instead.
"""

from __future__ import annotations

import os
import warnings
from typing import TYPE_CHECKING

from . import report

if TYPE_CHECKING:
    from torch import nn

    from .report import Row

_warned: set[str] = set()


def warn_renamed(old: str, new: str, stacklevel: int = 3) -> None:
    """Say once per process that ``old`` is now ``new`` (a FutureWarning: users, not
    only developers, wrote the old spellings)."""
    if old in _warned:
        return
    _warned.add(old)
    warnings.warn(f"{old} is deprecated: use {new} (autotuning: the kernel runs only where "
                  "it is correct and faster than PyTorch on this machine)", FutureWarning,
                  stacklevel=stacklevel)


def autotune_flag(autotune: bool, verify: bool | None, where: str, depth: int = 1) -> bool:
    """The autotune switch of ``where`` (``kernelize``, ``KernelConfig``) given both
    spellings; ``verify`` (None: not passed) is the old one. ``depth``: the calls between
    the user's code and the one calling this."""
    if verify is None:
        return autotune
    warn_renamed(f"{where}(verify=...)", f"{where}(autotune=...)", stacklevel=3 + depth)
    return autotune or verify


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in {"1", "true", "yes", "on"}


def autotune_from_env() -> bool:
    """``KERNELHUB_AUTOTUNE=1``: autotuning for ``use_kernels=True`` without a
    KernelConfig (``KERNELHUB_VERIFY=1``, its former name, still works)."""
    if "KERNELHUB_AUTOTUNE" in os.environ:
        return _env_flag("KERNELHUB_AUTOTUNE")
    if _env_flag("KERNELHUB_VERIFY"):
        warn_renamed("KERNELHUB_VERIFY", "KERNELHUB_AUTOTUNE")
        return True
    return False


def verification_report(model: nn.Module) -> list[Row]:
    """Deprecated name of :func:`~kernelhub.layer.autotune.report.autotune_report`."""
    warn_renamed("verification_report", "autotune_report")
    return report.autotune_report(model)
