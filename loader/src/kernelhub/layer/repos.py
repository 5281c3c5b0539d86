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
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from .. import settings
from ..api import find_local_variant, get_kernel, get_local_kernel, load_locked_kernel, open_hub_arg
from ..errors import KernelHubError, KernelLoadError, MappingError
from ..hub.base import Hub
from ..lockfile import lock_entry
from ..metadata import read_metadata
from ..signing_policy import policy_for
from ..trust import require_bool
from ..versions import check_repo_id, select_spec
from .decorators import forward_calling

if TYPE_CHECKING:
    from torch import nn


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


def _func_from(module: ModuleType, func_name: str, where: str) -> Any:
    func = getattr(module, func_name, None)
    if func is None or not callable(func):
        names = sorted(n for n in dir(module) if not n.startswith("_")
                       and callable(getattr(module, n)) and not isinstance(getattr(module, n), type))
        raise KernelLoadError(
            f"{where} has no function {func_name!r}; it provides: {', '.join(names) or 'nothing'}"
        )
    return func


def func_layer(func: Any, name: str) -> type[nn.Module]:
    """A pure layer whose forward calls ``func`` (see :func:`forward_calling`).

    ``has_backward`` and ``can_torch_compile`` come from attributes on ``func`` when it
    has them, with the same defaults as a layer class (True, False).
    """
    from torch import nn

    attrs = {
        "forward": forward_calling(func),
        "__doc__": f"Pure layer calling {name}.",
        "has_backward": bool(getattr(func, "has_backward", True)),
        "can_torch_compile": bool(getattr(func, "can_torch_compile", False)),
    }
    return type(name, (nn.Module,), attrs)


def _check_flags(repo: Any) -> None:
    require_bool(repo.trust_remote_code, f"{type(repo).__name__}.trust_remote_code")
    require_bool(repo.allow_all_kernels, f"{type(repo).__name__}.allow_all_kernels")


def _hub_key(hub: Any) -> str:
    return open_hub_arg(hub).key


def _policy_token(repo_id: str) -> bytes:
    """The org's signing policy, so a layer loaded under a looser one is checked again."""
    return policy_for(repo_id.partition("/")[0]).token


@dataclass(frozen=True)
class _HubRepository:
    """Shared fields of repositories that load from a hub."""

    repo_id: str
    version: int | str | None = field(default=None, kw_only=True)
    revision: str | None = field(default=None, kw_only=True)
    trust_remote_code: bool = field(default=False, kw_only=True)
    allow_all_kernels: bool = field(default=False, kw_only=True)
    hub: Hub | str | os.PathLike | None = field(default=None, kw_only=True, compare=False)

    def __post_init__(self) -> None:
        check_repo_id(self.repo_id)
        select_spec(self.version, self.revision)  # one of them at most, well-formed
        _check_flags(self)

    @property
    def trusted(self) -> bool:
        """Whether the caller vouched for this repository's code."""
        return self.trust_remote_code or self.allow_all_kernels

    def _kernel(self) -> ModuleType:
        if not settings.hub_kernels_enabled():
            raise KernelHubError(
                f"{self._where()}: hub kernels are disabled by USE_HUB_KERNELS="
                f"{os.environ.get('USE_HUB_KERNELS', '')}; unset it to load hub kernels"
            )
        return get_kernel(self.repo_id, self.version, self.revision,
                          trust_remote_code=self.trusted, hub=self.hub)

    def _where(self) -> str:
        pin = (f"@{self.revision}" if self.revision is not None
               else f" version {self.version}" if self.version is not None else "")
        return f"{self.repo_id}{pin}"


@dataclass(frozen=True)
class LayerRepository(_HubRepository):
    """The layer ``layer_name`` of a hub kernel: ``LayerRepository("org/name",
    layer_name="SiluAndMul", version=1)``."""

    layer_name: str = field(default="", kw_only=True)

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.layer_name:
            raise MappingError(f"LayerRepository({self.repo_id!r}): layer_name is required")

    def load(self) -> type[nn.Module]:
        return _layer_from(self._kernel(), self.layer_name, self._where())

    def cache_key(self) -> tuple[Any, ...]:
        return ("layer", _hub_key(self.hub), self.repo_id, repr(self.version),
                self.revision, self.layer_name, _policy_token(self.repo_id))

    def __str__(self) -> str:
        return f"{self._where()}:{self.layer_name}"


@dataclass(frozen=True)
class FuncRepository(_HubRepository):
    """The function ``func_name`` of a hub kernel, used as a pure layer's forward."""

    func_name: str = field(default="", kw_only=True)

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.func_name:
            raise MappingError(f"FuncRepository({self.repo_id!r}): func_name is required")

    def load(self) -> type[nn.Module]:
        func = _func_from(self._kernel(), self.func_name, self._where())
        return func_layer(func, self.func_name)

    def cache_key(self) -> tuple[Any, ...]:
        return ("func", _hub_key(self.hub), self.repo_id, repr(self.version),
                self.revision, self.func_name, _policy_token(self.repo_id))

    def __str__(self) -> str:
        return f"{self._where()}:{self.func_name}"


def _local_kernel(repo_path: Path) -> ModuleType:
    return get_local_kernel(repo_path)


def _local_key(repo_path: Path) -> str:
    return str(find_local_variant(repo_path))


@dataclass(frozen=True)
class LocalLayerRepository:
    """A layer from a local build: a variant dir, a ``build/`` dir or a kernel source
    dir (see :func:`kernelhub.find_local_variant`). Naming a path trusts it.

    ``package_name`` is accepted for compatibility; when given it must equal the
    kernel's name in its metadata, which catches a path pointing at the wrong kernel.
    """

    repo_path: Path
    layer_name: str = field(default="", kw_only=True)
    package_name: str | None = field(default=None, kw_only=True)

    def __post_init__(self) -> None:
        object.__setattr__(self, "repo_path", Path(self.repo_path).expanduser())
        if not self.layer_name:
            raise MappingError(f"LocalLayerRepository({str(self.repo_path)!r}): layer_name is required")

    def load(self) -> type[nn.Module]:
        module = _local_kernel(self.repo_path)
        _check_package(module, self.package_name, self.repo_path)
        return _layer_from(module, self.layer_name, str(self.repo_path))

    def cache_key(self) -> tuple[Any, ...]:
        return ("local-layer", _local_key(self.repo_path), self.package_name, self.layer_name)

    def __str__(self) -> str:
        return f"{self.repo_path}:{self.layer_name}"


@dataclass(frozen=True)
class LocalFuncRepository:
    """A function of a local build, used as a pure layer's forward."""

    repo_path: Path
    func_name: str = field(default="", kw_only=True)
    package_name: str | None = field(default=None, kw_only=True)

    def __post_init__(self) -> None:
        object.__setattr__(self, "repo_path", Path(self.repo_path).expanduser())
        if not self.func_name:
            raise MappingError(f"LocalFuncRepository({str(self.repo_path)!r}): func_name is required")

    def load(self) -> type[nn.Module]:
        module = _local_kernel(self.repo_path)
        _check_package(module, self.package_name, self.repo_path)
        return func_layer(_func_from(module, self.func_name, str(self.repo_path)), self.func_name)

    def cache_key(self) -> tuple[Any, ...]:
        return ("local-func", _local_key(self.repo_path), self.package_name, self.func_name)

    def __str__(self) -> str:
        return f"{self.repo_path}:{self.func_name}"


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
    the format is :mod:`kernelhub.lockfile`'s."""
    return lock_entry(repo_id, lockfile).sha


@dataclass(frozen=True)
class _LockedRepository:
    """Loads through the hub repository its lock file pins (resolved at each load, so an
    edited lock file takes effect without rebuilding the mapping)."""

    repo_id: str
    lockfile: Path | None = field(default=None, kw_only=True)
    trust_remote_code: bool = field(default=False, kw_only=True)
    allow_all_kernels: bool = field(default=False, kw_only=True)
    hub: Hub | str | os.PathLike | None = field(default=None, kw_only=True, compare=False)

    def __post_init__(self) -> None:
        _check_flags(self)

    def _pinned(self) -> LayerRepository | FuncRepository:
        raise NotImplementedError

    def _pin(self) -> dict[str, Any]:
        """The hub repository's arguments: the locked commit and the caller's choices."""
        return {"revision": locked_revision(self.repo_id, self.lockfile),
                "trust_remote_code": self.trust_remote_code,
                "allow_all_kernels": self.allow_all_kernels, "hub": self.hub}

    def _locked_kernel(self) -> ModuleType:
        """The kernel at the locked commit, checked against the lock's hash before import."""
        return load_locked_kernel(self.repo_id, lockfile=self.lockfile, hub=self.hub,
                                  trust_remote_code=self.trust_remote_code
                                  or self.allow_all_kernels)

    def cache_key(self) -> tuple[Any, ...]:
        return (*self._pinned().cache_key(), "locked", str(self.lockfile))


@dataclass(frozen=True)
class LockedLayerRepository(_LockedRepository):
    """A hub layer pinned to the commit a lock file records for its repository."""

    layer_name: str = field(default="", kw_only=True)

    def _pinned(self) -> LayerRepository:
        return LayerRepository(self.repo_id, layer_name=self.layer_name, **self._pin())

    def load(self) -> type[nn.Module]:
        return _layer_from(self._locked_kernel(), self.layer_name, str(self))

    def __str__(self) -> str:
        return f"{self.repo_id} (locked):{self.layer_name}"


@dataclass(frozen=True)
class LockedFuncRepository(_LockedRepository):
    """A hub function pinned to the commit a lock file records for its repository."""

    func_name: str = field(default="", kw_only=True)

    def _pinned(self) -> FuncRepository:
        return FuncRepository(self.repo_id, func_name=self.func_name, **self._pin())

    def load(self) -> type[nn.Module]:
        func = _func_from(self._locked_kernel(), self.func_name, str(self))
        return func_layer(func, self.func_name)

    def __str__(self) -> str:
        return f"{self.repo_id} (locked):{self.func_name}"
