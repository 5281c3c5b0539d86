"""What a server is configured with, filled once from the command line."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .tokens import TokenTable


@dataclass(frozen=True)
class ServeSettings:
    """Everything the application needs; the CLI fills it, tests and benchmarks build it."""

    hub: Path
    """The LocalHub root (``<hub>/models/<org>/<name>`` bare repositories)."""
    tokens: TokenTable
    """Who may read and write which organisations (see :mod:`kernelhub_serve.tokens`)."""
    lfs_threshold: int | None = None
    """Files at least this large are uploaded through the LFS batch API (the preupload
    answer says ``lfs``); None: every file travels in the commit itself. Off by default
    because huggingface_hub with hf_xet installed (its default) uploads ``lfs`` files
    through Xet storage, which this server does not speak."""
    public_url: str | None = None
    """The URL clients reach the server at, when a reverse proxy changes it (used in the
    links the server hands out: LFS upload actions, commit URLs); None: the request's."""
    max_body: int = 2 * 1024**3
    """The largest request body accepted (a commit carries its regular files base64)."""
