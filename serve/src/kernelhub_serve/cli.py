"""``kernelhub serve`` (also ``kernelhub-serve`` and ``python -m kernelhub_serve``): run the
hub on uvicorn.

Registered in the entry-point group ``kernelhub.commands`` as ``serve``: the ``kernelhub``
CLI calls :func:`main` with the arguments after ``serve``.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from kernelhub.cli.text import ArgumentParser, error_line
from kernelhub.errors import KernelHubError
from kernelhub.redact import redact
from kernelhub.user_files import cli_path

from .settings import ServeSettings

DEFAULT_PORT = 8900


def parser() -> argparse.ArgumentParser:
    p = ArgumentParser(
        prog="kernelhub serve",
        description="Serve a LocalHub over the Hub HTTP API (HF_ENDPOINT) with pages at /.")
    p.add_argument("--hub", default=None,
                   help="the LocalHub root (default: $KERNELHUB_HUB, else "
                        "~/.local/share/kernelhub/hub)")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (default 127.0.0.1; put a reverse proxy in "
                        "front for others, see docs/serve.md)")
    p.add_argument("--port", type=_port, default=DEFAULT_PORT, help=f"default {DEFAULT_PORT}")
    p.add_argument("--tokens", type=cli_path, default=None,
                   help="tokens file (TOML): who may read and write which organisations; "
                        "without one the hub is read-only")
    p.add_argument("--no-anonymous-reads", action="store_true",
                   help="reads need a token too (overrides the tokens file's anonymous-read)")
    p.add_argument("--lfs-threshold", type=int, default=None, metavar="BYTES",
                   help="upload files of at least BYTES through the LFS batch API (clients "
                        "need HF_HUB_DISABLE_XET=1); default: every file inside the commit")
    p.add_argument("--public-url", default=None,
                   help="the URL clients use, when a reverse proxy changes it")
    p.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    return p


def _port(text: str) -> int:
    if not text.isdigit() or not 0 <= int(text) <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port (0 to 65535)")
    return int(text)


def settings_from(args: argparse.Namespace) -> ServeSettings:
    from kernelhub.hub.select import hub_address

    from .errors import ServeError
    from .tokens import TokenTable

    address = hub_address(args.hub)  # None: $KERNELHUB_HUB, else the default LocalHub
    if address.root is None:
        raise ServeError(f"{'--hub' if args.hub else 'KERNELHUB_HUB'} names a Hub-API server "
                         f"({redact(address.endpoint or 'hf')}); kernelhub serve serves a "
                         "LocalHub directory: pass --hub DIR")
    hub = address.root
    if hub.exists() and not hub.is_dir():
        raise ServeError(f"--hub {hub} is not a directory; point it at a LocalHub root")
    try:
        hub.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ServeError(f"cannot create the hub directory {hub}: {exc.strerror or exc}"
                         ) from None
    tokens = TokenTable.load(args.tokens) if args.tokens else TokenTable.read_only()
    if args.no_anonymous_reads:
        tokens = TokenTable(tokens.grants, frozenset())
    return ServeSettings(hub=hub.resolve(), tokens=tokens, lfs_threshold=args.lfs_threshold,
                         public_url=args.public_url)


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(name)s %(message)s")
    try:
        settings = settings_from(args)
    except KernelHubError as exc:
        print(f"kernelhub serve: {error_line(exc)}", file=sys.stderr)
        return 2
    import uvicorn

    from .app import create_app

    url = f"http://{args.host}:{args.port}"
    print(error_line(f"kernelhub serve: {settings.hub} at {url}  (HF_ENDPOINT={url})"),
          file=sys.stderr)  # the user's words, shown escaped
    if not settings.tokens.writable:
        print("kernelhub serve: no token may write (no --tokens file, or none with write "
              "rights): the hub is read-only", file=sys.stderr)
    # uvicorn's access log prints query strings (an LFS upload ticket is one); ours does not.
    uvicorn.run(create_app(settings), host=args.host, port=args.port, access_log=False,
                log_level=args.log_level, proxy_headers=True)
    return 0
