"""How the loader reaches a hub: which hub the user's words name, and every call to it
reported as one line.

Choosing (:func:`open_hub`): a Hub, a path, a URL, ``"hf"`` or nothing.

Calling (:func:`hub_call`, :func:`guarded`): a hub is another program, often across a
network: a refused connection, a proxy's HTML error page, a 500, JSON of the wrong shape
or a client-library bug on a response it did not expect all surface as some exception
from inside the client. The loader calls every hub through :func:`hub_call`, so each of
them reaches the user as a :class:`HubError` naming the hub and what was being done —
never a traceback — whichever Hub implementation is used. Errors of the local disk
(full, read-only, no permission) pass through unchanged: they are the cache's to report,
not the hub's. Opening a hub and calling it are the one seam between the loader and a
hub, so they live together.
"""

from __future__ import annotations

import errno
import functools
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from ..errors import HubError, KernelHubError
from ..records import Record
from .base import Hub
from .local import LocalHub

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


# -- calling a hub: any failure becomes one line ---------------------------------------


F = TypeVar("F", bound=Callable[..., Any])

_DISK_ERRNOS = frozenset({
    errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM, errno.ENOTDIR,
    errno.EISDIR, errno.EEXIST,
})


def hub_name(hub: object) -> str:
    """How a hub is named in messages: its endpoint or root when it has one."""
    for attr in ("endpoint", "root"):
        if (value := getattr(hub, attr, None)) is not None:
            return str(value)
    return getattr(hub, "key", type(hub).__name__)


@contextmanager
def hub_call(hub: object, doing: str) -> Iterator[None]:
    """Run a hub operation; re-raise any non-kernelhub failure as a one-line HubError."""
    try:
        yield
    except KernelHubError as e:
        message = str(e)
        if "\n" not in message:
            raise
        # A hub implementation quoted a multi-line server answer: keep the type, one line.
        raise type(e)(" ".join(message.split())) from e
    except OSError as e:
        if e.errno in _DISK_ERRNOS:
            raise
        raise _failed(hub, doing, e) from e
    except Exception as e:
        raise _failed(hub, doing, e) from e


def guarded(doing: str) -> Callable[[F], F]:
    """Decorate a hub method so it reports failures like :func:`hub_call`.

    ``doing`` is formatted with the call's positional arguments (``"listing the refs of
    {0}"``), so a Hub implementation used directly gives the same one-line errors as
    through the loader's API.
    """

    def decorate(method: F) -> F:
        @functools.wraps(method)
        def call(self: object, *args: Any, **kwargs: Any) -> Any:
            with hub_call(self, doing.format(*args)):
                return method(self, *args, **kwargs)

        return call  # type: ignore[return-value]

    return decorate


def _failed(hub: object, doing: str, error: Exception) -> HubError:
    detail = " ".join(str(error).split()) or "no details"
    if len(detail) > 300:
        detail = detail[:300] + "…"
    return HubError(
        f"the hub at {hub_name(hub)} failed while {doing}: {type(error).__name__}: {detail}; "
        "check that it is reachable and serves the Hub API, or retry later"
    )
