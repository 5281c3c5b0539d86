"""Which hub the user's words name: a Hub, a path, a URL, ``"hf"`` or nothing.

How every call to a hub is reported is :mod:`kernelhub.hub.calls`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import HubError
from ..lazy_names import deferred
from ..records import Record
from ..user_files import user_path
from .base import Hub
from .endpoints import check_endpoint
from .local import LocalHub

if TYPE_CHECKING:
    from . import hf
else:  # huggingface_hub is imported only when a Hub-API hub is used
    hf = deferred("kernelhub.hub.hf")

# -- choosing a hub -----------------------------------------------------------------

HUB_ENV = "KERNELHUB_HUB"
DEFAULT_LOCAL_ROOT = Path("~/.local/share/kernelhub/hub")


class HubAddress(Record, frozen=True):
    """Where a hub is: a LocalHub ``root``, or a Hub-API server (``endpoint`` None: the
    Hugging Face Hub, or whatever ``HF_ENDPOINT`` points at).
    """

    root: Path | None = None
    endpoint: str | None = None


def hub_address(target: str | os.PathLike[str] | None) -> HubAddress:
    """What ``target`` names.

    * None → ``$KERNELHUB_HUB`` if set (read now, on each call, never at import),
      else the LocalHub at ``~/.local/share/kernelhub/hub``
    * ``"hf"`` → the Hugging Face Hub, or whatever ``HF_ENDPOINT`` points at
    * ``"http://…"`` / ``"https://…"`` → any server speaking the Hub API there
    * anything else → a LocalHub rooted at that path (``~`` expanded)

    A malformed URL or a path no file can have is a one-line error naming where it came
    from, its credentials redacted.
    """
    what = "the hub"
    if target is None:
        target = os.environ.get(HUB_ENV) or DEFAULT_LOCAL_ROOT
        what = HUB_ENV if os.environ.get(HUB_ENV) else "the default hub"
    text = os.fspath(target)
    if text == "hf":
        return HubAddress()
    if text[:8].lower().startswith(("http://", "https://")):
        return HubAddress(endpoint=check_endpoint(text, what))
    root = user_path(text, what)
    if root.exists() and not root.is_dir():  # publishing would make directories under a file
        raise HubError(f"{what} {root} is a file, not a hub directory; point it at a "
                       "directory (a LocalHub), a URL or 'hf'")
    return HubAddress(root=root)


def open_hub(target: Hub | str | os.PathLike[str] | None = None) -> Hub:
    """The hub ``target`` names: a Hub instance is itself; else see :func:`hub_address`."""
    if isinstance(target, Hub):
        return target
    address = hub_address(target)
    if address.root is None:
        return hf.HfHub(endpoint=address.endpoint)
    return LocalHub(address.root)
