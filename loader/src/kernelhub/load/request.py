"""Step 0, a request: the caller's words checked into a :class:`KernelRequest`.

Everything wrong with the words themselves (a malformed repo id, two versions, a hub
argument that is no hub, a trust flag that is not a bool) is refused here, before any
hub is asked.
"""

from __future__ import annotations

# PEP 810: imported when first used (inert before Python 3.15)
__lazy_modules__ = {
    "kernelhub.errors", "kernelhub.hub.calls", "kernelhub.hub.select",
    "kernelhub.signing.trust", "kernelhub.versions",
}

import os
from collections.abc import Collection
from typing import TYPE_CHECKING

from ..errors import HubError
from ..hub.base import Hub
from ..hub.calls import guard
from ..hub.select import open_hub
from ..signing.trust import Vouch, require_bool, vouch
from ..value_types import Record
from ..versions import VersionSpec, check_repo_id, select_spec

if TYPE_CHECKING:
    from ..deps import KernelDependency
    from ..lock import LockEntry, LockPins

HubArg = Hub | str | os.PathLike[str] | None
"""A Hub, or what :func:`kernelhub.hub.select.open_hub` accepts: a path, URL, "hf", None."""


class KernelRequest(Record, frozen=True):
    """A hub kernel as the caller named it, checked: nothing has asked the hub yet."""

    repo_id: str
    spec: VersionSpec | None
    """None: the repository's default (its highest ``v<N>`` branch, else ``main``)."""
    hub: Hub
    backend: str | None = None
    trust_remote_code: Vouch = False
    """Whom the caller vouched for (:data:`kernelhub.signing.trust.Vouch`); the kernel's
    dependencies are judged by the same value."""
    lock: LockEntry | None = None
    """The lock-file entry the load must match (a locked load), else None."""
    pins: LockPins | None = None
    """A locked load's whole lock: its kernel's dependencies load as it pins them."""
    check_arch: bool = True
    """False loads a build whose declared GPU architectures miss this GPU's (one with a
    Triton fallback, say): the ecosystem's ``check_arch=`` of its load functions."""

    @property
    def org(self) -> str:
        return self.repo_id.partition("/")[0]

    def describe(self) -> str:
        """The spec as the memo keys it: two requests with one description load alike."""
        return repr(self.spec)


def open_hub_arg(hub: HubArg) -> Hub:
    """The hub a load reads: a Hub, a target string (path, URL, "hf") or None (the
    default hub), its every call reporting a failure as one line (:func:`guard`)."""
    if isinstance(hub, Hub):
        return guard(hub)
    if hub is not None and not isinstance(hub, str | os.PathLike):
        raise HubError(
            f"hub={hub!r} is not a hub: pass a Hub, a path, an http(s) URL, 'hf' or None"
        )
    return guard(open_hub(hub))


def kernel_request(
    repo_id: str,
    version: int | str | None = None,
    revision: str | None = None,
    *,
    hub: HubArg = None,
    backend: str | None = None,
    trust_remote_code: bool | Collection[str] = False,
    lock: LockEntry | None = None,
    pins: LockPins | None = None,
    check_arch: bool = True,
) -> KernelRequest:
    """The one parameter list of the hub loads, checked (see the module docstring)."""
    check_repo_id(repo_id)
    spec = select_spec(version, revision)
    vouched = vouch(trust_remote_code)
    require_bool(check_arch, "check_arch")
    return KernelRequest(repo_id, spec, open_hub_arg(hub), backend, vouched, lock,
                         pins, check_arch)


def dependency_request(dep: KernelDependency, parent: KernelRequest | None) -> KernelRequest:
    """How ``dep`` loads for ``parent``: on its hub with its backend and trust (the default
    hub and trust for a local build: ``parent`` None); for a locked load, at the commit the
    same lock pins, checked against that pin's hashes (a dependency the lock does not pin
    is refused, naming the chain: a fresh resolution would load what nobody locked)."""
    if parent is None:
        return kernel_request(dep.repo_id, dep.version, dep.revision)
    if parent.pins is not None:
        pin = parent.pins.pick(dep.repo_id)
        return kernel_request(dep.repo_id, revision=pin.sha, hub=parent.hub,
                              backend=parent.backend,
                              trust_remote_code=parent.trust_remote_code, lock=pin,
                              pins=parent.pins)
    return kernel_request(dep.repo_id, dep.version, dep.revision, hub=parent.hub,
                          backend=parent.backend, trust_remote_code=parent.trust_remote_code)
