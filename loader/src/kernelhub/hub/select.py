"""Which hubs the user's words name: a Hub, a path, a URL, ``"hf"``, several, or nothing.

How every call to a hub is reported is :mod:`kernelhub.hub.calls`.
"""

from __future__ import annotations

# PEP 810: imported when first used (inert before Python 3.15)
__lazy_modules__ = {
    "kernelhub.errors", "kernelhub.hub.base", "kernelhub.hub.local", "kernelhub.hub.search",
    "kernelhub.user_files",
}

import os
from pathlib import Path

from .. import settings
from ..errors import HubError
from ..user_files import user_path
from ..value_types import Record
from .base import Hub
from .local import LocalHub
from .search import SearchPath

# -- choosing a hub -----------------------------------------------------------------

HUB_ENV = "KERNELHUB_HUB"
DEFAULT_LOCAL_ROOT = Path("~/.local/share/kernelhub/hub")
HF_WORD = "hf"
"""The Hugging Face Hub, at ``HF_ENDPOINT`` when that is set."""


class HubAddress(Record, frozen=True):
    """Where a hub is: a LocalHub ``root``, or a Hub-API server (``endpoint`` None: the
    Hugging Face Hub, or whatever ``HF_ENDPOINT`` points at).
    """

    root: Path | None = None
    endpoint: str | None = None


def hub_words(target: str | os.PathLike[str] | None) -> tuple[list[str], str]:
    """The hubs ``target`` names, in order, and where the words came from (for messages).

    * None → ``$KERNELHUB_HUB`` if set (read now, on each call, never at import), else
      ``[hub] path`` of the config file, else the default search path: the LocalHub at
      ``~/.local/share/kernelhub/hub``, then ``hf``
    * several hubs are separated by commas: ``~/team-hub,hf``
    """
    if target is None:
        if value := os.environ.get(HUB_ENV, "").strip():
            return _split(value), HUB_ENV
        if configured := settings.hub_path():
            return configured, f"{settings.config_path()} [hub] path"
        return [str(DEFAULT_LOCAL_ROOT), HF_WORD], "the default search path"
    return _split(os.fspath(target)), "the hub"


def _split(value: str) -> list[str]:
    words = [w.strip() for w in value.split(",")]
    return [w for w in words if w] or [value]


def hub_address(target: str | os.PathLike[str] | None) -> HubAddress:
    """The one hub ``target`` names, for what needs exactly one (publishing, serving).

    With nothing given and nothing set, that is the embedded LocalHub (the default search
    path's first entry: publishing never writes to the Hugging Face Hub unasked). A
    search path of several hubs is refused in one line: which of them to write to is
    the user's choice.
    """
    if target is None and not os.environ.get(HUB_ENV, "").strip() and not settings.hub_path():
        return word_address(str(DEFAULT_LOCAL_ROOT), "the default hub")
    words, what = hub_words(target)
    if len(words) > 1:
        from ..redact import redact  # for the message

        raise HubError(f"{what} names several hubs ({', '.join(map(redact, words))}); this "
                       "needs one: pass --hub with one path, URL or 'hf'")
    return word_address(words[0], what)


def word_address(text: str, what: str) -> HubAddress:
    """What one word of a hub setting names.

    * ``"hf"`` → the Hugging Face Hub, or whatever ``HF_ENDPOINT`` points at
    * ``"http://…"`` / ``"https://…"`` → any server speaking the Hub API there
    * anything else → a LocalHub rooted at that path (``~`` expanded)

    A malformed URL or a path no file can have is a one-line error naming where it came
    from, its credentials redacted.
    """
    if text == HF_WORD:
        return HubAddress()
    if text[:8].lower().startswith(("http://", "https://")):
        from .endpoints import check_endpoint  # a Hub-API server only

        return HubAddress(endpoint=check_endpoint(text, what))
    root = user_path(text, what)
    if root.exists() and not root.is_dir():  # publishing would make directories under a file
        raise HubError(f"{what} {root} is a file, not a hub directory; point it at a "
                       "directory (a LocalHub), a URL or 'hf'")
    return HubAddress(root=root)


def open_address(address: HubAddress) -> Hub:
    """The hub at ``address``."""
    if address.root is None:
        from . import hf
        return hf.HfHub(endpoint=address.endpoint)
    return LocalHub(address.root)


def open_hub(target: Hub | str | os.PathLike[str] | None = None) -> Hub:
    """The hub ``target`` names: a Hub instance is itself; one word its hub; several a
    :class:`~kernelhub.hub.search.SearchPath` of them (see :func:`hub_words`)."""
    if isinstance(target, Hub):
        return target
    words, what = hub_words(target)
    hubs = [open_address(word_address(w, what)) for w in dict.fromkeys(words)]
    return hubs[0] if len(hubs) == 1 else SearchPath(hubs)
