"""The kernel ecosystem's loader API (the ``kernels`` package), served by kernelhub.

Code written for the ecosystem calls ``get_kernel(repo_id, revision, version, …)``
with *revision before version*, ``get_local_kernel(repo_path, package_name)`` and the
lock-file loaders; kernelhub's own functions take ``version`` first and keyword-only
options. This module gives the ecosystem's signatures (positions and keywords) over
kernelhub's implementation, and is what ``import kernels`` returns when the ecosystem's
own package is not installed (see ``_kernelhub_autoload``).

Where ours is better we keep ours in :mod:`kernelhub` and say so in docs/ecosystem.md:
versions accept the one grammar (int major, tag, specifier, sha) rather than an int
only, and ``trust_remote_code`` is checked on every path.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import FrameType, ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .lockfile import LockEntry

_LAYER_NAMES = (
    "CUDAProperties", "Device", "FuncRepository", "LayerRepository", "LocalFuncRepository",
    "LocalLayerRepository", "LockedFuncRepository", "LockedLayerRepository", "Mode",
    "ROCMProperties", "kernelize", "register_kernel_mapping", "replace_kernel_forward_from_hub",
    "use_kernel_forward_from_hub", "use_kernel_func_from_hub", "use_kernel_mapping",
    "use_kernelized_func",
)
"""Served from :mod:`kernelhub.layer` as they are, imported on first use: Transformers
imports ``kernels`` just to probe for it, which must stay cheap."""

BACKENDS = frozenset({"cpu", "cuda", "rocm", "xpu", "metal", "mps", "npu"})
"""Backend names the ecosystem's ``backend=`` accepts (second positional of get_local_kernel)."""


LOCAL_KERNELS = "LOCAL_KERNELS"
"""``org/a=/path/a:org/b=/path/b``: repositories served from local builds instead of a hub
(the ecosystem's variable; a kernel's own tests use it to load the build under test)."""


def local_override(repo_id: str) -> Path | None:
    """The local build ``LOCAL_KERNELS`` names for ``repo_id``, if any."""
    import os

    from .errors import KernelHubError

    value = os.environ.get(LOCAL_KERNELS, "")
    for entry in filter(None, value.split(":")):
        name, sep, path = entry.partition("=")
        if not sep:
            raise KernelHubError(f"{LOCAL_KERNELS}: entry {entry!r} is not org/name=/path; "
                                 "separate entries with ':'")
        if name == repo_id:
            return Path(path)
    return None


def get_kernel(
    repo_id: str,
    revision: str | None = None,
    version: int | str | None = None,
    backend: str | None = None,
    user_agent: str | dict | None = None,
    trust_remote_code: bool | list[str] = False,
) -> ModuleType:
    """Load a kernel from the hub (the ecosystem's argument order).

    ``user_agent`` is accepted for compatibility; kernelhub sends its own.
    ``trust_remote_code`` may list repository ids, as the ecosystem's loader allows.
    """
    from . import api
    from .trust import trust_flag

    del user_agent
    if (local := local_override(repo_id)) is not None:
        return api.get_local_kernel(local, backend=backend)
    return api.get_kernel(repo_id, version, revision,
                          trust_remote_code=trust_flag(repo_id, trust_remote_code),
                          backend=backend)


def has_kernel(
    repo_id: str,
    revision: str | None = None,
    version: int | str | None = None,
    backend: str | None = None,
) -> bool:
    """Whether the hub has a build of ``repo_id`` this system can load."""
    from . import api

    if (local := local_override(repo_id)) is not None:
        return local.exists()
    return api.has_kernel(repo_id, version, revision, backend=backend)


def get_local_kernel(repo_path: Path | str, package_name: str | None = None,
                     backend: str | None = None) -> ModuleType:
    """Load a local build.

    The second positional argument was ``package_name`` in older ecosystem releases and
    is ``backend`` in newer ones; a backend name is taken as the backend, anything else
    as the package name, which is checked against the build's metadata.
    """
    from . import api

    if package_name is not None and package_name in BACKENDS and backend is None:
        package_name, backend = None, package_name
    module = api.get_local_kernel(repo_path, backend=backend)
    if package_name is not None:
        from .metadata import METADATA_FILE, read_metadata

        variant = api.find_local_variant(repo_path, backend=backend)
        name = read_metadata(variant).name if (variant / METADATA_FILE).is_file() else None
        if name is not None and name.replace("-", "_") != package_name.replace("-", "_"):
            from .errors import KernelHubError

            raise KernelHubError(
                f"{repo_path} holds kernel {name!r}, not {package_name!r}; pass the package "
                "name its metadata.json declares"
            )
    return module


def load_kernel(repo_id: str, *, lockfile: Path | str | None = None,
                backend: str | None = None) -> ModuleType:
    """Load the commit the lock file pins for ``repo_id``, checked against its hash.

    Without ``lockfile``, the lock is found as :func:`get_locked_kernel` finds it.
    """
    from . import api

    return api.load_locked_entry(_locked_entry(repo_id, lockfile), backend=backend)


def get_locked_kernel(repo_id: str, *, lockfile: Path | str | None = None,
                      trust_remote_code: bool | list[str] = False,
                      user_agent: str | dict | None = None,
                      local_files_only: bool = False) -> ModuleType:
    """Load ``repo_id`` as a lock file pins it.

    Without ``lockfile``, the lock is the ``kernels.lock`` in the package metadata of the
    installed distribution the calling code belongs to (where the ecosystem's loader
    looks: a library ships its pins inside its wheel), else ``./kernels.lock``
    (kernelhub's project lock, which ``kernelhub lock`` writes). ``local_files_only``
    (the ecosystem's older keyword) loads from the cache only, for this call alone.
    """
    from . import api, settings
    from .trust import trust_flag

    del user_agent
    entry = _locked_entry(repo_id, lockfile)
    trusted = trust_flag(repo_id, trust_remote_code)
    if not local_files_only:
        return api.load_locked_entry(entry, trust_remote_code=trusted)
    with settings.offline_here():
        return api.load_locked_entry(entry, trust_remote_code=trusted)


_OWN_MODULES = ("kernelhub", "kernels", "_kernelhub_autoload")
"""Top-level packages whose frames are ours, not the caller's."""


def _locked_entry(repo_id: str, lockfile: Path | str | None) -> LockEntry:
    """``repo_id``'s entry in ``lockfile``, else in the calling code's distribution lock,
    else in ``./kernels.lock``."""
    from .lockfile import distribution_lock, lock_entry, pick_entry

    if lockfile is None:
        frame: FrameType | None = sys._getframe(1)
        while frame is not None and frame.f_globals.get("__name__", "").partition(".")[0] in (
                _OWN_MODULES):
            frame = frame.f_back
        caller = frame.f_globals.get("__name__", "") if frame is not None else ""
        if caller and caller != "__main__" and (found := distribution_lock(caller)):
            entries, where = found
            return pick_entry(repo_id, entries, where)
    return lock_entry(repo_id, Path(lockfile) if lockfile is not None else None)


def install_kernel(repo_id: str, revision: str | None = None, local_files_only: bool = False,
                   backend: str | None = None, user_agent: str | dict | None = None, *,
                   version: int | str | None = None,
                   trust_remote_code: bool | list[str] = False, **_: Any) -> Path:
    """Fetch the variant of ``repo_id`` at ``revision`` (or ``version``) for this system;
    return its directory, without importing it.

    ``local_files_only=True`` uses the cache only, for this call alone: other threads
    keep loading online meanwhile. The org must be trusted, as for a load.
    """
    from . import api, settings
    from .trust import check_trusted, trust_flag

    del user_agent
    check_trusted(repo_id, api.open_hub_arg(None), trust_flag(repo_id, trust_remote_code))
    if not local_files_only:
        return api.locate_kernel(repo_id, version, revision, backend=backend)
    with settings.offline_here():
        return api.locate_kernel(repo_id, version, revision, backend=backend)


_DEPS_NAMES = ("get_kernel_dep",)
"""Served from :mod:`kernelhub.deps`: what a kernel calls for a dependency while it loads."""

__all__ = [*_LAYER_NAMES, *_DEPS_NAMES, "get_kernel", "get_local_kernel", "get_locked_kernel",
           "has_kernel", "install_kernel", "load_kernel"]


def __getattr__(name: str) -> Any:
    if name in _LAYER_NAMES or name in _DEPS_NAMES:
        home = "kernelhub.layer" if name in _LAYER_NAMES else "kernelhub.deps"
        value = getattr(importlib.import_module(home), name)
        globals()[name] = value
        return value
    raise AttributeError(
        f"kernelhub serves the ecosystem's `kernels` API in part; {name!r} is not part of it. "
        "Install the ecosystem's package (pip install kernels) to use it instead."
    )
