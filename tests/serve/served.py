"""A real ``kernelhub serve`` for tests: the application on uvicorn, on a free loopback
port, in a thread of the test process (or as a subprocess, the way a team runs it)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import uvicorn
from kernelhub_serve import ServeSettings, create_app
from kernelhub_serve.tokens import TokenTable
from reference_loader import free_port
from starlette.types import ASGIApp

WRITE_TOKEN = "hf_kernelhub_serve_test_writer"
READ_TOKEN = "hf_kernelhub_serve_test_reader"
OTHER_TOKEN = "hf_kernelhub_serve_test_other_org"


def write_tokens_file(path: Path, anonymous_read: str = '["*"]') -> Path:
    """Three tokens: ``ci`` writes acme and kernels-community, ``reader`` reads all,
    ``other`` writes only ``elsewhere``. The writer is stored as its sha256."""
    from kernelhub_serve.tokens import token_digest

    path.write_text(
        f"anonymous-read = {anonymous_read}\n"
        f'[[token]]\nname = "ci"\nsha256 = "{token_digest(WRITE_TOKEN)}"\n'
        'write = ["acme", "kernels-community"]\n'
        f'[[token]]\nname = "reader"\ntoken = "{READ_TOKEN}"\nread = ["*"]\n'
        f'[[token]]\nname = "other"\ntoken = "{OTHER_TOKEN}"\nwrite = ["elsewhere"]\n'
    )
    return path


@contextmanager
def serving(hub: Path, tokens: TokenTable | None = None,
            wrap: Callable[[ASGIApp], ASGIApp] | None = None, **settings: object
            ) -> Iterator[str]:
    """The server on uvicorn in a thread; yields its URL. ``wrap`` puts an ASGI layer of
    the test's around the application (a request record, injected faults)."""
    app: ASGIApp = create_app(ServeSettings(hub=hub, tokens=tokens or TokenTable.read_only(),
                                            **settings))  # type: ignore[arg-type]
    if wrap is not None:
        app = wrap(app)
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning",
                                           access_log=False))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("kernelhub serve did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


@contextmanager
def serving_process(hub: Path, tokens_file: Path | None, log: Path,
                    *extra: str, started: list[subprocess.Popen[bytes]] | None = None
                    ) -> Iterator[str]:
    """``kernelhub-serve`` as its own process, as a team runs it; yields its URL (and
    appends the process to ``started``, for a benchmark that reads its memory)."""
    from reference_loader import _wait_for_port, stop_process  # as the olah tests do

    port = free_port()
    argv = [str(Path(sys.executable).parent / "kernelhub-serve"), "--hub", str(hub),
            "--port", str(port), *(["--tokens", str(tokens_file)] if tokens_file else []), *extra]
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                                env={**os.environ, "NO_PROXY": "127.0.0.1"})
        if started is not None:
            started.append(proc)
        try:
            _wait_for_port(port, proc, log, "kernelhub-serve")
            yield f"http://127.0.0.1:{port}"
        finally:
            stop_process(proc)
