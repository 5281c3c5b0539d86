"""Hub-API endpoints: checked as the user writes them, and keyed for the cache.

An endpoint comes from ``--hub``, ``KERNELHUB_HUB``, ``HF_ENDPOINT`` or a manifest, and
may carry credentials (``https://user:password@host``); every message that shows one
shows it redacted (:mod:`kernelhub.redact`).

The cache key is a directory name under the cache root, so it must be filesystem-safe;
it must also never be shared by two hubs that could serve different content under the
same repository and commit names, or one hub's cached variant list or refs would be
served for the other. Host and port alone are not enough: ``http`` and ``https`` may
be different servers, and one host may serve several mirrors under different paths.
"""

from __future__ import annotations

__lazy_modules__ = {"kernelhub.errors"}  # PEP 810: imported when first used

import hashlib
import os
import socket
from urllib.parse import urlsplit

from .. import user_files
from ..errors import HubError

CONNECT_TIMEOUT = 5.0
"""Seconds a first connection to a Hub-API server may take before the hub counts as
unreachable. huggingface_hub's client waits without limit; on a machine with no route
out, the default search path's ``hf`` entry would then hang a load for minutes."""

_PROXY_VARS = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy")

_reached: set[tuple[str, int]] = set()
"""(host, port) pairs this process has connected to: asked once per process."""


def check_reachable(endpoint: str) -> None:
    """Raise a one-line HubError unless a TCP connection to ``endpoint`` opens within
    :data:`CONNECT_TIMEOUT` (once per host and port per process; skipped where a proxy is
    configured, since then the proxy, not the host, is what is connected to)."""
    parts = urlsplit(endpoint)
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme.lower() == "https" else 80)
    if (host, port) in _reached or any(os.environ.get(v) for v in _PROXY_VARS):
        return
    try:
        socket.create_connection((host, port), timeout=CONNECT_TIMEOUT).close()
    except OSError as e:
        why = "timed out" if isinstance(e, TimeoutError) else (e.strerror or type(e).__name__)
        raise HubError(
            f"cannot reach the hub at {user_files.shown_path(endpoint)} ({why}); check the "
            "network or HF_ENDPOINT, set HF_HUB_OFFLINE=1 to load from the cache, or leave "
            "it off the search path (KERNELHUB_HUB)") from None
    _reached.add((host, port))


_SAFE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789.-")


def check_endpoint(url: str, what: str) -> str:
    """``url`` when it is an http(s) URL huggingface_hub can talk to, else a one-line
    :class:`HubError` saying what ``what`` (``--hub``, ``HF_ENDPOINT``) got wrong.

    A query or fragment is refused: the client appends API paths to the endpoint, so a
    ``?token=`` there would end up in the middle of every request's query (a token goes
    in ``HF_TOKEN``).
    """
    problem = None
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - parsing the port is the check
    except ValueError as e:
        problem = str(e)
    else:
        if parts.scheme.lower() not in ("http", "https"):
            problem = "it is not an http(s) URL"
        elif not parts.hostname:
            problem = "it names no host"
        elif parts.query or parts.fragment or "?" in url or "#" in url:
            problem = "a hub URL takes no query or fragment; put a token in HF_TOKEN"
        elif any(not c.isprintable() or c.isspace() for c in url):
            problem = "it holds spaces or control characters"
    if problem is not None:
        raise HubError(f"{what} {user_files.shown_path(url)} is not a hub URL: {problem}; write "
                       "http(s)://host[:port][/path]")
    return url


def endpoint_key(endpoint: str) -> str:
    """``hf-<host>[-<port>]-<hash of the normalised URL>``: readable and collision-free.

    The scheme and host are lower-cased and a trailing slash dropped (the same server
    either way); everything else (scheme, port, path) is part of the identity.
    """
    parts = urlsplit(endpoint.strip())
    host = (parts.hostname or "unknown").lower()
    netloc = host if parts.port is None else f"{host}:{parts.port}"
    normal = f"{parts.scheme.lower()}://{netloc}{parts.path.rstrip('/')}"
    readable = host if parts.port is None else f"{host}-{parts.port}"
    digest = hashlib.sha256(normal.encode()).hexdigest()[:12]
    safe = "".join(c if c in _SAFE else "_" for c in readable)  # no regex compile per process
    return f"hf-{safe}-{digest}"
