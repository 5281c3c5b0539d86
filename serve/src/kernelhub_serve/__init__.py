"""kernelhub serve: a team's kernel hub over HTTP.

The embedded LocalHub (bare git repositories) spoken to through the Hub's HTTP API, so the
ecosystem's own clients — huggingface_hub, the ``kernels`` loader, Transformers'
``use_kernels=True`` — read and write it with ``HF_ENDPOINT`` pointed here, plus server-side
pages for people at ``/``. :func:`create_app` builds the ASGI application; ``kernelhub
serve`` (:mod:`kernelhub_serve.cli`) runs it on uvicorn.
"""

from __future__ import annotations

from .app import create_app
from .settings import ServeSettings

__all__ = ["ServeSettings", "create_app"]
