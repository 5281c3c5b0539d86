"""Choosing a hub from what the user wrote: a Hub, a path, a URL, ``"hf"`` or nothing."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from .base import Hub
from .local import LocalHub

HUB_ENV = "KERNELHUB_HUB"
DEFAULT_LOCAL_ROOT = Path("~/.local/share/kernelhub/hub")


@dataclass(frozen=True)
class HubAddress:
    """Where a hub is: a LocalHub ``root``, or a Hub-API server (``endpoint`` None: the
    Hugging Face Hub, or whatever ``HF_ENDPOINT`` points at)."""

    root: Path | None = None
    endpoint: str | None = None


def hub_address(target: str | os.PathLike[str] | None) -> HubAddress:
    """What ``target`` names.

    * None → ``$KERNELHUB_HUB`` if set (read now, on each call, never at import),
      else the LocalHub at ``~/.local/share/kernelhub/hub``
    * ``"hf"`` → the Hugging Face Hub, or whatever ``HF_ENDPOINT`` points at
    * ``"http://…"`` / ``"https://…"`` → any server speaking the Hub API there
    * anything else → a LocalHub rooted at that path (``~`` expanded)
    """
    if target is None:
        target = os.environ.get(HUB_ENV) or DEFAULT_LOCAL_ROOT
    text = os.fspath(target)
    if text == "hf":
        return HubAddress()
    if text.startswith(("http://", "https://")):
        return HubAddress(endpoint=text)
    return HubAddress(root=Path(text).expanduser())


def open_hub(target: Hub | str | os.PathLike[str] | None = None) -> Hub:
    """The hub ``target`` names: a Hub instance is itself; else see :func:`hub_address`."""
    if isinstance(target, Hub):
        return target
    address = hub_address(target)
    if address.root is None:
        from .hf import HfHub  # huggingface_hub is imported only when a Hub-API hub is used

        return HfHub(endpoint=address.endpoint)
    return LocalHub(address.root)
