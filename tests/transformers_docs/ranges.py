"""The Transformers configurations the seed tests and the documentation examples run
under, every CI run:

* ``installed`` — the Transformers in ``.venv`` (5.25, which brings the ecosystem's
  ``kernels`` 0.19.1), served by kernelhub;
* ``5.24`` — Transformers 5.24.0 first on the path (``ci/setup-transformers``), served by
  kernelhub; ``kernels`` 0.19.1 stays installed, which 5.24 does not accept, so
  Transformers itself behaves as without it;
* ``off`` — the installed Transformers with ``KERNELHUB_TRANSFORMERS=0``: the ecosystem's
  path, untouched by kernelhub.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from e2e import REPO, run

OLDER = "5.24.0"
"""The previous Transformers release, tested beside the installed one (config ``5.24``)."""

SWITCH = "KERNELHUB_TRANSFORMERS"


def overlay(version: str = OLDER) -> Path:
    """The pip ``--target`` overlay holding Transformers ``version`` (made on first use)."""
    path = REPO / ".venv" / f"transformers-{version}"
    if not (path / ".complete").exists():
        run(["bash", str(REPO / "ci" / "setup-transformers"), version])
    return path


def environment(config: str) -> dict[str, str]:
    """The variables that put a process in ``config`` (added to the workspace's)."""
    if config == "installed":
        return {}
    if config == "off":
        return {SWITCH: "0"}
    assert OLDER.startswith(config + "."), f"unknown configuration {config!r}"
    return {"PYTHONPATH": str(overlay(OLDER))}


def transformers_version(env: dict[str, str]) -> str:
    """The Transformers release a process with ``env`` imports."""
    import sys

    code = "import importlib.metadata as m; print(m.version('transformers'))"
    return subprocess.run([sys.executable, "-c", code], env=env, text=True,
                          capture_output=True, check=True).stdout.strip()
