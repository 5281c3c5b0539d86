"""User settings, read from the environment and the config file at call time.

Nothing here is cached in a module global: tests and long-running processes change
environment variables and expect the next call to see them. Reading a few variables and
a small TOML file costs microseconds next to loading a kernel.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from .errors import KernelHubError, PathError
from .user_files import read_bounded, user_path
from .value_types import Record

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}

_warned_disabled = False
"""USE_HUB_KERNELS=0 warns once per process, not once per layer."""

_offline_here: ContextVar[bool] = ContextVar("kernelhub_offline_here", default=False)
"""Offline mode for the current thread or task only (see :func:`offline_here`)."""


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in _TRUE


def cache_dir() -> Path:
    """Root of the kernel cache: ``$KERNELHUB_CACHE`` or ``~/.cache/kernelhub``."""
    if value := os.environ.get("KERNELHUB_CACHE"):
        return user_path(value, "KERNELHUB_CACHE")
    return _home() / ".cache" / "kernelhub"


def _home() -> Path:
    try:
        return Path.home()
    except RuntimeError:  # no HOME and no user database entry (a bare container)
        raise PathError("cannot find the home directory (HOME is not set); set HOME, or "
                        "KERNELHUB_CACHE and KERNELHUB_CONFIG") from None


def offline() -> bool:
    """Offline mode: resolve versions from the cache, never contact a hub.

    ``HF_HUB_OFFLINE`` is honoured too, so one switch covers huggingface_hub and us.
    """
    return _offline_here.get() or _env_flag("KERNELHUB_OFFLINE") or _env_flag("HF_HUB_OFFLINE")


REFS_TTL_ENV = "KERNELHUB_REFS_TTL"
DEFAULT_REFS_TTL = 60.0
"""Seconds. Long enough that the processes a job starts together (torchrun ranks, a worker
pool, a test run, a script run again while editing) share one answer of the server; short
enough that a release published a minute ago is loaded (see docs/decisions.md, issue 22)."""


def refs_ttl() -> float:
    """How many seconds the refs a Hub-API server sent answer later loads in their place:
    ``$KERNELHUB_REFS_TTL`` (0: ask the server on every load), default
    :data:`DEFAULT_REFS_TTL`."""
    raw = os.environ.get(REFS_TTL_ENV, "").strip()
    if not raw:
        return DEFAULT_REFS_TTL
    try:
        seconds = float(raw)
    except ValueError:
        seconds = -1.0
    if not 0 <= seconds < float("inf"):
        raise KernelHubError(
            f"{REFS_TTL_ENV}={raw!r} is not a number of seconds; set it to 0 (ask the hub "
            f"on every load) or more (default {DEFAULT_REFS_TTL:g})"
        )
    return seconds


@contextmanager
def offline_here() -> Iterator[None]:
    """Offline mode inside the block, for this thread (or asyncio task) only.

    What a per-call ``local_files_only=True`` needs: setting the environment variable
    instead would switch every other thread of the process offline meanwhile, and two
    such calls restoring it out of order would leave it on for good.
    """
    token = _offline_here.set(True)
    try:
        yield
    finally:
        _offline_here.reset(token)


def config_path() -> Path:
    """The user config file: ``$KERNELHUB_CONFIG`` or ``~/.config/kernelhub/config.toml``."""
    if value := os.environ.get("KERNELHUB_CONFIG"):
        return user_path(value, "KERNELHUB_CONFIG")
    return _home() / ".config" / "kernelhub" / "config.toml"


def read_config() -> dict[str, object]:
    """The parsed config file, or ``{}`` when there is none."""
    path = config_path()
    try:
        raw = read_bounded(path)
    except FileNotFoundError:
        return {}
    except OSError as e:
        raise KernelHubError(
            f"cannot read the config file {path}: {e.strerror or e}; fix it, or point "
            "KERNELHUB_CONFIG at a file"
        ) from None
    from . import tomlfile
    try:
        return tomlfile.parse_toml(raw)
    except tomlfile.TomlError as e:
        raise KernelHubError(f"{path}: {e}; fix or remove the file") from None


def _config_trusted_orgs() -> set[str]:
    trust = read_config().get("trust", {})
    orgs = trust.get("orgs", []) if isinstance(trust, dict) else None
    if not isinstance(orgs, list) or not all(isinstance(o, str) for o in orgs):
        raise KernelHubError(
            f"{config_path()}: [trust] orgs must be a list of strings, e.g. "
            'orgs = ["my-org"]'
        )
    return {o.strip() for o in orgs if o.strip()}


def trusted_orgs() -> frozenset[str]:
    """Organisations the user trusts: ``$KERNELHUB_TRUSTED_ORGS`` plus the config file."""
    return frozenset(_env_list("KERNELHUB_TRUSTED_ORGS") | _config_trusted_orgs())


def hub_path() -> list[str]:
    """The hubs ``[hub] path`` of the config file names, in order (``[]``: not set).

    Config file::

        [hub]
        path = ["~/team-hub", "https://hub.example.org", "hf"]

    ``$KERNELHUB_HUB`` (comma-separated) replaces it when set, and ``--hub`` replaces both:
    the nearer word wins whole, hubs are never merged across settings.
    """
    table = read_config().get("hub", {})
    if not isinstance(table, dict):
        raise KernelHubError(f'{config_path()}: [hub] must be a table, e.g. path = ["hf"]')
    return _config_strings(table, "path", "[hub]", '["~/team-hub", "hf"]')


def hub_kernels_enabled() -> bool:
    """False when ``USE_HUB_KERNELS`` is 0/off/no/false; warns the first time it is off.

    The warning matters because the switch silently changes which code runs a model.
    """
    global _warned_disabled
    value = os.environ.get("USE_HUB_KERNELS", "").strip().lower()
    if value not in _FALSE:
        return True
    if not _warned_disabled:
        _warned_disabled = True
        warnings.warn(
            f"USE_HUB_KERNELS={os.environ['USE_HUB_KERNELS']}: hub kernels are disabled, "
            "models run their PyTorch code",
            stacklevel=2,
        )
    return False


def _env_list(name: str) -> set[str]:
    return {o.strip() for o in os.environ.get(name, "").split(",")} - {""}


def _config_strings(table: dict[str, object], key: str, where: str, example: str) -> list[str]:
    value = table.get(key, [])
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise KernelHubError(f"{config_path()}: {where} {key} must be a list of strings, e.g. {example}")
    return [v.strip() for v in value if v.strip()]


class SigningSettings(Record, frozen=True):
    """The raw release-signing policy; :mod:`kernelhub.signing.trust` interprets it.

    Config file::

        [signing]
        allowed-signers = "allowed_signers"   # OpenSSH allowed_signers file(s); the
                                              # principals are org names (patterns allowed)
        require = ["my-org"]                  # refuse unsigned releases ("*": every org)
        allow-unsigned = ["hf-org"]           # load unsigned releases even so
        [signing.keys]
        my-org = ["ssh-ed25519 AAAA… release-2026"]

    Environment (added to the file's values): ``KERNELHUB_ALLOWED_SIGNERS`` (paths,
    separated like PATH), ``KERNELHUB_REQUIRE_SIGNED`` and ``KERNELHUB_ALLOW_UNSIGNED``
    (comma-separated org names or patterns).
    """

    allowed_signers_files: tuple[Path, ...] = ()
    keys: tuple[tuple[str, str], ...] = ()
    """(org, "ssh-ed25519 AAAA… comment") pairs from [signing.keys]."""
    require: frozenset[str] = frozenset()
    allow_unsigned: frozenset[str] = frozenset()


def sigstore_section() -> dict[str, Any] | None:
    """``[signing.sigstore]`` of the config file, or None when it has none (then no org
    has a sigstore policy, and a load never imports :mod:`kernelhub.signing.sigstore`)."""
    table = read_config().get("signing", {})
    section = table.get("sigstore") if isinstance(table, dict) else None
    return section if isinstance(section, dict) else None


def signing() -> SigningSettings:
    """The release-signing settings from ``[signing]`` and the environment."""
    table = read_config().get("signing", {})
    if not isinstance(table, dict):
        raise KernelHubError(f"{config_path()}: [signing] must be a table")
    base = config_path().parent
    files = [
        base / user_path(p, f"{config_path()}: [signing] allowed-signers")
        for p in _config_strings(table, "allowed-signers", "[signing]", '"allowed_signers"')
    ]
    files += [user_path(p, "KERNELHUB_ALLOWED_SIGNERS") for p in
              os.environ.get("KERNELHUB_ALLOWED_SIGNERS", "").split(os.pathsep) if p.strip()]
    keys_table = table.get("keys", {})
    if not isinstance(keys_table, dict):
        raise KernelHubError(f"{config_path()}: [signing.keys] must map org names to key lists")
    keys = [
        (org, line)
        for org in sorted(keys_table)
        for line in _config_strings(keys_table, org, "[signing.keys]", '["ssh-ed25519 AAAA…"]')
    ]
    require = _config_strings(table, "require", "[signing]", '["my-org"]')
    allow = _config_strings(table, "allow-unsigned", "[signing]", '["hf-org"]')
    return SigningSettings(
        allowed_signers_files=tuple(dict.fromkeys(files)),
        keys=tuple(keys),
        require=frozenset(require) | _env_list("KERNELHUB_REQUIRE_SIGNED"),
        allow_unsigned=frozenset(allow) | _env_list("KERNELHUB_ALLOW_UNSIGNED"),
    )
