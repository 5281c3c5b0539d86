"""Fixtures for the hub tests: staged variant dirs, a LocalHub, and a real olah server."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kernelhub_builder.ship import LocalPublisher
from kh_hub_fixtures import hub, stage  # noqa: F401  (fixtures of these tests)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def olah_hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalPublisher, str]]:
    """A LocalHub served by a real olah mirror in offline mode: (hub, endpoint URL)."""
    olah_cli = Path(sys.executable).parent / "olah-cli"
    if not olah_cli.exists() and shutil.which("olah-cli") is None:
        pytest.skip("olah is not installed (pip install olah)")
    work = tmp_path_factory.mktemp("olah")
    published = LocalPublisher(work / "hub")
    (published.root / "models").mkdir(parents=True)
    port = _free_port()
    config = work / "olah.toml"
    config.write_text(
        "[basic]\n"
        'host = "127.0.0.1"\n'
        f"port = {port}\n"
        f"mirrors-path = [{json.dumps(str(published.root))}]\n"
        f"repos-path = {json.dumps(str(work / 'olah-cache'))}\n"
        "[accessibility]\n"
        "offline = true\n"
    )
    log = (work / "olah.log").open("wb")
    proc = subprocess.Popen(
        [
            str(olah_cli) if olah_cli.exists() else "olah-cli",
            "-c",
            str(config),
            "--log-path",
            str(work / "logs"),
        ],
        cwd=work,
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**os.environ, "NO_PROXY": "127.0.0.1", "no_proxy": "127.0.0.1"},
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            if proc.poll() is not None:
                pytest.fail(f"olah exited early:\n{(work / 'olah.log').read_text()}")
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail(f"olah did not start in 30s:\n{(work / 'olah.log').read_text()}")
                time.sleep(0.1)
        yield published, f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
