"""The import hook installed by ``kernelhub-autoload.pth``: on by default (whether or not
the ecosystem's ``kernels`` is installed), off with ``KERNELHUB_TRANSFORMERS=0``, and
``import kernels`` always the installed distribution.

Each case runs a fresh interpreter, since the hook acts at interpreter start.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import types
import warnings
from pathlib import Path

import pytest

LOADER_SRC = Path(__file__).resolve().parents[1] / "src"

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
    found["kernelize"] = kernelize.__module__
    found["kernelhub_imported"] = "kernelhub" in sys.modules
    if found["kernelhub_imported"]:
        from kernelhub.integrations.transformers import patch
        found["enabled"] = patch.is_enabled()
print(json.dumps(found))
"""


def probe(*args: str, python: str = sys.executable, **env: str) -> dict:
    environ = {k: v for k, v in os.environ.items() if k != "KERNELHUB_TRANSFORMERS"}
    environ.update(env)
    proc = subprocess.run([python, "-c", PROBE, *args], env=environ, text=True,
                          capture_output=True, check=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_hook_is_installed_and_kernels_is_the_installed_distribution():
    found = probe()
    assert found["finders"][0] == "TransformersWatcher"
    assert found["finders"][-1] == "KernelsName"
    try:
        import importlib.metadata as md

        md.distribution("kernels")
    except md.PackageNotFoundError:
        assert found["kernels"] == "kernelhub.ecosystem"
    else:  # the ecosystem's package is installed: it is what `import kernels` gives
        assert found["kernels"] == "kernels"
        assert "kernelhub" not in found["kernels_file"]


def test_without_an_installed_kernels_the_name_is_served_by_kernelhub(tmp_path: Path):
    """On an interpreter with no ``kernels`` distribution (the base one under this venv),
    the hook (what the .pth imports) answers ``import kernels`` with the compatibility
    module."""
    base = Path(sys.base_prefix) / "bin" / "python3"
    if not base.exists():
        pytest.skip(f"no base interpreter at {base}")
    check = subprocess.run([str(base), "-c", "import kernels"], capture_output=True)
    if check.returncode == 0:
        pytest.skip(f"{base} has a `kernels` package of its own")
    code = "import _kernelhub_autoload\n" + PROBE
    environ = {k: v for k, v in os.environ.items() if k != "KERNELHUB_TRANSFORMERS"}
    environ["PYTHONPATH"] = str(LOADER_SRC)
    proc = subprocess.run([str(base), "-c", code], env=environ, text=True,
                          capture_output=True, check=True)
    found = json.loads(proc.stdout.strip().splitlines()[-1])
    assert found["kernels"] == "kernelhub.ecosystem"


@pytest.mark.parametrize("value", ["0", "off", "NO", "false"])
def test_switched_off_installs_nothing(value):
    found = probe(KERNELHUB_TRANSFORMERS=value)
    assert "TransformersWatcher" not in found["finders"]
    assert "KernelsName" not in found["finders"]


def test_transformers_is_served_without_user_code():
    pytest.importorskip("transformers")
    found = probe("--transformers")
    assert found["enabled"] is True
    assert found["kernelize"] == "kernelhub.integrations.transformers.methods"


def test_switched_off_transformers_runs_untouched_and_kernelhub_is_never_imported():
    pytest.importorskip("transformers")
    found = probe("--transformers", KERNELHUB_TRANSFORMERS="0")
    assert found["kernelize"] == "transformers.integrations.hub_kernels"
    assert found["kernelhub_imported"] is False


def _fake_ecosystem_kernels(root: Path) -> Path:
    """An installed distribution named ``kernels`` (too old for Transformers to use)."""
    (root / "kernels").mkdir(parents=True)
    (root / "kernels" / "__init__.py").write_text("ECOSYSTEM = True\n")
    info = root / "kernels-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: kernels\nVersion: 0.1.0\n")
    return root


def test_an_installed_kernels_keeps_its_name_and_kernelhub_still_serves(tmp_path):
    pytest.importorskip("transformers")
    site = _fake_ecosystem_kernels(tmp_path / "site")
    found = probe("--transformers", PYTHONPATH=str(site))
    assert found["kernels_file"] == str(site / "kernels" / "__init__.py")
    assert found["enabled"] is True
    assert found["kernelize"] == "kernelhub.integrations.transformers.methods"


# -- declining, said once --------------------------------------------------------


@pytest.fixture
def fresh_autoload(monkeypatch: pytest.MonkeyPatch):
    from kernelhub.integrations.transformers import autoload, patch

    monkeypatch.setattr(autoload, "_state", {})
    yield autoload
    patch.disable()


def test_a_changed_seam_is_declined_with_one_warning_naming_it_and_the_switch(fresh_autoload):
    hub_kernels = types.ModuleType("transformers.integrations.hub_kernels")
    hub_kernels.kernelize = lambda model: model  # type: ignore[attr-defined]
    with pytest.warns(UserWarning) as told:
        fresh_autoload.imported(hub_kernels)
        fresh_autoload.imported(hub_kernels)
    assert len(told) == 1
    message = str(told[0].message)
    assert "hub_kernels.kernelize no longer takes mode" in message
    assert "KERNELHUB_TRANSFORMERS=0" in message
    assert hub_kernels.kernelize.__module__ == __name__  # left as Transformers defines it


def test_an_old_transformers_is_declined(fresh_autoload, monkeypatch):
    from kernelhub.integrations.transformers import seams

    monkeypatch.setattr(seams, "installed_version", lambda: "4.57.1")
    with pytest.warns(UserWarning, match=r"transformers 4\.57\.1 is older than .*5\.0"):
        fresh_autoload.imported(types.ModuleType("transformers.activations"))


def test_a_newer_transformers_whose_seams_match_is_served_with_one_warning(fresh_autoload,
                                                                         monkeypatch):
    from kernelhub.integrations.transformers import seams

    monkeypatch.setattr(seams, "installed_version", lambda: "5.26.0")
    module = types.ModuleType("transformers.activations")
    with pytest.warns(UserWarning, match=r"5\.26\.0 is newer than .*\(5\.25\).*seams match"):
        fresh_autoload.imported(module)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fresh_autoload.imported(module)
    assert not fresh_autoload._state.get("declined")


def test_tested_releases_and_their_patch_releases_are_not_newer():
    from kernelhub.integrations.transformers import seams

    assert not seams.newer_than_tested("5.25.0")
    assert not seams.newer_than_tested("5.25.3")
    assert not seams.newer_than_tested("5.24.0")
    assert seams.newer_than_tested("5.26.0.dev0")
    assert seams.newer_than_tested("6.0.0")


# -- a broken or half-removed install never breaks the programs of the environment --

PTH = LOADER_SRC / "kernelhub-autoload.pth"


def _broken_install(root: Path) -> Path:
    """A site dir where kernelhub's hook is installed but kernelhub itself fails to import
    (a dependency gone), beside a package that owns a watched Transformers module name."""
    (root / "kernelhub").mkdir(parents=True)
    (root / "kernelhub" / "__init__.py").write_text("import a_dependency_that_is_gone\n")
    (root / "_kernelhub_autoload.py").write_text(
        (LOADER_SRC / "_kernelhub_autoload.py").read_text())
    (root / PTH.name).write_text(PTH.read_text())
    (root / "transformers").mkdir()
    (root / "transformers" / "__init__.py").write_text("")
    (root / "transformers" / "activations.py").write_text("ACT2FN = {'gelu': 'gelu'}\n")
    return root


def test_a_broken_kernelhub_install_degrades_to_one_warning(tmp_path: Path):
    site = _broken_install(tmp_path / "site")
    code = ("import site, sys, warnings\n"
            "warnings.simplefilter('default')\n"
            f"site.addsitedir({str(site)!r})\n"
            "assert type(sys.meta_path[0]).__name__ == 'TransformersWatcher'\n"
            "import transformers.activations\n"
            "from transformers import activations\n"
            "print(activations.ACT2FN['gelu'])\n"
            "print([type(f).__name__ for f in sys.meta_path])\n")
    environ = {k: v for k, v in os.environ.items() if k != "KERNELHUB_TRANSFORMERS"}
    environ["PYTHONPATH"] = str(site)  # its kernelhub shadows the real one
    proc = subprocess.run([sys.executable, "-S", "-c", code], env=environ, text=True,
                          capture_output=True, check=False, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout.splitlines()
    assert out[0] == "gelu"
    assert "TransformersWatcher" not in out[1] and "KernelsName" not in out[1]
    warned = [line for line in proc.stderr.splitlines() if "Warning" in line]
    assert len(warned) == 1, proc.stderr
    assert "kernelhub cannot be imported" in warned[0]
    assert "KERNELHUB_TRANSFORMERS=0" in warned[0]
    assert "Traceback" not in proc.stderr


def test_a_pth_left_behind_after_uninstall_is_silent(tmp_path: Path):
    site = tmp_path / "site"
    site.mkdir()
    (site / PTH.name).write_text(PTH.read_text())  # the hook module itself is gone
    code = (f"import site, sys\nsite.addsitedir({str(site)!r})\n"
            "print(any(type(f).__name__ == 'TransformersWatcher' for f in sys.meta_path))\n")
    proc = subprocess.run([sys.executable, "-S", "-c", code], text=True, capture_output=True,
                          check=False, cwd=tmp_path,
                          env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert proc.returncode == 0
    assert proc.stdout.strip() == "False"
    assert proc.stderr == ""


def test_the_pth_still_installs_the_hook(tmp_path: Path):
    site = tmp_path / "site"
    site.mkdir()
    (site / PTH.name).write_text(PTH.read_text())
    (site / "_kernelhub_autoload.py").write_text(
        (LOADER_SRC / "_kernelhub_autoload.py").read_text())
    code = (f"import site, sys\nsite.addsitedir({str(site)!r})\n"
            "print([type(f).__name__ for f in sys.meta_path])\n")
    environ = {k: v for k, v in os.environ.items()
               if k not in ("PYTHONPATH", "KERNELHUB_TRANSFORMERS")}
    proc = subprocess.run([sys.executable, "-S", "-c", code], text=True, capture_output=True,
                          check=True, cwd=tmp_path, env=environ)
    finders = proc.stdout.strip()
    assert finders.startswith("['TransformersWatcher'") and finders.endswith("'KernelsName']")
    assert proc.stderr == ""
