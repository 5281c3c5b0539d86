"""The systemd units that run several serve processes and the nginx in front of them: two
templates (``templates/kernelhub-serve@.service``, ``templates/kernelhub-nginx.service``),
rendered here for docs/serve.md's deployment and its test, so what the docs show is what
the test verifies."""

from __future__ import annotations

import re
from pathlib import Path

from jinja2 import Environment, FileSystemLoader, StrictUndefined

from .errors import ServeError

TEMPLATES = Path(__file__).parent / "templates"
SERVE_UNIT = "kernelhub-serve@.service"
NGINX_UNIT = "kernelhub-nginx.service"
_USER = re.compile(r"[a-z_][a-z0-9_-]{0,31}")
_URL = re.compile(r"https?://[A-Za-z0-9.:\[\]-]+(/[A-Za-z0-9._~/-]*)?")
_env = Environment(loader=FileSystemLoader(TEMPLATES), autoescape=False,
                   undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True,
                   keep_trailing_newline=True)


def render_systemd_units(*, executable: Path, hub: Path, tokens: Path, public_url: str,
                         ports: list[int], nginx_conf: Path, user: str = "kernelhub",
                         nginx: Path = Path("/usr/sbin/nginx"),
                         state_dir: Path = Path("/var/lib/kernelhub-nginx"),
                         cache_dir: Path = Path("/var/cache/kernelhub-nginx")
                         ) -> dict[str, str]:
    """Unit file name → text. ``executable`` is the ``kernelhub-serve`` script, run as
    ``user`` over ``hub`` (the one path it may write) once per port in ``ports``;
    ``state_dir`` and ``cache_dir`` are nginx.conf's prefix and cache, which systemd makes
    (so they must sit directly under /var/lib and /var/cache). Every value is checked,
    since each lands unquoted in a unit that systemd runs."""
    for path in (executable, hub, tokens, nginx_conf, nginx, state_dir, cache_dir):
        if not path.is_absolute() or re.search(r"[\s;%$'\"\\]", str(path)):
            raise ServeError(f"{str(path)!r}: paths in a systemd unit here must be absolute, "
                             "with no spaces, quotes or any of ; % $ \\")
    for path, parent in ((state_dir, "/var/lib"), (cache_dir, "/var/cache")):
        if str(path.parent) != parent:
            raise ServeError(f"{path}: systemd makes this directory only directly under "
                             f"{parent} (e.g. {parent}/kernelhub-nginx)")
    if not _URL.fullmatch(public_url):
        raise ServeError(f"{public_url!r} is not a URL (https://host[:port][/path])")
    if not _USER.fullmatch(user):
        raise ServeError(f"{user!r} is not a user name")
    if not ports or any(not 1 <= port <= 65535 for port in ports):
        raise ServeError(f"ports {ports}: at least one, each 1-65535")
    values = {"executable": executable, "hub": hub, "tokens": tokens,
              "public_url": public_url, "user": user, "nginx": nginx,
              "nginx_conf": nginx_conf, "state_dir": state_dir, "cache_dir": cache_dir,
              "serve_units": " ".join(f"kernelhub-serve@{port}.service" for port in ports)}
    return {name: _env.get_template(name).render(**values) for name in (SERVE_UNIT, NGINX_UNIT)}
