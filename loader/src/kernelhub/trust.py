"""Refuse to run code from organisations the user has not trusted.

A kernel is a Python package plus native code; loading it runs both with the user's
privileges. The check therefore sits on every path that loads from a hub, including
warm cache loads: a cached copy is no more trusted than the hub it came from.
"""

from __future__ import annotations

from . import settings
from .errors import FlagTypeError, TrustError
from .hub.base import Hub
from .hub.guard import hub_call

DEFAULT_TRUSTED_ORGS: frozenset[str] = frozenset({"kernels-community"})


def user_trusted_orgs() -> frozenset[str]:
    """The default org plus the user's config file and ``$KERNELHUB_TRUSTED_ORGS``."""
    return DEFAULT_TRUSTED_ORGS | settings.trusted_orgs()


def is_trusted(repo_id: str, hub: Hub | None) -> bool:
    """Whether ``repo_id``'s organisation is trusted (asks the hub only if needed)."""
    org = repo_id.partition("/")[0]
    if org in user_trusted_orgs():
        return True
    if hub is None:
        return False
    with hub_call(hub, "reading its trusted organisations"):
        return org in hub.trusted_orgs()


def require_bool(value: object, name: str) -> bool:
    """``value`` if it is a real bool, else :class:`FlagTypeError` naming the flag.

    Opt-ins decide whether foreign code runs, so ``"false"``, ``0`` or ``None`` must not
    be read through ``bool()``: a truthy string would silently say yes.
    """
    if isinstance(value, bool):
        return value
    raise FlagTypeError(
        f"{name} must be True or False, not {type(value).__name__} {value!r}; pass a bool"
    )


def trust_flag(repo_id: str, value: object, name: str = "trust_remote_code") -> bool:
    """The ecosystem's ``trust_remote_code``: a bool, or a list of repository ids trusted
    besides the trusted organisations (its loader's allow-list form)."""
    if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
        return repo_id in value
    if isinstance(value, bool):
        return value
    raise FlagTypeError(
        f"{name} must be True, False or a list of repository ids, not "
        f"{type(value).__name__} {value!r}"
    )


def check_trusted(repo_id: str, hub: Hub | None, trust_remote_code: bool) -> None:
    """Raise :class:`TrustError` unless the caller or the configuration trusts the org."""
    if require_bool(trust_remote_code, "trust_remote_code") or is_trusted(repo_id, hub):
        return
    org = repo_id.partition("/")[0]
    raise TrustError(
        f"refusing to load {repo_id}: loading a kernel runs its Python and native code, and "
        f"organisation {org!r} is not trusted. If you trust it, pass trust_remote_code=True, "
        f"or add it to KERNELHUB_TRUSTED_ORGS (comma-separated) or to [trust] orgs in "
        f"{settings.config_path()}."
    )
