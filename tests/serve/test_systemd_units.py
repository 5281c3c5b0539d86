"""The systemd units docs/serve.md ships (issue 34 item 4): the docs show the templates
rendered; systemd itself accepts them (``systemd-analyze verify``, where the machine has
it); the serve unit's ``ExecStart``, with the instance as its port, starts a serve process
over the hub that answers there; the hardening a unit for a network service needs is on,
with the hub directory the one path it may write."""

from __future__ import annotations

import configparser
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from kernelhub_serve.errors import ServeError
from kernelhub_serve.systemd import NGINX_UNIT, SERVE_UNIT, render_systemd_units
from proxied import NGINX
from reference_loader import _wait_for_port, free_port, stop_process
from served import write_tokens_file

DOCS = Path(__file__).resolve().parents[2] / "docs/serve.md"
SHOWN: dict[str, Any] = {"executable": Path("/opt/kernelhub/.venv/bin/kernelhub-serve"),
         "hub": Path("/srv/kernel-hub"), "tokens": Path("/etc/kernelhub/tokens.toml"),
         "public_url": "https://kernels.example.internal", "ports": [8901, 8902],
         "nginx_conf": Path("/etc/kernelhub/nginx.conf")}


def sections(text: str) -> configparser.ConfigParser:
    """A unit file's [Section] key=value lines (systemd's syntax is INI for these units)."""
    parser = configparser.ConfigParser(interpolation=None, strict=False, delimiters=("=",))
    parser.optionxform = str  # keys are case-sensitive
    parser.read_string(text)
    return parser


def test_docs_show_the_rendered_units() -> None:
    docs = DOCS.read_text()
    units = render_systemd_units(**SHOWN)
    for name, text in units.items():
        shown = docs.split(f"<!-- {name}: begin -->\n```ini\n")[1].split("```\n<!--")[0]
        assert shown == text, f"docs/serve.md's {name} is not the template rendered"


def test_the_serve_unit_runs_serve_on_the_instance_port_hardened(tmp_path: Path) -> None:
    executable = Path(sys.executable).parent / "kernelhub-serve"
    hub, tokens = tmp_path / "hub", write_tokens_file(tmp_path / "tokens.toml")
    hub.mkdir()
    port = free_port()
    units = render_systemd_units(executable=executable, hub=hub, tokens=tokens,
                                 public_url=f"http://127.0.0.1:{port}", ports=[port],
                                 nginx_conf=tmp_path / "nginx.conf")
    service = sections(units[SERVE_UNIT])["Service"]
    assert service["User"] == "kernelhub" and service["Restart"] == "on-failure"
    assert service["NoNewPrivileges"] == "yes" and service["ProtectSystem"] == "strict"
    assert service["ReadWritePaths"] == str(hub) and service["CapabilityBoundingSet"] == ""
    nginx_unit = sections(units[NGINX_UNIT])
    assert f"kernelhub-serve@{port}.service" in nginx_unit["Unit"]["Wants"].split()
    assert nginx_unit["Service"]["StateDirectory"] == "kernelhub-nginx"

    # What systemd would run for instance <port>: %i is the instance name.
    argv = shlex.split(service["ExecStart"].replace("%i", str(port)))
    assert argv[0] == str(executable)
    assert argv[argv.index("--hub") + 1] == str(hub)
    log = tmp_path / "serve.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
        try:
            _wait_for_port(port, proc, log, "the unit's ExecStart")
            answer = httpx.get(f"http://127.0.0.1:{port}/api/whoami-v2")
            assert answer.status_code == 401  # serve itself, refusing an anonymous whoami
            assert answer.json()["error"]
        finally:
            stop_process(proc)


def test_systemd_accepts_the_units(tmp_path: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    if analyze is None or NGINX is None:
        pytest.skip("needs systemd-analyze and nginx (Debian: systemd, nginx)")
    hub = tmp_path / "hub"
    hub.mkdir()
    units = render_systemd_units(
        executable=Path(sys.executable).parent / "kernelhub-serve", hub=hub,
        tokens=write_tokens_file(tmp_path / "tokens.toml"), public_url="https://h.example",
        ports=[8901], nginx_conf=tmp_path / "nginx.conf", nginx=Path(NGINX))
    for name, text in units.items():
        (tmp_path / name).write_text(text)
    (tmp_path / "kernelhub-serve@8901.service").symlink_to(tmp_path / SERVE_UNIT)
    done = subprocess.run([analyze, "verify", "--man=no",
                           str(tmp_path / "kernelhub-serve@8901.service"),
                           str(tmp_path / NGINX_UNIT)],
                          capture_output=True, text=True, timeout=120)
    # systemd only warns about an unknown key or a bad value: any line about ours fails.
    problems = [line for line in done.stderr.splitlines() if "kernelhub" in line]
    assert done.returncode == 0 and not problems, done.stderr


def test_units_refuse_values_that_would_change_them(tmp_path: Path) -> None:
    good = {**SHOWN}
    with pytest.raises(ServeError, match="absolute"):
        render_systemd_units(**{**good, "hub": Path("/srv/hub\nExecStartPre=/bin/sh")})
    with pytest.raises(ServeError, match="absolute"):
        render_systemd_units(**{**good, "hub": Path("/srv/%h")})
    with pytest.raises(ServeError, match="not a URL"):
        render_systemd_units(**{**good, "public_url": "https://x --no-anonymous-reads"})
    with pytest.raises(ServeError, match="directly under"):
        render_systemd_units(**{**good, "cache_dir": Path("/tmp/cache")})
