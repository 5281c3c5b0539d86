"""User settings, read from the environment and the config file at call time.

Nothing here is cached in a module global: tests and long-running processes change
environment variables and expect the next call to see them. Reading a few variables and
a small TOML file costs microseconds next to loading a kernel.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Any

from .errors import KernelHubError

try:  # Python 3.11+
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - Python 3.10
    tomllib = None  # type: ignore[assignment]

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}

_warned_disabled = False
"""USE_HUB_KERNELS=0 warns once per process, not once per layer."""


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in _TRUE


def cache_dir() -> Path:
    """Root of the kernel cache: ``$KERNELHUB_CACHE`` or ``~/.cache/kernelhub``."""
    if value := os.environ.get("KERNELHUB_CACHE"):
        return Path(value).expanduser()
    return Path.home() / ".cache" / "kernelhub"


def offline() -> bool:
    """Offline mode: resolve versions from the cache, never contact a hub.

    ``HF_HUB_OFFLINE`` is honoured too, so one switch covers huggingface_hub and us.
    """
    return _env_flag("KERNELHUB_OFFLINE") or _env_flag("HF_HUB_OFFLINE")


def config_path() -> Path:
    """The user config file: ``$KERNELHUB_CONFIG`` or ``~/.config/kernelhub/config.toml``."""
    if value := os.environ.get("KERNELHUB_CONFIG"):
        return Path(value).expanduser()
    return Path.home() / ".config" / "kernelhub" / "config.toml"


def read_config() -> dict[str, Any]:
    """The parsed config file, or ``{}`` when there is none."""
    path = config_path()
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return {}
    if tomllib is None:  # pragma: no cover - Python 3.10
        raise KernelHubError(
            f"{path}: reading the config needs Python 3.11+ (tomllib); remove the file or "
            "set KERNELHUB_TRUSTED_ORGS instead"
        )
    try:
        return tomllib.loads(raw.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise KernelHubError(f"{path}: not valid TOML ({e}); fix or remove the file") from None


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
    from_env = {o.strip() for o in os.environ.get("KERNELHUB_TRUSTED_ORGS", "").split(",")}
    return frozenset((from_env - {""}) | _config_trusted_orgs())


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
