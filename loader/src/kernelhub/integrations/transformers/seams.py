"""Transformers' kernel seams, recognised by what the installed release defines.

How ``use_kernels``, ``kernel_config``, ``kernels_mode`` and ``kernelize`` flow through
Transformers changes between releases (5.25 added the ``kernels_mode`` property,
``reset_kernels()``, ``kernelize(model, mode, kernel_config, device_map)`` and the
``device_map`` argument of ``set_use_kernels``). Each seam we replace is recognised by
its name and the parameters we rely on, not by a version pin, so:

* a release whose seams match is served — one newer than the newest we test with
  (:data:`NEWEST_TESTED`) too, with one warning naming its version;
* a release where a seam we need is missing or has changed shape is declined, with one
  warning naming the seam (:class:`SeamMismatch` says which);
* releases before :data:`MINIMUM` are declined by version: their kernel arguments are
  not the ones this integration knows.
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING

from packaging.version import Version

from ...lazy_names import deferred

if TYPE_CHECKING:
    from importlib import metadata as importlib_metadata
else:
    importlib_metadata = deferred("importlib.metadata")

MINIMUM = "5.0"
NEWEST_TESTED = "5.25"
TESTED = ("5.24", "5.25")
"""The Transformers releases CI runs the seed tests and the documentation examples on."""

SWITCH = "KERNELHUB_TRANSFORMERS"
"""``KERNELHUB_TRANSFORMERS=0`` (``off``, ``no``, ``false``): leave Transformers alone."""


class SeamMismatch(ImportError):
    """The installed Transformers lacks a kernel seam, or defines it with other
    parameters than the ones kernelhub replaces it by."""


def parameters(fn: object) -> list[str]:
    """Parameter names of ``fn`` (a function or a method read from its class)."""
    try:
        return list(inspect.signature(fn).parameters)  # type: ignore[arg-type]
    except (TypeError, ValueError):  # not callable, or no signature
        return []


def _require(found: object, params: tuple[str, ...], where: str) -> None:
    if not callable(found):
        raise SeamMismatch(f"{where} is missing")
    have = parameters(found)
    if missing := [p for p in params if p not in have]:
        raise SeamMismatch(
            f"{where} no longer takes {', '.join(missing)} (it takes {', '.join(have)})")


def check_hub_kernels(kernelize: object, register: object, get_kernel: object) -> None:
    """Raise :class:`SeamMismatch` unless ``transformers.integrations.hub_kernels``'s
    ``kernelize`` and (where present) ``register_kernel_replacements_and_fusions`` and
    ``get_kernel`` take what we rely on."""
    where = "transformers.integrations.hub_kernels"
    _require(kernelize, ("model", "mode"), f"{where}.kernelize")
    if register is not None:
        _require(register, ("cls", "config", "kernel_config"),
                 f"{where}.register_kernel_replacements_and_fusions")
    if get_kernel is not None:
        _require(get_kernel, ("kernel_name", "revision", "version", "allow_all_kernels"),
                 f"{where}.get_kernel")


def check_pretrained_model(cls: type) -> None:
    """Raise :class:`SeamMismatch` unless ``PreTrainedModel`` defines the seams we
    replace there (``reset_kernels`` and ``kernels_mode`` only where present)."""
    own = cls.__dict__
    _require(own.get("set_use_kernels"), ("self", "use_kernels", "kernel_config", "mode"),
             "PreTrainedModel.set_use_kernels")
    _require(own.get("_check_and_adjust_attn_implementation"),
             ("self", "attn_implementation", "is_init_check", "allow_all_kernels"),
             "PreTrainedModel._check_and_adjust_attn_implementation")
    if "reset_kernels" in own:
        _require(own["reset_kernels"], ("self",), "PreTrainedModel.reset_kernels")
    mode = own.get("kernels_mode")
    if mode is not None and not isinstance(mode, property):
        raise SeamMismatch("PreTrainedModel.kernels_mode is no longer a property")


def has_kernels_mode(cls: type) -> bool:
    """Whether this Transformers keeps the kernel mode on the model (5.25's protocol:
    ``model.kernels_mode``, which ``train()``/``eval()`` set)."""
    return any(isinstance(c.__dict__.get("kernels_mode"), property) for c in cls.__mro__)


def kernelize_takes_config(kernelize: object) -> bool:
    """Whether ``hub_kernels.kernelize`` is 5.25's (``kernel_config=``, ``device_map=``;
    it raises when ``USE_HUB_KERNELS`` is off)."""
    return "kernel_config" in parameters(kernelize)


def version_problem(found: str | None) -> str | None:
    """Why Transformers ``found`` (None: not installed) is not served, with the fix."""
    hint = f"install a compatible one: pip install 'transformers>={MINIMUM}'"
    if found is None:
        return f"kernelhub's Transformers integration needs transformers; {hint}"
    if Version(found) < Version(MINIMUM):
        return (f"transformers {found} is older than the oldest release kernelhub's "
                f"integration serves ({MINIMUM}); {hint}")
    return None


def newer_than_tested(found: str) -> bool:
    """Whether ``found`` is a release after the newest one CI tests (its patch releases
    count as tested)."""
    release = Version(found).release
    newest = Version(NEWEST_TESTED).release
    return release[:2] > newest[:2]


def installed_version() -> str | None:
    try:
        return importlib_metadata.version("transformers")
    except importlib_metadata.PackageNotFoundError:
        return None
