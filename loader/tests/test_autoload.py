"""The import hook installed by ``kernelhub-autoload.pth``: on by default, off with
``KERNELHUB_TRANSFORMERS=0``, and out of the way when the ecosystem's ``kernels`` is installed.

Each case runs a fresh interpreter, since the hook acts at interpreter start.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

PROBE = """
import json, sys
found = {"finders": [type(f).__name__ for f in sys.meta_path]}
try:
    import kernels
    found["kernels"] = getattr(kernels, "__name__", None)
    found["kernels_file"] = getattr(kernels, "__file__", None)
except ImportError as e:
    found["kernels"] = None
if "--transformers" in sys.argv:
    import transformers
    from transformers import kernelize
    from kernelhub.integrations.transformers import patch
    found["kernelize"] = kernelize.__module__
    found["enabled"] = patch.is_enabled()
print(json.dumps(found))
"""


def probe(*args: str, **env: str) -> dict:
    environ = {k: v for k, v in os.environ.items() if k != "KERNELHUB_TRANSFORMERS"}
    environ.update(env)
    proc = subprocess.run([sys.executable, "-c", PROBE, *args], env=environ, text=True,
                          capture_output=True, check=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_hook_is_installed_and_serves_the_kernels_name():
    found = probe()
    assert found["finders"][0] == "TransformersWatcher"
    assert found["finders"][-1] == "KernelsName"
    assert found["kernels"] == "kernelhub.ecosystem"


@pytest.mark.parametrize("value", ["0", "off", "NO", "false"])
def test_switched_off_installs_nothing(value):
    found = probe(KERNELHUB_TRANSFORMERS=value)
    assert "TransformersWatcher" not in found["finders"]
    assert "KernelsName" not in found["finders"]
    assert found["kernels"] is None


def test_transformers_is_served_without_user_code():
    pytest.importorskip("transformers")
    found = probe("--transformers")
    assert found["enabled"] is True
    assert found["kernelize"] == "kernelhub.integrations.transformers.patch"


def _fake_ecosystem_kernels(root: Path) -> Path:
    """An installed distribution named ``kernels`` (too old for Transformers to use)."""
    (root / "kernels").mkdir(parents=True)
    (root / "kernels" / "__init__.py").write_text("ECOSYSTEM = True\n")
    info = root / "kernels-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: kernels\nVersion: 0.1.0\n")
    return root


def test_installed_ecosystem_kernels_wins(tmp_path):
    pytest.importorskip("transformers")
    site = _fake_ecosystem_kernels(tmp_path / "site")
    found = probe("--transformers", PYTHONPATH=str(site))
    assert found["kernels_file"] == str(site / "kernels" / "__init__.py")
    assert found["enabled"] is False
    assert found["kernelize"] == "transformers.integrations.hub_kernels"
