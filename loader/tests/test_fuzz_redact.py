"""Fuzzing credentials: no message, log record or exception text names one (issue 23).

Two targets. :func:`kernelhub.redact.redact` over generated credentials in every place
text carries them (URL userinfo, query parameters, Authorization headers, access tokens),
inside the shapes messages take (prose, reprs, JSON). And every API path that names a
hub, against hubs whose URLs carry a drawn credential: a dead port, and a test server
speaking the shape of the Hub API's read endpoints that answers errors echoing the
request (its query and its Authorization header) and redirects to signed URLs. Bounded
and derandomized like loader/tests/test_fuzz.py (``KERNELHUB_FUZZ_EXAMPLES`` raises it).
"""

from __future__ import annotations

import http.server
import json
import logging
import os
import socket
import tempfile
import threading
import traceback
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any
from urllib.parse import quote

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kernelhub import api
from kernelhub.errors import KernelHubError

EXAMPLES = int(os.environ.get("KERNELHUB_FUZZ_EXAMPLES", "120"))
FUZZ = settings(max_examples=EXAMPLES, deadline=timedelta(seconds=20), derandomize=True,
                database=None, suppress_health_check=list(HealthCheck))
SMALL = settings(FUZZ, max_examples=max(EXAMPLES // 4, 10))
REPO = "kernelhub-tests/relu"

secrets = st.text("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~",
                  min_size=10, max_size=30).filter(lambda s: s.strip("-._~") == s)
"""Credentials: unreserved URL characters, so a URL holds them as they are."""
hosts = st.sampled_from(["127.0.0.1:8080", "hub.example.org", "[::1]:9", "h"])
places = st.sampled_from(["userinfo", "user-only", "query", "query-second", "auth-header",
                          "auth-dict", "auth-json", "bearer", "hf-token", "signed-url"])
wrappers = st.sampled_from(["{}", "error: {} failed", "HubError('{}')", "{{'url': '{}'}}",
                            "<html>{}\nnot found</html>", "({}),", "\"{}\""])


def _carry(place: str, secret: str, host: str) -> str:
    return {
        "userinfo": f"https://user:{secret}@{host}/api/models",
        "user-only": f"http://{secret}@{host}",
        "query": f"http://{host}/api/x?token={secret}",
        "query-second": f"http://{host}/resolve/main/f?download=1&access_token={secret}#frag",
        "auth-header": f"Authorization: Bearer {secret}",
        "auth-dict": f"headers={{'authorization': 'Bearer {secret}'}}",
        "auth-json": json.dumps({"Authorization": f"token {secret}"}),
        "bearer": f"sent Bearer {secret} to {host}",
        "hf-token": f"hf_{secret.replace('-', 'a').replace('.', 'b').replace('_', 'c')}"
                    f"{'x' * 16}".replace("~", "d"),
        "signed-url": f"https://cdn.{host}/x?X-Amz-Credential={secret}&X-Amz-Signature={secret}",
    }[place]


@FUZZ
@given(secret=secrets, host=hosts, place=places, wrapper=wrappers)
def test_redact_removes_every_credential(secret: str, host: str, place: str,
                                         wrapper: str) -> None:
    from kernelhub.redact import MASK, redact

    carried = _carry(place, secret, host)
    hidden = carried[3:] if place == "hf-token" else secret
    text = wrapper.format(carried)
    clean = redact(text)
    assert hidden not in clean, (text, clean)
    assert MASK in clean
    if place in ("userinfo", "user-only", "query", "query-second"):
        assert host in clean  # which hub is meant stays readable
    assert redact(clean) == clean


@FUZZ
@given(text=st.text(max_size=60))
def test_redact_leaves_text_without_credentials_alone(text: str) -> None:
    from kernelhub.redact import redact

    clean = redact(text)
    assert redact(clean) == clean
    if "@" not in text and "=" not in text and not any(
            w in text.lower() for w in ("bearer", "basic", "authorization", "hf_")):
        assert clean == text


# -- every error path that names a hub ------------------------------------------------


class _EchoingHub(http.server.BaseHTTPRequestHandler):
    """A test server in the shape of the Hub API's read endpoints whose answers repeat what
    it was sent, as careless servers and proxies do: error pages quote the request line
    and its Authorization header, and some answers redirect to a signed URL."""

    status = 404

    def do_GET(self) -> None:
        status = type(self).status
        if status == 302:
            self.send_response(302)
            sent = quote(self.headers.get("Authorization") or self.path, safe="")
            self.send_header("Location", f"/signed?X-Amz-Signature={sent}&token={sent}")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = (f"<html>cannot serve {self.path}\nAuthorization: "
                f"{self.headers.get('Authorization')}</html>").encode()
        if status == 200:  # a document that is not the Hub API's: garbage to parse
            body = json.dumps({"error": self.path,
                               "headers": {"authorization": self.headers.get("Authorization")}
                               }).encode()
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_HEAD = do_GET

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def echoing_hub() -> Iterator[tuple[str, type[_EchoingHub]]]:
    handler = type("Handler", (_EchoingHub,), {})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"127.0.0.1:{server.server_address[1]}", handler
    server.shutdown()
    server.server_close()


def _dead_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


CALLS: dict[str, Callable[[str | None], Any]] = {
    "list_refs": lambda hub: api.list_refs(REPO, hub=hub),
    "resolve_kernel": lambda hub: api.resolve_kernel(REPO, 1, hub=hub, backend="cpu"),
    "resolve_kernel revision": lambda hub: api.resolve_kernel(REPO, revision="main", hub=hub,
                                                              backend="cpu"),
    "locate_kernel": lambda hub: api.locate_kernel(REPO, 1, hub=hub, backend="cpu"),
    "has_kernel": lambda hub: api.has_kernel(REPO, 1, hub=hub, backend="cpu"),
    "get_kernel": lambda hub: api.get_kernel(REPO, version=1, hub=hub, backend="cpu"),
}
"""The API's calls that reach a hub (lock and download reach it through the same)."""


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))


@SMALL
@given(secret=secrets, call=st.sampled_from(sorted(CALLS)),
       how=st.sampled_from(["userinfo", "query", "HF_ENDPOINT userinfo", "HF_TOKEN",
                            "KERNELHUB_HUB userinfo"]),
       server=st.sampled_from(["echoing", "dead"]),
       status=st.sampled_from([200, 302, 401, 403, 404, 500]))
def test_no_hub_error_names_a_credential(echoing_hub: tuple[str, type[_EchoingHub]],
                                         secret: str, call: str, how: str, server: str,
                                         status: int) -> None:
    address, handler = echoing_hub
    handler.status = status
    host = address if server == "echoing" else f"127.0.0.1:{_dead_port()}"
    env = {"HF_TOKEN": None, "HF_ENDPOINT": None, "KERNELHUB_HUB": None,
           "KERNELHUB_HUB_TIMEOUT": "5", "HF_HUB_DISABLE_TELEMETRY": "1",
           "NO_PROXY": "127.0.0.1", "KERNELHUB_TRUSTED_ORGS": "kernelhub-tests"}
    hub: str | None = None
    if how == "userinfo":
        hub = f"http://user:{secret}@{host}"
    elif how == "query":
        hub = f"http://{host}/?token={secret}"
    elif how == "HF_ENDPOINT userinfo":
        env["HF_ENDPOINT"], hub = f"http://u:{secret}@{host}", "hf"
    elif how == "HF_TOKEN":
        env["HF_ENDPOINT"], env["HF_TOKEN"], hub = f"http://{host}", f"hf_{secret}x", "hf"
    else:
        env["KERNELHUB_HUB"] = f"http://u:{secret}@{host}"
    records = _Records()
    logging.getLogger().addHandler(records)
    saved = dict(os.environ)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            env["KERNELHUB_CACHE"] = tmp
            for key, value in env.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
            try:
                CALLS[call](hub)
            except KernelHubError as e:
                text = "".join(traceback.format_exception(e)) + repr(e)
                assert secret not in text, text
    finally:
        os.environ.clear()
        os.environ.update(saved)
        logging.getLogger().removeHandler(records)
    logged = "\n".join(records.lines)
    assert secret not in logged, logged


def test_an_error_that_is_also_an_oserror_is_redacted_as_its_own_type() -> None:
    """A hub's refusal raised as a PermissionError (an OSError: BaseException.__new__
    refuses to make one) keeps its type and loses the credential."""
    from kernelhub.redact import redacted_error

    class AuthRefused(KernelHubError, PermissionError):
        pass

    clone = redacted_error(AuthRefused("401: pass token=hf_abcdefghijklmnopqrstuvwxyz"))
    assert type(clone) is AuthRefused
    assert "hf_abcdefghijklmnopqrstuvwxyz" not in str(clone)
