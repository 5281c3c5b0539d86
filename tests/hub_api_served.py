"""``kernelhub serve`` as the Hub-API server of the publish and load tests.

The tests that publish with huggingface_hub and load through a Hub-API server run against
the real application (``kernelhub_serve.create_app`` on uvicorn, on loopback), so the Hub
protocol is written once, in ``kernelhub_serve.routes.TABLE``. What a test needs beyond a
server — the requests it was sent, a delay before each answer, a chosen status for chosen
requests — is an ASGI wrapper around the application here: faults and a record, never an
endpoint.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from kernelhub.hub.git import GitRepo
from kernelhub.hub.local import MODELS_DIR
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

sys.path.insert(0, str(Path(__file__).parent / "serve"))  # served.py, as its conftest does

from served import serving

WRITE_TOKEN = "hf_test_write_token"
"""A token that may write every organisation of the served hub."""
READ_TOKEN = "hf_test_read_token"
"""A token that may read every organisation and write none."""


@dataclass
class ServedHub:
    """A served LocalHub root and what its requests were."""

    root: Path
    url: str = ""
    delay: float = 0.0
    """Seconds before each answer (for client timeouts)."""
    fail: dict[str, int] = field(default_factory=dict)
    """``"METHOD path-fragment"`` → the status to answer such requests with (a conflicting
    concurrent write, say), instead of passing them to the server."""
    kernel_type: bool = True
    """False: answer as a Hub without the ``kernel`` repository type (the public Hub before
    it had one, olah): its URLs are not found and creating such a repository is refused."""
    requests: list[str] = field(default_factory=list)
    """``"METHOD path"`` of every request, in order."""

    def repo_path(self, repo_id: str) -> Path:
        org, name = repo_id.split("/")
        return self.root / MODELS_DIR / org / name

    def git(self, repo_id: str) -> GitRepo:
        return GitRepo(self.repo_path(repo_id))

    def wrap(self, app: ASGIApp) -> ASGIApp:
        async def faulty(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] != "http":
                await app(scope, receive, send)
                return
            self.requests.append(f"{scope['method']} {scope['path']}")
            if self.delay:
                await asyncio.sleep(self.delay)
            refusal = self._refusal(scope["method"], scope["path"])
            if refusal is None and not self.kernel_type and scope["path"] == "/api/repos/create":
                receive, refusal = await self._kernel_type_refused(receive)
            if refusal is not None:
                status, message = refusal
                await JSONResponse({"error": message}, status,
                                   {"X-Error-Message": message})(scope, receive, send)
                return
            await app(scope, receive, send)

        return faulty

    def _refusal(self, method: str, path: str) -> tuple[int, str] | None:
        for key, status in self.fail.items():
            want, _, fragment = key.partition(" ")
            if method == want and fragment in path:
                return status, f"test fault: {status} for {key}"
        if not self.kernel_type and path.startswith(("/api/kernels/", "/kernels/")):
            return 404, "Repository Not Found (this server has no kernel repository type)"
        return None

    async def _kernel_type_refused(self, receive: Receive
                                   ) -> tuple[Receive, tuple[int, str] | None]:
        """Read a create request's body to see its type; hand the server the same body."""
        chunks, more = [], True
        while more:
            message = await receive()
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        body = b"".join(chunks)
        sent = False

        async def replay() -> Message:
            nonlocal sent
            if sent:
                return await receive()
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}

        try:
            kind = json.loads(body or b"{}").get("type")
        except (ValueError, AttributeError):
            kind = None
        if kind == "kernel":
            return replay, (400, "Invalid repo type 'kernel': this server has model")
        return replay, None


def tokens_file(path: Path, anonymous_read: str = '["*"]') -> Path:
    path.write_text(f"anonymous-read = {anonymous_read}\n"
                    f'[[token]]\nname = "kernelhub-test"\ntoken = "{WRITE_TOKEN}"\n'
                    'write = ["*"]\n'
                    f'[[token]]\nname = "reader"\ntoken = "{READ_TOKEN}"\nread = ["*"]\n')
    return path


@contextmanager
def hub_api_server(root: Path, *, writable: bool = True, delay: float = 0.0,
               kernel_type: bool = True, **settings: object) -> Iterator[ServedHub]:
    """``kernelhub serve`` over ``root`` (created), with :data:`WRITE_TOKEN` able to write
    everywhere, or read-only (no tokens file, as ``kernelhub serve`` runs without one)."""
    from kernelhub_serve.tokens import TokenTable

    root.mkdir(parents=True, exist_ok=True)
    hub = ServedHub(root, delay=delay, kernel_type=kernel_type)
    tokens = (TokenTable.load(tokens_file(root.parent / f"{root.name}-tokens.toml"))
              if writable else None)
    with serving(root, tokens, wrap=hub.wrap, **settings) as url:
        hub.url = url
        yield hub
