"""Calling a hub: any failure becomes one line.

A hub is another program, often across a network: a refused connection, a proxy's HTML
error page, a 500, JSON of the wrong shape or a client-library bug on a response it did
not expect all surface as some exception from inside the client. Every hub call reaches
the user as a :class:`HubError` naming the hub and what was being done — never a
traceback — whichever Hub implementation is used. Errors of the local disk (full,
read-only, no permission) pass through unchanged: they are the cache's to report, not
the hub's.
"""

from __future__ import annotations

import errno
import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from ..errors import HubError, KernelHubError

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
