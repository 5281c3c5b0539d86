"""nginx (the system's, as Debian ships it) in front of serve processes, unprivileged, on
a loopback port, with its pid, logs, temporary files and cache under the test's folder —
running the configuration ``kernelhub_serve.nginx`` renders for deployments."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from kernelhub_serve.nginx import render_nginx_conf
from reference_loader import _wait_for_port, free_port, stop_process

NGINX = shutil.which("nginx") or shutil.which("nginx", path="/usr/sbin:/usr/local/sbin")


@contextmanager
def nginx_in_front(work: Path, upstreams: list[str], workers: int = 2,
                   started: list[subprocess.Popen[bytes]] | None = None) -> Iterator[str]:
    """nginx proxying to ``upstreams`` (serve URLs); yields its URL (and appends its
    master process to ``started``)."""
    if NGINX is None:
        raise RuntimeError("no nginx: install it (apt-get install nginx; ci/setup does)")
    prefix, cache = work / "nginx", work / "nginx-cache"
    prefix.mkdir(parents=True)
    port = free_port()
    conf = prefix / "nginx.conf"
    conf.write_text(render_nginx_conf(
        f"127.0.0.1:{port}", [u.removeprefix("http://") for u in upstreams], prefix, cache,
        workers=workers, foreground=True,
        # As root, nginx's workers would drop to nobody, who cannot write under tmp_path.
        user="root" if os.geteuid() == 0 else None))
    log = prefix / "stderr.log"
    with log.open("wb") as out:
        # -e: the startup error log too, before nginx.conf is read (not /var/log/nginx).
        proc = subprocess.Popen([NGINX, "-p", str(prefix), "-c", str(conf),
                                 "-e", str(prefix / "error.log")],
                                stdout=out, stderr=subprocess.STDOUT)
        if started is not None:
            started.append(proc)
        try:
            _wait_for_port(port, proc, log, "nginx")
            yield f"http://127.0.0.1:{port}"
        finally:
            stop_process(proc)
