"""The nginx configuration that puts a cache in front of several serve processes: one
template (``templates/nginx.conf``), rendered here for docs/serve.md's deployment, the
tests and ``benchmarks/serve.py``, so all three run the same configuration."""

from __future__ import annotations

import re
from pathlib import Path

from jinja2 import Environment, FileSystemLoader, StrictUndefined

from .errors import ServeError

TEMPLATE = Path(__file__).parent / "templates" / "nginx.conf"
_ADDRESS = re.compile(r"[A-Za-z0-9.:\[\]-]+:[0-9]{1,5}|[0-9]{1,5}")
_SIZE = re.compile(r"[0-9]+[kmg]?")
_USER = re.compile(r"[a-z_][a-z0-9_-]{0,31}")
_env = Environment(loader=FileSystemLoader(TEMPLATE.parent), autoescape=False,
                   undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True,
                   keep_trailing_newline=True)


def render_nginx_conf(listen: str, upstreams: list[str], prefix: Path, cache_dir: Path,
                      *, workers: int = 2, cache_max_size: str = "10g",
                      foreground: bool = False, user: str | None = None) -> str:
    """nginx.conf text: ``listen`` (``host:port`` or a port) proxies to ``upstreams``
    (``host:port`` of each serve process); pid, logs and temporary files under
    ``prefix``, cached files under ``cache_dir``; ``user``: who the workers run as when
    nginx starts as root (they must be able to write ``cache_dir``). Every value is checked, since each
    lands unquoted in a configuration that nginx runs with."""
    for address in (listen, *upstreams):
        if not _ADDRESS.fullmatch(address):
            raise ServeError(f"{address!r} is not an address nginx can use here (host:port "
                             "or a port, e.g. 127.0.0.1:8900)")
    if not upstreams:
        raise ServeError("nginx needs at least one kernelhub serve process to proxy to")
    for path in (prefix, cache_dir):
        if not path.is_absolute() or re.search(r"[\s;{}'\"$#\\]", str(path)):
            raise ServeError(f"{str(path)!r}: nginx paths here must be absolute, with no "
                             "spaces, quotes or any of ; { } $ # \\")
    if not _SIZE.fullmatch(cache_max_size) or workers < 1:
        raise ServeError(f"cache size {cache_max_size!r} / workers {workers}: a size like "
                         "'10g' and at least one worker")
    if user is not None and not _USER.fullmatch(user):
        raise ServeError(f"{user!r} is not a user name")
    return _env.get_template(TEMPLATE.name).render(
        listen=listen, upstreams=upstreams, prefix=prefix, cache_dir=cache_dir,
        workers=workers, cache_max_size=cache_max_size, foreground=foreground, user=user)
