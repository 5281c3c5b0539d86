"""Where a layer's kernel comes from: a hub repository, a local build, or a lock file.

Each repository knows how to produce one layer class (``load()``) and a ``cache_key``
that says which kernel it names, so kernelize can load every (repository, model class)
pair once. Layer repositories take a class from the kernel's ``layers`` module; function
repositories take a function from the kernel's top level and wrap it in a pure layer, so
a kernel that ships only functions can still replace a pure layer's ``forward``.

Hub loads go through :func:`kernelhub.get_kernel`, so trust, version resolution,
caching and verification are the same as for a direct load; ``trust_remote_code`` (or
its alias ``allow_all_kernels``) is the only way past an untrusted organisation.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from types import FrameType, ModuleType
from typing import TYPE_CHECKING, ClassVar, Protocol

from .. import settings
from ..api import find_local_variant, get_kernel, get_local_kernel, load_locked_entry, open_hub_arg
from ..errors import KernelHubError, KernelLoadError, MappingError
from ..formats.metadata import read_metadata
from ..hub.base import Hub
from ..lazy_names import deferred
from ..lock import LockPins, distribution_lock, lock_entry, read_pins
from ..signing.trust import Vouch, policy_for, require_bool, vouch
from ..value_types import Record, field
from ..versions import check_repo_id, select_spec
from .decorators import forward_calling
from .mapping import CacheKey

if TYPE_CHECKING:
    from torch import nn
else:
    nn = deferred("torch.nn")


def _layer_from(module: ModuleType, layer_name: str, where: str) -> type[nn.Module]:
    layers = getattr(module, "layers", None)
    if layers is None:
        raise KernelLoadError(
            f"{where} has no `layers` module, so it provides no layer {layer_name!r}; use a "
            "FuncRepository to use one of its functions instead"
        )
    layer = getattr(layers, layer_name, None)
    if layer is None:
        names = sorted(n for n in dir(layers) if isinstance(getattr(layers, n), type)
                       and not n.startswith("_"))
        raise KernelLoadError(
            f"{where} has no layer {layer_name!r}; its layers module provides: "
            f"{', '.join(names) or 'nothing'}"
        )
    if not isinstance(layer, type):
        raise KernelLoadError(f"{where}: layers.{layer_name} is not a class")
    return layer


def _func_from(module: ModuleType, func_name: str, where: str) -> Callable[..., object]:
    func: object = getattr(module, func_name, None)
    if func is None or not callable(func):
        names = sorted(n for n in dir(module) if not n.startswith("_")
                       and callable(getattr(module, n)) and not isinstance(getattr(module, n), type))
        raise KernelLoadError(
            f"{where} has no function {func_name!r}; it provides: {', '.join(names) or 'nothing'}"
        )
    return func


def func_layer(func: Callable[..., object], name: str) -> type[nn.Module]:
    """A pure layer whose forward calls ``func`` (see :func:`forward_calling`).

    ``has_backward`` and ``can_torch_compile`` come from attributes on ``func`` when it
    has them, with the same defaults as a layer class (True, False); a callable
    ``prepare_call`` or ``unsupported_reason`` on ``func`` declines calls, which then run
    the replaced function (see :func:`forward_calling`).
    """
    refuses = getattr(func, "unsupported_reason", None)
    prepares = getattr(func, "prepare_call", None)
    attrs = {
        "forward": forward_calling(func, refuses if callable(refuses) else None,
                                   prepares if callable(prepares) else None),
        "__doc__": f"Pure layer calling {name}.",
        "has_backward": bool(getattr(func, "has_backward", True)),
        "can_torch_compile": bool(getattr(func, "can_torch_compile", False)),
    }
    return type(name, (nn.Module,), attrs)


def _func_layer_from(module: ModuleType, func_name: str, where: str) -> type[nn.Module]:
    return func_layer(_func_from(module, func_name, where), func_name)


_TAKE: dict[str, Callable[[ModuleType, str, str], type[nn.Module]]] = {
    "layer": _layer_from,
    "func": _func_layer_from,
}
"""Kind of repository → how it takes its layer from the kernel module: a class of its
``layers`` module, or a top-level function wrapped in a pure layer."""


class _Flags(Protocol):
    """The trust flags every hub and lock-file repository has."""

    @property
    def repo_id(self) -> str: ...
    @property
    def trust_remote_code(self) -> object: ...
    @property
    def allow_all_kernels(self) -> bool: ...
    @property
    def check_arch(self) -> bool: ...


def _check_flags(repo: _Flags) -> None:
    name = type(repo).__name__
    vouch(repo.trust_remote_code, f"{name}.trust_remote_code")
    require_bool(repo.allow_all_kernels, f"{name}.allow_all_kernels")
    require_bool(repo.check_arch, f"{name}.check_arch")
    if isinstance(repo.trust_remote_code, list):  # hashable, as a frozen dataclass must be
        object.__setattr__(repo, "trust_remote_code", tuple(repo.trust_remote_code))


def _trusted(repo: _Flags) -> Vouch:
    """Whom the caller vouched for (:data:`kernelhub.signing.trust.Vouch`): ``allow_all_kernels``
    or ``trust_remote_code=True`` every repository of the load, a list of repository ids
    (the ecosystem's allow-list form) those only — not the dependencies they declare."""
    return True if repo.allow_all_kernels else vouch(repo.trust_remote_code)


def _hub_cache_key(kind: str, hub: Hub | str | os.PathLike[str] | None, repo_id: str,
                   version: int | str | None, revision: str | None, name: str) -> CacheKey:
    """Which hub kernel a repository names; the org's signing policy is part of it, so a
    layer loaded under a looser policy is checked again."""
    return (kind, open_hub_arg(hub).key, repo_id, repr(version), revision, name,
            policy_for(repo_id.partition("/")[0]).token)


class _Takes(Record, frozen=True):
    """What a repository takes from its kernel, named by its ``layer_name`` or
    ``func_name`` field (the subclasses below). The source bases (hub, local build, lock
    file) say where the kernel comes from through ``_kernel()``, ``_where()`` and
    ``_key()``."""

    _KIND: ClassVar[str]
    """``"layer"`` or ``"func"``: how the kernel is taken (:data:`_TAKE`), and the field
    that names what is taken (``layer_name``, ``func_name``)."""

    def _kernel(self) -> ModuleType:
        raise NotImplementedError

    def _where(self) -> str:
        raise NotImplementedError

    def _key(self, kind: str, name: str) -> CacheKey:
        raise NotImplementedError

    @property
    def _field(self) -> str:
        return f"{self._KIND}_name"

    @property
    def _name(self) -> str:
        return str(getattr(self, self._field))

    def _require_target(self) -> None:
        if not self._name:
            raise MappingError(f"{type(self).__name__}({self._where()!r}): {self._field} is required")

    def load(self) -> type[nn.Module]:
        return _TAKE[self._KIND](self._kernel(), self._name, self._where())

    def cache_key(self) -> CacheKey:
        return self._key(self._KIND, self._name)

    def __str__(self) -> str:
        return f"{self._where()}:{self._name}"


class _TakesLayer(_Takes, frozen=True):
    """A class from the kernel's ``layers`` module."""

    _KIND = "layer"
    layer_name: str = field(default="", kw_only=True)


class _TakesFunc(_Takes, frozen=True):
    """A function from the kernel's top level, wrapped in a pure layer."""

    _KIND = "func"
    func_name: str = field(default="", kw_only=True)


class _HubRepository(_Takes, frozen=True):
    """Shared fields of repositories that load from a hub."""

    repo_id: str
    version: int | str | None = field(default=None, kw_only=True)
    revision: str | None = field(default=None, kw_only=True)
    trust_remote_code: bool | tuple[str, ...] = field(default=False, kw_only=True)
    allow_all_kernels: bool = field(default=False, kw_only=True)
    hub: Hub | str | os.PathLike[str] | None = field(default=None, kw_only=True, compare=False)
    check_arch: bool = field(default=True, kw_only=True)
    """False: load a build whose declared GPU architectures leave this GPU out (one
    with a Triton fallback, say)."""

    def __post_init__(self, *_args: object, **_kwargs: object) -> None:
        check_repo_id(self.repo_id)
        select_spec(self.version, self.revision)  # one of them at most, well-formed
        _check_flags(self)
        self._require_target()

    @property
    def trusted(self) -> Vouch:
        """Whom the caller vouched for (see :func:`_trusted`)."""
        return _trusted(self)

    def _kernel(self) -> ModuleType:
        if not settings.hub_kernels_enabled():
            raise KernelHubError(
                f"{self._where()}: hub kernels are disabled by USE_HUB_KERNELS="
                f"{os.environ.get('USE_HUB_KERNELS', '')}; unset it to load hub kernels"
            )
        return get_kernel(self.repo_id, self.version, self.revision,
                          trust_remote_code=self.trusted, hub=self.hub,
                          check_arch=self.check_arch)

    def _where(self) -> str:
        pin = (f"@{self.revision}" if self.revision is not None
               else f" version {self.version}" if self.version is not None else "")
        return f"{self.repo_id}{pin}"

    def _key(self, kind: str, name: str) -> CacheKey:
        return (*_hub_cache_key(kind, self.hub, self.repo_id, self.version, self.revision,
                                name), self.check_arch)


class LayerRepository(_TakesLayer, _HubRepository, frozen=True):
    """The layer ``layer_name`` of a hub kernel: ``LayerRepository("org/name",
    layer_name="SiluAndMul", version=1)``. ``user_agent`` is accepted for code written
    for the ecosystem's loader (kernelhub sends its own)."""

    user_agent: str | dict[str, str] | None = field(default=None, kw_only=True, compare=False,
                                          repr=False)


class FuncRepository(_TakesFunc, _HubRepository, frozen=True):
    """The function ``func_name`` of a hub kernel, used as a pure layer's forward."""


class _LocalRepository(_Takes, frozen=True):
    """Shared fields of repositories that load a local build: a variant dir, a ``build/``
    dir or a kernel source dir (see :func:`kernelhub.find_local_variant`). Naming a path
    trusts it.

    ``package_name`` is accepted for compatibility; when given it must equal the
    kernel's name in its metadata, which catches a path pointing at the wrong kernel.
    """

    repo_path: Path
    package_name: str | None = field(default=None, kw_only=True)
    check_arch: bool = field(default=True, kw_only=True)
    """Accepted for the ecosystem's signature; a local build is loaded as it is."""

    def __post_init__(self, *_args: object, **_kwargs: object) -> None:
        object.__setattr__(self, "repo_path", Path(self.repo_path).expanduser())
        require_bool(self.check_arch, f"{type(self).__name__}.check_arch")
        self._require_target()

    def _kernel(self) -> ModuleType:
        module = get_local_kernel(self.repo_path)
        _check_package(module, self.package_name, self.repo_path)
        return module

    def _where(self) -> str:
        return str(self.repo_path)

    def _key(self, kind: str, name: str) -> CacheKey:
        return (f"local-{kind}", str(find_local_variant(self.repo_path)), self.package_name,
                name)


class LocalLayerRepository(_TakesLayer, _LocalRepository, frozen=True):
    """The layer ``layer_name`` of a local build."""


class LocalFuncRepository(_TakesFunc, _LocalRepository, frozen=True):
    """A function of a local build, used as a pure layer's forward."""


def _check_package(module: ModuleType, package_name: str | None, path: Path) -> None:
    if package_name is None:
        return
    name = read_metadata(Path(module.__file__).parent).name  # type: ignore[arg-type]
    if name != package_name:
        raise KernelLoadError(
            f"{path} holds kernel {name!r}, not the expected package {package_name!r}; "
            "check the path or the package_name"
        )


# -- lock files --------------------------------------------------------------------


def locked_revision(repo_id: str, lockfile: Path | None) -> str:
    """The commit ``repo_id`` is pinned to in ``lockfile`` (default ``./kernels.lock``);
    the format is :mod:`kernelhub.lock`'s."""
    return lock_entry(repo_id, lockfile).sha


class _LockedRepository(_Takes, frozen=True):
    """Loads through the hub repository its lock file pins (resolved at each load, so an
    edited lock file takes effect without rebuilding the mapping).

    Without ``lockfile``, the pin comes from the ``kernels.lock`` in the package metadata
    of the installed distribution whose code constructs the repository (where the
    ecosystem's loader looks: a library ships its pins inside its wheel), read once
    here; else from ``./kernels.lock`` at each load. The repository is a plain value, so
    it pickles (for multiprocessing and ``torch.save`` of a mapping).
    """

    repo_id: str
    lockfile: Path | None = field(default=None, kw_only=True)
    trust_remote_code: bool | tuple[str, ...] = field(default=False, kw_only=True)
    allow_all_kernels: bool = field(default=False, kw_only=True)
    hub: Hub | str | os.PathLike[str] | None = field(default=None, kw_only=True, compare=False)
    check_arch: bool = field(default=True, kw_only=True)
    pinned: LockPins | None = field(default=None, kw_only=True, repr=False)
    """The caller's distribution's lock (see above); found, not given."""

    def __post_init__(self, *_args: object, **_kwargs: object) -> None:
        _check_flags(self)
        self._require_target()
        if self.lockfile is None and self.pinned is None:
            object.__setattr__(self, "pinned", _caller_distribution_pins(self.repo_id))

    def _pins(self) -> LockPins:
        """The whole lock: the kernel's pin and those of every kernel it depends on."""
        return self.pinned if self.pinned is not None else read_pins(self.lockfile)

    def _kernel(self) -> ModuleType:
        """The kernel at the locked commit, checked against the lock's hash before import;
        its dependencies at the commits the same lock pins, checked alike."""
        pins = self._pins()
        return load_locked_entry(pins.pick(self.repo_id), pins=pins, hub=self.hub,
                                 trust_remote_code=_trusted(self), check_arch=self.check_arch)

    def _where(self) -> str:
        return f"{self.repo_id} (locked)"

    def _key(self, kind: str, name: str) -> CacheKey:
        """The key of the hub repository at the locked commit, and the lock file."""
        revision = self._pins().pick(self.repo_id).sha
        return (*_hub_cache_key(kind, self.hub, self.repo_id, None, revision, name),
                "locked", str(self.lockfile), self.check_arch)


_OWN_PACKAGES = frozenset({"kernelhub", "_kernelhub_autoload", "dataclasses"})


def _caller_distribution_pins(repo_id: str) -> LockPins | None:
    """The lock of the installed distribution whose code is constructing a locked
    repository, checked to pin ``repo_id`` (None: not installed code, or no lock there)."""
    frame: FrameType | None = sys._getframe(1)
    # Skip our frames and the dataclass-generated __init__ (compiled from "<string>").
    while frame is not None and (
            frame.f_globals.get("__name__", "").partition(".")[0] in _OWN_PACKAGES
            or frame.f_code.co_filename == "<string>"):
        frame = frame.f_back
    caller = frame.f_globals.get("__name__", "") if frame is not None else ""
    if not caller or caller == "__main__":
        return None
    found = distribution_lock(caller)
    if found is not None:
        found.pick(repo_id)  # a lock without the repository fails here, not at first use
    return found


class LockedLayerRepository(_TakesLayer, _LockedRepository, frozen=True):
    """A hub layer pinned to the commit a lock file records for its repository."""


class LockedFuncRepository(_TakesFunc, _LockedRepository, frozen=True):
    """A hub function pinned to the commit a lock file records for its repository."""
