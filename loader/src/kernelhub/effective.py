"""What this process would use, and why: the settings ``kernelhub env`` shows.

Each value says where it came from, because kernelhub reads two families of variables
(``KERNELHUB_*`` and the ecosystem's ``HF_*``) plus a config file, and a user debugging
"why did it load from there" needs the winning source, not only the value. Reading
this asks no hub anything.
"""

from __future__ import annotations

import os
from pathlib import Path

from . import settings
from .cache.ecosystem import hf_hub_cache
from .hub.calls import hub_name
from .hub.select import hub_words, open_address, word_address
from .signing.trust import user_trusted_orgs
from .value_types import Record


class Effective(Record, frozen=True):
    """The effective settings, each with its source."""

    hubs: tuple[str, ...]
    """The search path, in order, as messages name each hub."""
    hubs_from: str
    cache: Path
    ecosystem_cache: Path
    """Where the ecosystem's loader (huggingface_hub) keeps what it downloaded."""
    trusted_orgs: tuple[str, ...]
    hub_trusted_orgs: tuple[tuple[str, tuple[str, ...]], ...]
    """(hub, orgs its operator declares trusted) for the hubs that declare any."""
    offline: bool
    offline_from: str
    token: str
    """Where a Hub-API token comes from (never the token)."""


def _offline_source() -> str:
    for name in ("KERNELHUB_OFFLINE", "HF_HUB_OFFLINE"):
        if os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on"):
            return name
    return "neither KERNELHUB_OFFLINE nor HF_HUB_OFFLINE is set"


def _token_source() -> str:
    if os.environ.get("HF_TOKEN"):
        return "HF_TOKEN"
    path = Path(os.environ.get("HF_TOKEN_PATH")
                or Path(os.environ.get("HF_HOME") or "~/.cache/huggingface") / "token").expanduser()
    return f"the file {path}" if path.is_file() else "none (public repositories only)"


def effective() -> Effective:
    """The settings a load in this process would use now."""
    words, source = hub_words(None)
    hubs = [open_address(word_address(w, source)) for w in dict.fromkeys(words)]
    declared = []
    for hub in hubs:
        if getattr(hub, "root", None) is not None and (orgs := hub.trusted_orgs()):
            declared.append((hub_name(hub), tuple(sorted(orgs))))
    return Effective(
        hubs=tuple(hub_name(h) for h in hubs),
        hubs_from=source,
        cache=settings.cache_dir(),
        ecosystem_cache=hf_hub_cache(),
        trusted_orgs=tuple(sorted(user_trusted_orgs())),
        hub_trusted_orgs=tuple(declared),
        offline=settings.offline(),
        offline_from=_offline_source(),
        token=_token_source(),
    )
