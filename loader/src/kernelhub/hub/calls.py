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

__lazy_modules__ = {"kernelhub.errors", "kernelhub.hub.base"}  # PEP 810: imported when first used

import errno
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import HubError, KernelHubError
from .base import HashListingHub, Hub, RemoteHub, TrustAskingHub, TypedReposHub

if TYPE_CHECKING:
    from ..formats.release_manifest import ReleaseFiles
    from ..versions import Refs

_DISK_ERRNOS = frozenset({
    errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM, errno.ENOTDIR,
    errno.EISDIR, errno.EEXIST,
})


def hub_name(hub: object) -> str:
    """How a hub is named in messages: its endpoint or root when it has one, without
    the credentials a URL may carry."""
    from ..redact import redact  # messages only, as every use of it here

    for attr in ("endpoint", "root"):
        if (value := getattr(hub, attr, None)) is not None:
            return redact(str(value))
    return redact(str(getattr(hub, "key", type(hub).__name__)))


@contextmanager
def hub_call(hub: object, doing: str) -> Iterator[None]:
    """Run a hub operation; re-raise any non-kernelhub failure as a one-line HubError.

    Whatever leaves says nothing of the hub's credentials: a message that names them
    (a hub implementation's, or the client's error text) is redacted, and the chain of
    exceptions it came from, whose texts named them, is cut.
    """
    try:
        yield
    except KernelHubError as e:
        from ..redact import names_credentials, redacted_error

        message = str(e)
        secret = names_credentials(e)
        if "\n" not in message and not secret:
            raise
        # A hub implementation quoted a multi-line server answer or named a credential:
        # keep the type, one line, no credentials.
        clean = redacted_error(e, " ".join(message.split()))
        if secret:
            raise clean from None
        raise clean from e
    except OSError as e:
        from ..redact import names_credentials

        if e.errno in _DISK_ERRNOS and not names_credentials(e):
            raise
        raise _failed(hub, doing, e) from _cause(e)
    except Exception as e:
        raise _failed(hub, doing, e) from _cause(e)


def _cause(error: BaseException) -> BaseException | None:
    """What a translated error chains: ``error``, unless its texts name a credential."""
    from ..redact import names_credentials

    return None if names_credentials(error) else error


class GuardedHub:
    """A hub every read of which reports a failure as one :class:`HubError` line.

    The loader's one seam to a hub (:func:`guard`, applied to every hub a load is given),
    so each hub call is translated once, whichever Hub implementation answers. Attributes
    beyond the protocol (a LocalHub's ``root``, an HfHub's ``endpoint``) are the hub's own.
    """

    def __init__(self, inner: Hub) -> None:
        self.inner = inner
        # The optional members (hub.base) are set on the instance exactly when the inner
        # hub has them, so a capability check answers for the guard as for its hub on
        # every Python (3.12's isinstance on a protocol never reaches __getattr__).
        if isinstance(inner, HashListingHub):
            self.file_hashes = self._file_hashes
        if isinstance(inner, RemoteHub):
            self.remote = inner.remote
        if isinstance(inner, TrustAskingHub):
            self.trusts = inner.trusts
        if isinstance(inner, TypedReposHub):
            self.type_of = inner.type_of

    def __repr__(self) -> str:
        return repr(self.inner)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)  # the hub's own attributes (root, endpoint)

    def _file_hashes(self, repo_id: str, commit: str, variant: str) -> dict[str, str]:
        assert isinstance(self.inner, HashListingHub)
        with hub_call(self.inner, f"listing the content hashes of {variant} of "
                                  f"{repo_id} at {commit[:12]}"):
            return self.inner.file_hashes(repo_id, commit, variant)

    @property
    def key(self) -> str:
        return self.inner.key

    def list_refs(self, repo_id: str) -> Refs:
        with hub_call(self.inner, f"listing the refs of {repo_id}"):
            return self.inner.list_refs(repo_id)

    def list_variants(self, repo_id: str, commit: str) -> list[str]:
        with hub_call(self.inner, f"listing the variants of {repo_id} at {commit[:12]}"):
            return self.inner.list_variants(repo_id, commit)

    def fetch_variant(self, repo_id: str, commit: str, variant: str, dest: Path) -> None:
        with hub_call(self.inner, f"sending {variant} of {repo_id} at {commit[:12]}"):
            self.inner.fetch_variant(repo_id, commit, variant, dest)

    def fetch_release(self, repo_id: str, commit: str) -> ReleaseFiles:
        with hub_call(self.inner, f"sending the release signature of {repo_id}"):
            return self.inner.fetch_release(repo_id, commit)

    def trusted_orgs(self) -> frozenset[str]:
        with hub_call(self.inner, "reading its trusted organisations"):
            return self.inner.trusted_orgs()


def guard(hub: Hub) -> Hub:
    """``hub`` with every read translated once (see :class:`GuardedHub`)."""
    return hub if isinstance(hub, GuardedHub) else GuardedHub(hub)


def _failed(hub: object, doing: str, error: Exception) -> HubError:
    from ..redact import redact

    detail = " ".join(redact(str(error)).split()) or "no details"  # redacted, then cut
    if len(detail) > 300:
        detail = detail[:300] + "…"
    return HubError(
        f"the hub at {hub_name(hub)} failed while {doing}: {type(error).__name__}: {detail}; "
        "check that it is reachable and serves the Hub API, or retry later"
    )
