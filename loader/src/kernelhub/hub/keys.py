"""Cache keys of Hub-API endpoints: every distinct endpoint gets its own cache.

The key is a directory name under the cache root, so it must be filesystem-safe; it
must also never be shared by two hubs that could serve different content under the
same repository and commit names, or one hub's cached variant list or refs would be
served for the other. Host and port alone are not enough: ``http`` and ``https`` may
be different servers, and one host may serve several mirrors under different paths.
"""

from __future__ import annotations

import hashlib
from urllib.parse import urlsplit

_SAFE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789.-")


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
