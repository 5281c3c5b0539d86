"""The ecosystem's load functions (``kernels.get_kernel`` and friends) over kernelhub.

Code written for the ecosystem calls ``get_kernel(repo_id, revision=…, version=…)``
(keyword-only since 0.19; older releases took ``revision`` positionally before
``version``, which we still accept), ``get_local_kernel(repo_path, …)`` and the lock-file
loaders; kernelhub's own functions take ``version`` first and options keyword-only.
Each function here has the ecosystem's parameters (a superset: every call 0.19.1
accepts is accepted) and kernelhub's implementation.

Where ours is better we keep ours and say so in docs/ecosystem.md: versions accept the
one grammar (int major, tag, specifier, sha) rather than an int only, and trust is
checked on every path.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from types import FrameType, ModuleType
from typing import TYPE_CHECKING, Any

from .. import errors

if TYPE_CHECKING:
    from .. import lock

BACKENDS = frozenset({"cpu", "cuda", "rocm", "xpu", "metal", "mps", "npu"})
"""Backend names the ecosystem's ``backend=`` accepts (second positional of get_local_kernel)."""


LOCAL_KERNELS = "LOCAL_KERNELS"
"""``org/a=/path/a:org/b=/path/b``: repositories served from local builds instead of a hub
(the ecosystem's variable; a kernel's own tests use it to load the build under test)."""


def local_override(repo_id: str) -> Path | None:
    """The local build ``LOCAL_KERNELS`` names for ``repo_id``, if any."""
    value = os.environ.get(LOCAL_KERNELS, "")
    for entry in filter(None, value.split(":")):
        name, sep, path = entry.partition("=")
        if not sep:
            raise errors.KernelHubError(f"{LOCAL_KERNELS}: entry {entry!r} is not "
                                        "org/name=/path; separate entries with ':'")
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
    check_arch: bool = True,
) -> ModuleType:
    """Load a kernel from the hub (the ecosystem's argument order).

    ``user_agent`` is accepted for compatibility; kernelhub sends its own.
    ``trust_remote_code`` may list repository ids, as the ecosystem's loader allows.
    ``check_arch=False`` loads a build whose declared GPU architectures leave this GPU
    out (one with a Triton fallback, say).
    """
    from .. import api
    from ..signing import trust
    del user_agent
    if (local := local_override(repo_id)) is not None:
        return api.get_local_kernel(local, backend=backend)
    return api.get_kernel(repo_id, version, revision,
                          trust_remote_code=trust.vouch(trust_remote_code),
                          backend=backend, check_arch=check_arch)


def has_kernel(
    repo_id: str,
    revision: str | None = None,
    version: int | str | None = None,
    backend: str | None = None,
    trust_remote_code: bool | list[str] = False,
    check_arch: bool = True,
) -> bool:
    """Whether the hub has a build of ``repo_id`` this system can load.

    As kernels 0.19.1 answers: False only when the repository and version exist but hold
    no build for this system; a missing repository or version raises
    (:class:`~kernelhub.errors.RepoNotFoundError`,
    :class:`~kernelhub.errors.VersionSpecError`, a ``ValueError`` as theirs is), so a
    typo is not read as "no kernel". Nothing is loaded, so neither trust nor the GPU
    architectures are consulted: ``trust_remote_code`` and ``check_arch`` are accepted
    for the ecosystem's signature.
    """
    from .. import api
    del trust_remote_code, check_arch

    if (local := local_override(repo_id)) is not None:
        return local.exists()
    resolution = api.resolve_kernel(repo_id, version, revision, backend=backend)
    return resolution.selection.chosen is not None


def get_local_kernel(repo_path: Path | str, package_name: str | None = None,
                     backend: str | None = None, *,
                     trust_remote_code: bool | list[str] = False,
                     user_agent: str | dict | None = None,
                     check_arch: bool = True) -> ModuleType:
    """Load a local build.

    The second positional argument was ``package_name`` in older ecosystem releases and
    is ``backend`` in newer ones; a backend name is taken as the backend, anything else
    as the package name, which is checked against the build's metadata. Naming a path
    trusts it, and a local build is loaded as it is: ``trust_remote_code``,
    ``user_agent`` and ``check_arch`` are accepted for the ecosystem's signature.
    """
    from .. import api
    from ..formats import metadata
    del trust_remote_code, user_agent, check_arch

    if package_name is not None and package_name in BACKENDS and backend is None:
        package_name, backend = None, package_name
    module = api.get_local_kernel(repo_path, backend=backend)
    if package_name is not None:
        variant = api.find_local_variant(repo_path, backend=backend)
        name = (metadata.read_metadata(variant).name
                if (variant / metadata.METADATA_FILE).is_file() else None)
        if name is not None and name.replace("-", "_") != package_name.replace("-", "_"):
            raise errors.KernelHubError(
                f"{repo_path} holds kernel {name!r}, not {package_name!r}; pass the package "
                "name its metadata.json declares"
            )
    return module


def load_kernel(repo_id: str, *, lockfile: Path | str | None = None,
                backend: str | None = None, check_arch: bool = True) -> ModuleType:
    """Load the commit the lock file pins for ``repo_id``, checked against its hash.

    Without ``lockfile``, the lock is found as :func:`get_locked_kernel` finds it.
    """
    from .. import api
    pins = _locked_pins(lockfile)
    return api.load_locked_entry(pins.pick(repo_id), pins=pins, backend=backend,
                                 check_arch=check_arch)


def get_locked_kernel(repo_id: str, *, lockfile: Path | str | None = None,
                      trust_remote_code: bool | list[str] = False,
                      user_agent: str | dict | None = None,
                      local_files_only: bool = False,
                      check_arch: bool = True) -> ModuleType:
    """Load ``repo_id`` as a lock file pins it.

    Without ``lockfile``, the lock is the ``kernels.lock`` in the package metadata of the
    installed distribution the calling code belongs to (where the ecosystem's loader
    looks: a library ships its pins inside its wheel), else ``./kernels.lock``
    (kernelhub's project lock, which ``kernelhub lock`` writes). ``local_files_only``
    (the ecosystem's older keyword) loads from the cache only, for this call alone.
    """
    from .. import api, settings
    from ..signing import trust
    del user_agent
    pins = _locked_pins(lockfile)
    entry = pins.pick(repo_id)
    trusted = trust.vouch(trust_remote_code)
    if not local_files_only:
        return api.load_locked_entry(entry, pins=pins, trust_remote_code=trusted,
                                     check_arch=check_arch)
    with settings.offline_here():
        return api.load_locked_entry(entry, pins=pins, trust_remote_code=trusted,
                                     check_arch=check_arch)


_OWN_MODULES = ("kernelhub", "kernels", "_kernelhub_autoload")
"""Top-level packages whose frames are ours, not the caller's."""


def _locked_pins(lockfile: Path | str | None) -> lock.LockPins:
    """``lockfile``, else the calling code's distribution lock, else ``./kernels.lock``:
    the lock a kernel and its dependencies load from."""
    from .. import lock
    if lockfile is None:
        frame: FrameType | None = sys._getframe(1)
        while frame is not None and frame.f_globals.get("__name__", "").partition(".")[0] in (
                _OWN_MODULES):
            frame = frame.f_back
        caller = frame.f_globals.get("__name__", "") if frame is not None else ""
        if caller and caller != "__main__" and (found := lock.distribution_lock(caller)):
            return found
    return lock.read_pins(lockfile)


def install_kernel(repo_id: str, revision: str | None = None, local_files_only: bool = False,
                   backend: str | None = None, user_agent: str | dict | None = None, *,
                   version: int | str | None = None,
                   trust_remote_code: bool | list[str] = False, **_: Any) -> Path:
    """Fetch the variant of ``repo_id`` at ``revision`` (or ``version``) for this system;
    return its directory, without importing it.

    ``local_files_only=True`` uses the cache only, for this call alone: other threads
    keep loading online meanwhile. The org must be trusted, as for a load.
    """
    from .. import api, settings
    from ..signing import trust
    del user_agent
    trusted = trust.vouch(trust_remote_code)
    if not local_files_only:
        return api.locate_kernel(repo_id, version, revision, backend=backend,
                                 trust_remote_code=trusted)
    with settings.offline_here():
        return api.locate_kernel(repo_id, version, revision, backend=backend,
                                 trust_remote_code=trusted)
