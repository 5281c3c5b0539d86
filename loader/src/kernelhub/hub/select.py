"""Choosing a hub from what the user wrote: a Hub, a path, a URL, ``"hf"`` or nothing."""

from __future__ import annotations

import os
from pathlib import Path

from .base import Hub
from .local import LocalHub

HUB_ENV = "KERNELHUB_HUB"
DEFAULT_LOCAL_ROOT = Path("~/.local/share/kernelhub/hub")


def open_hub(target: Hub | str | os.PathLike[str] | None = None) -> Hub:
    """The hub ``target`` names.

    * a Hub instance → itself
    * None → ``$KERNELHUB_HUB`` if set (read now, on each call, never at import),
      else the LocalHub at ``~/.local/share/kernelhub/hub``
    * ``"hf"`` → the Hugging Face Hub, or whatever ``HF_ENDPOINT`` points at
    * ``"http://…"`` / ``"https://…"`` → any server speaking the Hub API there
    * anything else → a LocalHub rooted at that path (``~`` expanded)
    """
    if isinstance(target, Hub):
        return target
    if target is None:
        target = os.environ.get(HUB_ENV) or DEFAULT_LOCAL_ROOT
    text = os.fspath(target)
    if text == "hf" or text.startswith(("http://", "https://")):
        from .hf import HfHub  # huggingface_hub is imported only when a Hub-API hub is used

        return HfHub(endpoint=None if text == "hf" else text)
    return LocalHub(Path(text).expanduser())
