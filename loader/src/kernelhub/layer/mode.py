"""Kernelize modes and the fixed order in which a mapping's mode entries are tried.

A mapping may register different kernels for inference, training and torch.compile. A
kernel registered for a *stronger* mode can always serve a weaker one: a training kernel
(it has a backward) also runs inference, and a kernel that torch.compile can trace also
runs eagerly. So each requested mode tries its own entry first, then stronger entries,
then the mode-agnostic ``FALLBACK`` entry — never a weaker one:

==============================  ==========================================================
requested mode                  entries tried, in order
==============================  ==========================================================
INFERENCE                       INFERENCE, INFERENCE|TORCH_COMPILE, TRAINING,
                                TRAINING|TORCH_COMPILE, FALLBACK
INFERENCE | TORCH_COMPILE       INFERENCE|TORCH_COMPILE, TRAINING|TORCH_COMPILE, FALLBACK
TRAINING                        TRAINING, TRAINING|TORCH_COMPILE, FALLBACK
TRAINING | TORCH_COMPILE        TRAINING|TORCH_COMPILE, FALLBACK
==============================  ==========================================================

Whatever entry is found, the layer must still support the requested mode
(``has_backward`` for TRAINING, ``can_torch_compile`` for TORCH_COMPILE); one that does
not is skipped and the next entry is tried.
"""

from __future__ import annotations

import enum

from ..errors import MappingError


class Mode(enum.Flag):
    """What the kernelized model will be used for.

    ``FALLBACK`` is only a mapping key (a kernel for any mode); pass ``INFERENCE`` or
    ``TRAINING`` to :func:`kernelize`, optionally combined with ``TORCH_COMPILE``.
    """

    FALLBACK = enum.auto()
    TRAINING = enum.auto()
    INFERENCE = enum.auto()
    TORCH_COMPILE = enum.auto()

    def __repr__(self) -> str:  # "Mode.TRAINING|TORCH_COMPILE", stable across Python versions
        return "Mode." + describe_mode(self)


_I, _T, _C, _F = Mode.INFERENCE, Mode.TRAINING, Mode.TORCH_COMPILE, Mode.FALLBACK

MODE_FALLBACK_ORDER: dict[Mode, tuple[Mode, ...]] = {
    _I: (_I, _I | _C, _T, _T | _C, _F),
    _I | _C: (_I | _C, _T | _C, _F),
    _T: (_T, _T | _C, _F),
    _T | _C: (_T | _C, _F),
}
"""Requested mode → mapping entries to try, best first (see the module docstring)."""

_NAMES = ("FALLBACK", "TRAINING", "INFERENCE", "TORCH_COMPILE")


def describe_mode(mode: Mode) -> str:
    """``"TRAINING|TORCH_COMPILE"``: the flag names in a fixed order, for messages."""
    names = [n for n in _NAMES if Mode[n] in mode]
    return "|".join(names) or "0"


def check_kernelize_mode(mode: object) -> Mode:
    """The mode kernelize was asked for, or a TypeError/ValueError saying what is valid."""
    if not isinstance(mode, Mode):
        raise MappingError(
            f"mode must be a kernelhub Mode, got {mode!r}; use Mode.INFERENCE, Mode.TRAINING, "
            "or either combined with Mode.TORCH_COMPILE"
        )
    if mode not in MODE_FALLBACK_ORDER:
        valid = ", ".join(describe_mode(m) for m in MODE_FALLBACK_ORDER)
        raise MappingError(
            f"kernelize cannot run in mode {describe_mode(mode)}: give exactly one of INFERENCE "
            f"or TRAINING, optionally with TORCH_COMPILE (FALLBACK is only a mapping key). "
            f"Valid modes: {valid}"
        )
    return mode


MAPPING_MODES: tuple[Mode, ...] = (_I, _I | _C, _T, _T | _C, _F)
"""Every mode a mapping entry may be registered for."""


def check_mapping_mode(mode: object, where: str) -> Mode:
    """A mode used as a mapping key; anything kernelize would never look up is refused."""
    if not isinstance(mode, Mode):
        raise MappingError(f"{where}: mapping mode keys must be kernelhub Mode values, got {mode!r}")
    if mode not in MAPPING_MODES:
        valid = ", ".join(describe_mode(m) for m in MAPPING_MODES)
        raise MappingError(
            f"{where}: {describe_mode(mode)} is not a mapping mode; use one of {valid} "
            "(a TRAINING kernel is used for inference automatically)"
        )
    return mode


def unsupported_reason(layer: object, mode: Mode) -> str | None:
    """Why ``layer`` (a layer class or a function kernel) cannot run in ``mode``, or None.

    The one rule, with the kernel ecosystem's defaults: a kernel has a backward unless it
    says ``has_backward = False``, and torch.compile may trace it only if it says
    ``can_torch_compile = True``.
    """
    if Mode.TRAINING in mode and not getattr(layer, "has_backward", True):
        return "has no backward (has_backward = False), so it cannot train"
    if Mode.TORCH_COMPILE in mode and not getattr(layer, "can_torch_compile", False):
        return "is not marked can_torch_compile = True"
    return None
