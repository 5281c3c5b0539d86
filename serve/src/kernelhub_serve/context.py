"""What every request handler shares: the settings, the repositories, the writer."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import ParamSpec, TypeVar
from urllib.parse import unquote

from kernelhub.hub.local import LocalHub
from kernelhub.trust import served_trusted_orgs
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from .access import Caller
from .errors import ApiError
from .lfs import LfsStore
from .repos import RepoStore
from .settings import ServeSettings
from .writer import HubWriter

P = ParamSpec("P")
T = TypeVar("T")


@dataclass
class HubContext:
    settings: ServeSettings
    store: RepoStore
    lfs: LfsStore
    writer: HubWriter

    @classmethod
    def create(cls, settings: ServeSettings) -> HubContext:
        store = RepoStore(settings.hub)
        lfs = LfsStore(settings.hub)
        return cls(settings, store, lfs, HubWriter(store, lfs))

    def caller(self, request: Request) -> Caller:
        grant = self.settings.tokens.identify(request.headers.get("authorization"))
        request.state.caller = grant.name if grant is not None else "anonymous"
        return Caller(grant, self.settings.tokens)

    def trusted_publishers(self) -> frozenset[str]:
        """The orgs this server calls trusted publishers: kernelhub's default plus its
        hub's ``[trust] orgs`` — the answer the loader gives, so the publisher-trust
        endpoint, the pages and every loader agree (a KernelHubError for a bad config)."""
        return served_trusted_orgs(LocalHub(self.settings.hub).trusted_orgs())

    def base_url(self, request: Request) -> str:
        if self.settings.public_url:
            return self.settings.public_url.rstrip("/")
        return str(request.base_url).rstrip("/")


def segments(request: Request) -> list[str]:
    """The request path split on '/' before percent-decoding, then decoded: huggingface_hub
    quotes a revision with ``safe=""``, so ``refs%2Fpr%2F1`` stays one segment."""
    raw = request.scope.get("raw_path") or request.url.path.encode()
    path = raw.decode("latin-1").split("?", 1)[0]
    return [unquote(s) for s in path.strip("/").split("/")] if path.strip("/") else []


def json_response(data: object, status: int = 200) -> Response:
    return JSONResponse(data, status_code=status)


def error_response(error: ApiError, head: bool = False) -> Response:
    headers = {"X-Error-Message": error.message.encode("ascii", "replace").decode(),
               **error.headers}
    if error.code:
        headers["X-Error-Code"] = error.code
    if head:
        return Response(status_code=error.status, headers=headers)
    return JSONResponse({"error": error.message, **error.body}, status_code=error.status,
                        headers=headers)


async def threaded(fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """Run blocking git work off the event loop."""
    return await run_in_threadpool(fn, *args, **kwargs)
