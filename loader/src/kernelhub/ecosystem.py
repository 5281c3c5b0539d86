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
from pathlib import Path
from types import ModuleType
from typing import Any

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
    trust_remote_code: bool = False,
) -> ModuleType:
    """Load a kernel from the hub (the ecosystem's argument order).

    ``user_agent`` is accepted for compatibility; kernelhub sends its own.
    """
    from . import api

    del user_agent
    if (local := local_override(repo_id)) is not None:
        return api.get_local_kernel(local, backend=backend)
    return api.get_kernel(repo_id, version, revision, trust_remote_code=trust_remote_code,
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
    """Load the commit ``lockfile`` pins for ``repo_id``, checked against its hash."""
    from . import api

    return api.load_locked_kernel(repo_id, lockfile=lockfile, backend=backend)


def get_locked_kernel(repo_id: str) -> ModuleType:
    """Load ``repo_id`` as ``./kernels.lock`` pins it (the project's lock file)."""
    return load_kernel(repo_id, lockfile=None)


def install_kernel(repo_id: str, revision: str, local_files_only: bool = False,
                   backend: str | None = None, user_agent: str | dict | None = None,
                   **_: Any) -> Path:
    """Fetch the variant of ``repo_id`` at ``revision`` for this system; return its directory.

    ``local_files_only=True`` uses the cache only (kernelhub's offline mode for this call).
    """
    from . import api

    del user_agent
    if local_files_only:
        import os

        previous = os.environ.get("KERNELHUB_OFFLINE")
        os.environ["KERNELHUB_OFFLINE"] = "1"
        try:
            return api.locate_kernel(repo_id, revision=revision, backend=backend)
        finally:
            if previous is None:
                del os.environ["KERNELHUB_OFFLINE"]
            else:
                os.environ["KERNELHUB_OFFLINE"] = previous
    return api.locate_kernel(repo_id, revision=revision, backend=backend)


__all__ = [*_LAYER_NAMES, "get_kernel", "get_local_kernel", "get_locked_kernel", "has_kernel",
           "install_kernel", "load_kernel"]


def __getattr__(name: str) -> Any:
    if name in _LAYER_NAMES:
        value = getattr(importlib.import_module("kernelhub.layer"), name)
        globals()[name] = value
        return value
    raise AttributeError(
        f"kernelhub serves the ecosystem's `kernels` API in part; {name!r} is not part of it. "
        "Install the ecosystem's package (pip install kernels) to use it instead."
    )
