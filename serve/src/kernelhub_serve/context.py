"""What every request handler shares: the settings, the repositories, the writer — and
what one call of a handler is given (:class:`Call`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import IO, Any
from urllib.parse import unquote

from kernelhub.hub.local import LocalHub
from kernelhub.printable import printable
from kernelhub.signing.trust import served_trusted_orgs
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import Scope

from .access import Caller
from .downloads import DownloadCounts
from .errors import ApiError
from .lfs import LfsStore
from .repos import RepoStore
from .sessions import COOKIE, SAFE_METHODS, SessionKeys, current
from .settings import ServeSettings
from .writer import HubWriter


@dataclass
class HubContext:
    settings: ServeSettings
    store: RepoStore
    lfs: LfsStore
    writer: HubWriter
    sessions: SessionKeys
    downloads: DownloadCounts

    @classmethod
    def create(cls, settings: ServeSettings) -> HubContext:
        store = RepoStore(settings.hub)
        lfs = LfsStore(settings.hub)
        lfs.clean_stale_parts()
        return cls(settings, store, lfs, HubWriter(store, lfs), SessionKeys(settings.hub),
                   DownloadCounts(settings.hub))

    def caller(self, request: Request) -> Caller:
        """The request's identity: its Bearer token, else (on a read) the token its
        session cookie was signed in with (:mod:`kernelhub_serve.sessions`)."""
        tokens = self.settings.tokens
        grant = tokens.identify(request.headers.get("authorization"))
        session = self.sessions.read(request.cookies.get(COOKIE), tokens)
        current.set(session)
        if grant is None and session is not None and request.method in SAFE_METHODS:
            grant = session.grant
        request.state.caller = grant.name if grant is not None else "anonymous"
        return Caller(grant, tokens)

    def trusted_publishers(self) -> frozenset[str]:
        """The orgs this server calls trusted publishers: kernelhub's default plus its
        hub's ``[trust] orgs`` — the answer the loader gives, so the publisher-trust
        endpoint, the pages and every loader agree (a KernelHubError for a bad config)."""
        return served_trusted_orgs(LocalHub(self.settings.hub).trusted_orgs())

    def base_url(self, request: Request) -> str:
        if self.settings.public_url:
            return self.settings.public_url.rstrip("/")
        return str(request.base_url).rstrip("/")


def segments(scope: Scope) -> list[str]:
    """The request path split on '/' before percent-decoding, then decoded: huggingface_hub
    quotes a revision with ``safe=""``, so ``refs%2Fpr%2F1`` stays one segment (and a
    ``%2F`` can never add a segment, or a ``..``, to a path made of them)."""
    raw = scope.get("raw_path") or scope["path"].encode()
    path = raw.decode("latin-1").split("?", 1)[0]
    return [unquote(s, errors="replace") for s in path.strip("/").split("/")] \
        if path.strip("/") else []


def json_response(data: object, status: int = 200) -> Response:
    return JSONResponse(data, status_code=status)


def error_response(error: ApiError, head: bool = False) -> Response:
    # A message may quote the client's words: escaped, so no CR/LF can end the header.
    headers = {"X-Error-Message": printable(error.message).encode("ascii", "replace").decode(),
               **error.headers}
    if error.code:
        headers["X-Error-Code"] = error.code
    if head:
        return Response(status_code=error.status, headers=headers)
    return JSONResponse({"error": error.message, **error.body}, status_code=error.status,
                        headers=headers)



@dataclass
class Call:
    """One request as its handler sees it: names already checked by
    :mod:`kernelhub_serve.names`, the caller already allowed what the route declares, the
    body already read within its limit."""

    ctx: HubContext
    request: Request
    caller: Caller
    params: dict[str, str]
    json: dict[str, Any] = field(default_factory=dict)
    """A ``json`` route's body (an empty body is ``{}``)."""
    form: dict[str, list[str]] = field(default_factory=dict)
    """A ``form`` route's fields, each with all its values."""
    upload: IO[bytes] | None = None
    """A ``file`` route's body, spooled (to disk past a few MiB), rewound."""

    @property
    def repo_id(self) -> str:
        return f"{self.params['org']}/{self.params['name']}"

    @property
    def org(self) -> str:
        return self.params["org"]

    @property
    def head(self) -> bool:
        return self.request.method == "HEAD"
