"""The integration engaged by import, not by user code (the other half of ``_kernelhub_autoload``).

The import hook calls :func:`imported` with each watched Transformers module right after
it executed; the seams that module defines are handed to kernelhub there and then, so
the user's ``from_pretrained(..., use_kernels=True)`` and ``from transformers import
kernelize`` work as Transformers' documentation writes them.

**Precedence.** Installing kernelhub is asking for it: Transformers' kernel seams go to
kernelhub whether or not the ecosystem's ``kernels`` package is installed (from
Transformers 5.25 it always is). ``KERNELHUB_TRANSFORMERS=0`` hands them back: the hook
is then never installed, kernelhub is not even imported, and Transformers runs its own
path with the ecosystem's package untouched. ``import kernels`` always means the
installed distribution.

Whatever is declined — a Transformers older than we serve, a seam that changed shape —
is said once, in one warning naming why and the switch; a Transformers newer than the
newest we test whose seams match is served, with one warning naming its version.
"""

from __future__ import annotations

import warnings
from types import ModuleType

from . import seams

_state: dict[str, bool] = {}
"""``"declined"``/``"checked"``: decided once per process."""


def _decline(why: str) -> None:
    from . import patch
    patch.disable()
    _state["declined"] = True
    warnings.warn(
        f"kernelhub does not serve Transformers' kernel arguments in this process: {why}. "
        f"Transformers' own kernels path runs instead; set {seams.SWITCH}=0 to hand it "
        "the seams without this warning.", stacklevel=3)


def _version_checked() -> bool:
    """False (after warning) when this Transformers is too old; warns once when newer
    than tested."""
    if "checked" in _state:
        return True
    _state["checked"] = True
    found = seams.installed_version()
    if (problem := seams.version_problem(found)) is not None:
        _decline(problem)
        return False
    if found is not None and seams.newer_than_tested(found):
        warnings.warn(
            f"transformers {found} is newer than the newest release kernelhub is tested with "
            f"({seams.NEWEST_TESTED}); its kernel seams match, so kernelhub serves them. "
            f"If kernels misbehave, {seams.SWITCH}=0 hands them back to Transformers.",
            stacklevel=3)
    return True


def imported(module: ModuleType) -> None:
    """Hand the seams ``module`` (a Transformers module that just executed) defines to
    kernelhub."""
    from . import patch
    if _state.get("declined") or not _version_checked():
        return
    name = module.__name__
    try:
        if name == "transformers.integrations.hub_kernels":
            patch.patch_hub_kernels(module)
        elif name == "transformers.modeling_utils":
            pretrained = getattr(module, "PreTrainedModel", None)
            if isinstance(pretrained, type):
                patch.patch_pretrained_model(pretrained)
        else:
            patch.mark_module(module)
    except seams.SeamMismatch as e:
        _decline(f"transformers {seams.installed_version()} changed a kernel seam ({e})")
