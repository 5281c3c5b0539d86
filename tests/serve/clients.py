"""The ecosystem's own clients, installed beside (never into) our venv for the serve tests.

``kernels`` 0.19.1 — the loader every Transformers from 5.25 on carries — goes into a
directory of its own that only subprocesses see through ``PYTHONPATH`` (as
tests/reference_loader.py does for 0.17.2: a package named ``kernels`` in our venv would
change Transformers' behaviour). When the venv's Transformers is not 5.25, the same
directory gets Transformers 5.25 too. The directory lives under ``~/.cache`` keyed by
what it holds, so CI installs it once per machine.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import subprocess
import sys
from pathlib import Path

KERNELS = "kernels==0.19.1"
TRANSFORMERS = "transformers==5.25.0"


class ClientsUnavailable(RuntimeError):
    """pip could not install the clients (no package index reachable)."""


def requirements() -> list[str]:
    wanted = [KERNELS, "tomlkit>=0.13.3"]  # tomlkit: kernels' own dependency, not in our venv
    if importlib.metadata.version("transformers") != TRANSFORMERS.split("==")[1]:
        wanted.append(TRANSFORMERS)
    return wanted


def install_clients() -> Path:
    wanted = requirements()
    key = hashlib.sha256("\n".join(wanted).encode()).hexdigest()[:12]
    target = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / \
        "kernelhub-serve" / f"clients-{key}"
    marker = target / ".installed"
    if marker.exists():
        return target
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
         "--no-deps", "--target", str(target), *wanted], capture_output=True, text=True)
    if proc.returncode != 0:
        raise ClientsUnavailable(f"pip install {' '.join(wanted)} --target {target} failed:\n"
                                 f"{proc.stdout}\n{proc.stderr}")
    marker.write_text("\n".join(wanted))
    return target


def client_env(target: Path, endpoint: str, hf_home: Path, **extra: str) -> dict[str, str]:
    """A subprocess environment: the clients first on the path, HF_ENDPOINT at the server,
    kernelhub's Transformers integration off (the ecosystem's path runs untouched)."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("HF_", "KERNELS_", "KERNELHUB_")) and k != "LOCAL_KERNELS"}
    env.update(PYTHONPATH=os.pathsep.join(p for p in (str(target), env.get("PYTHONPATH")) if p),
               HF_ENDPOINT=endpoint, HF_HOME=str(hf_home), HF_HUB_DISABLE_PROGRESS_BARS="1",
               KERNELHUB_TRANSFORMERS="0", NO_PROXY="127.0.0.1", no_proxy="127.0.0.1",
               TOKENIZERS_PARALLELISM="false")
    env.update(extra)
    return env
