"""``kernelhub serve``'s request log: one line per request, whatever the client sent."""

from __future__ import annotations

import asyncio
import logging

import pytest


def test_a_request_path_cannot_forge_log_lines(caplog: pytest.LogCaptureFixture) -> None:
    """ASGI paths are percent-decoded: a client's %0a or %1b arrives as a control
    character, and the log line shows it escaped."""
    from kernelhub_serve.app import RequestLog

    class App:
        state = None

        async def __call__(self, scope: object, receive: object, send: object) -> None:
            await send({"type": "http.response.start", "status": 404,  # type: ignore[operator]
                        "headers": []})

    async def send(message: object) -> None:
        pass

    scope = {"type": "http", "method": "GET", "path": "/api/models/org/x\nFORGED\x1b[2J/refs",
             "state": {"caller": "a\rb"}}
    caplog.set_level(logging.INFO, logger="kernelhub_serve")
    asyncio.run(RequestLog(App())(scope, None, send))  # type: ignore[arg-type]
    lines = [r.getMessage() for r in caplog.records if r.name == "kernelhub_serve"]
    assert len(lines) == 1 and "FORGED" in lines[0], lines
    assert all(c.isprintable() for c in lines[0]), lines


def test_the_line_is_written_before_the_last_byte_is_sent(
        caplog: pytest.LogCaptureFixture) -> None:
    """A client that has its whole answer can rely on the server's line being logged (the
    race behind issue 33's flaky ``test_no_credential_in_any_log_line``)."""
    from kernelhub_serve.app import RequestLog

    async def app(scope: object, receive: object, send: object) -> None:
        await send({"type": "http.response.start", "status": 403,  # type: ignore[operator]
                    "headers": []})
        await send({"type": "http.response.body", "body": b"x",  # type: ignore[operator]
                    "more_body": True})
        await send({"type": "http.response.body", "body": b"y"})  # type: ignore[operator]

    logged_when_sent: list[int] = []

    async def send(message: dict[str, object]) -> None:
        lines = [r for r in caplog.records if r.name == "kernelhub_serve"]
        logged_when_sent.append(len(lines))

    scope = {"type": "http", "method": "POST", "path": "/api/x", "state": {"caller": "reader"}}
    caplog.set_level(logging.INFO, logger="kernelhub_serve")
    asyncio.run(RequestLog(app)(scope, None, send))  # type: ignore[arg-type]
    assert logged_when_sent == [0, 0, 1]  # the line came just before the last body message
    (line,) = [r.getMessage() for r in caplog.records if r.name == "kernelhub_serve"]
    assert line.startswith("POST /api/x 403") and line.endswith(" reader")
