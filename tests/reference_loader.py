"""The ecosystem's reference loader (Hugging Face ``kernels``) next to ours, over a real
Hub-API server: what the interop test and ``benchmarks/load_time.py`` share.

Three parts, each real:

* ``install_reference_loader`` — pip installs ``kernels`` into a directory of its own that
  only a subprocess with ``PYTHONPATH=<dir>`` sees. It must never land in our venv or a
  toolchain env: Transformers changes behaviour when a package named ``kernels`` imports.
* ``OlahServer`` — olah, an existing Hub-API mirror, serving a LocalHub root in offline mode
  (the same setup as ``loader/tests/hub/conftest.py``), the way a team shares a hub.
* ``KernelRepoProxy`` — a counting reverse proxy in front of olah. The reference loader asks
  for the ``kernel`` repo type (``/api/kernels/…``, ``/kernels/<org>/<name>/resolve/…``)
  that the Hub grew for kernels; olah only knows models, datasets and spaces, and a LocalHub
  keeps repos under ``models/``. The proxy maps the one prefix onto the other and passes
  everything else through unchanged, and it counts every request, which is how the
  benchmark shows which loads touch the network at all.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx

REFERENCE_VERSION = "0.17.2"
"""The ``kernels`` release this interop is checked against."""

ECOSYSTEM_VERSIONS = ("0.17.2", "0.19.1")
"""The oldest ``kernels`` release we support and the one users install today."""

_HOP_HEADERS = {"connection", "keep-alive", "transfer-encoding", "content-length",
                "content-encoding", "host"}


class ReferenceLoaderUnavailable(RuntimeError):
    """pip could not install the reference loader (no index reachable, most likely)."""


def install_reference_loader(target: Path, version: str = REFERENCE_VERSION) -> Path:
    """Install ``kernels==version`` into ``target`` (once: a marker file makes reruns free).

    Returns ``target``, the directory to put on ``PYTHONPATH``. Without its dependencies:
    ``kernels`` also requires sigstore and tomlkit, but only its CLI's signature check
    imports them; huggingface_hub, packaging and pyyaml (its load path) come from our venv.
    Installing its full dependency tree would shadow our venv's huggingface_hub and cost a
    minute of CI for code the loads never run.
    """
    marker = target / f".kernels-{version}-installed"
    if marker.exists():
        return target
    requirements = (f"kernels=={version}",)
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
         "--no-deps", "--target", str(target), *requirements],
        capture_output=True, text=True,
    )
    if proc.returncode != 0:
        raise ReferenceLoaderUnavailable(
            f"pip install {' '.join(requirements)} --target {target} failed "
            f"(is a package index reachable?):\n{proc.stdout}\n{proc.stderr}"
        )
    marker.write_text(version)
    return target


def ecosystem_loaders(factory: Any) -> dict[str, Path]:
    """Each of :data:`ECOSYSTEM_VERSIONS` installed in a directory of its own under the
    ``tmp_path_factory`` ``factory``, by version; the calling test is skipped when pip
    cannot reach an index."""
    import pytest

    try:
        return {version: install_reference_loader(factory.mktemp(f"kernels-{version}"), version)
                for version in ECOSYSTEM_VERSIONS}
    except ReferenceLoaderUnavailable as e:
        pytest.skip(str(e))


def reference_env(base: dict[str, str], target: Path, endpoint: str, hf_cache: Path,
                  **extra: str) -> dict[str, str]:
    """Environment for a subprocess that runs the reference loader against ``endpoint``."""
    env = dict(base)
    env.update(
        PYTHONPATH=os.pathsep.join(p for p in (str(target), env.get("PYTHONPATH")) if p),
        HF_ENDPOINT=endpoint,
        HF_HUB_CACHE=str(hf_cache),
        HF_HUB_DISABLE_PROGRESS_BARS="1",
        NO_PROXY="127.0.0.1,localhost",
        no_proxy="127.0.0.1,localhost",
    )
    # HF_HUB_DISABLE_TELEMETRY=1 breaks kernels 0.17.2 on huggingface_hub 2.x: it then
    # passes an empty user agent and the header ends in "; ", which httpx rejects.
    for name in ("HF_HUB_DISABLE_TELEMETRY", "HF_HUB_OFFLINE", "KERNELS_CACHE", "LOCAL_KERNELS", "HF_TOKEN"):
        env.pop(name, None)
    env.update(extra)
    return env


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for_port(port: int, proc: subprocess.Popen[bytes], log: Path, what: str) -> None:
    deadline = time.monotonic() + 30
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited early:\n{log.read_text()}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{what} did not start in 30 s:\n{log.read_text()}") from None
            time.sleep(0.1)


def olah_cli() -> str | None:
    """The olah executable next to this interpreter or on PATH, or None."""
    local = Path(sys.executable).parent / "olah-cli"
    return str(local) if local.exists() else shutil.which("olah-cli")


@contextmanager
def olah_server(hub_root: Path, work: Path) -> Iterator[str]:
    """Serve ``hub_root`` (a LocalHub root) with olah in offline mode; yields its URL."""
    cli = olah_cli()
    if cli is None:
        raise RuntimeError("olah is not installed (pip install olah)")
    work.mkdir(parents=True, exist_ok=True)
    port = free_port()
    config = work / "olah.toml"
    config.write_text(
        "[basic]\n"
        'host = "127.0.0.1"\n'
        f"port = {port}\n"
        f"mirrors-path = [{json.dumps(str(hub_root))}]\n"
        f"repos-path = {json.dumps(str(work / 'olah-cache'))}\n"
        "[accessibility]\n"
        "offline = true\n"
    )
    log_path = work / "olah.log"
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [cli, "-c", str(config), "--log-path", str(work / "logs")],
            cwd=work, stdout=log, stderr=subprocess.STDOUT,
            env={**os.environ, "NO_PROXY": "127.0.0.1", "no_proxy": "127.0.0.1"},
        )
        try:
            _wait_for_port(port, proc, log_path, "olah")
            yield f"http://127.0.0.1:{port}"
        finally:
            stop_process(proc)


def stop_process(proc: subprocess.Popen[bytes]) -> None:
    """Terminate a server this test started; kill it if it does not stop in 10 s."""
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@contextmanager
def served_hub(hub_root: Path, work: Path) -> Iterator[KernelRepoProxy]:
    """A LocalHub root behind olah, behind the counting kernel-repo-type proxy: what the
    reference loader reads a published hub through."""
    with olah_server(hub_root, work) as url:
        proxy = KernelRepoProxy(url)
        try:
            yield proxy
        finally:
            proxy.close()


def map_kernel_repo_type(path: str) -> str:
    """The olah path for a request the reference loader makes with ``repo_type="kernel"``.

    >>> map_kernel_repo_type("/api/kernels/kernels-community/activation/refs")
    '/api/models/kernels-community/activation/refs'
    >>> map_kernel_repo_type("/kernels/kernels-community/activation/resolve/abc/x.json")
    '/kernels-community/activation/resolve/abc/x.json'
    """
    if path.startswith("/api/kernels/"):
        return "/api/models/" + path[len("/api/kernels/"):]
    if path.startswith("/kernels/"):
        return path[len("/kernels"):]
    return path


@dataclass
class KernelRepoProxy:
    """A threaded reverse proxy to ``upstream`` that maps the kernel repo type and counts.

    ``requests`` lists ``"METHOD path"`` for every request received, in order. With
    ``map_types=False`` it only counts (a server such as ``kernelhub serve`` has the kernel
    type itself).
    """

    upstream: str
    requests: list[str] = field(default_factory=list)
    map_types: bool = True

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._client = httpx.Client(base_url=self.upstream, timeout=60, trust_env=False)
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _forward(self) -> None:
                with proxy._lock:
                    proxy.requests.append(f"{self.command} {self.path}")
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                headers = {k: v for k, v in self.headers.items()
                           if k.lower() not in _HOP_HEADERS and k.lower() != "accept-encoding"}
                upstream = proxy._client.request(
                    self.command,
                    map_kernel_repo_type(self.path) if proxy.map_types else self.path,
                    headers=headers,
                    content=body, follow_redirects=False,
                )
                data = upstream.content
                self.send_response(upstream.status_code)
                for key, value in upstream.headers.multi_items():
                    if key.lower() in _HOP_HEADERS:
                        continue
                    if key.lower() == "location":
                        value = value.replace(proxy.upstream, proxy.url)
                    self.send_header(key, value)
                # A HEAD answer carries the size of the body it did not send.
                size = (upstream.headers.get("content-length", "0")
                        if self.command == "HEAD" else str(len(data)))
                self.send_header("Content-Length", size)
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)

            do_GET = do_HEAD = do_POST = _forward

            def log_message(self, format: str, *args: object) -> None:
                """Silent: the request list is the log."""

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def count(self) -> int:
        with self._lock:
            return len(self.requests)

    def since(self, start: int) -> list[str]:
        """Requests received after the first ``start`` ones."""
        with self._lock:
            return self.requests[start:]

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._client.close()
