"""A torch env installs the project's pin even where the machine's pip configuration
caps the package below it (this project's machines cap torch at 2.14.1 in
/etc/xdg/pip; the 2.15 env must still be made), while ordinary installs keep obeying it.

Real pip, a real venv and a real local package, offline: the package stands in for torch
only as the capped name, the constraint machinery is pip's own."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest
from kernelhub_builder.errors import TorchEnvError
from kernelhub_builder.plan.torch_env import create_venv, pip_install


def _wheel(root: Path, version: str) -> Path:
    """A minimal real wheel of ``capped`` (what pip installs from a wheelhouse)."""
    info = f"capped-{version}.dist-info"
    files = {
        "capped/__init__.py": f"VERSION = {version!r}\n",
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: capped\nVersion: {version}\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: hand\nRoot-Is-Purelib: true\n"
                         "Tag: py3-none-any\n",
    }
    record = "".join(f"{name},,\n" for name in files) + f"{info}/RECORD,,\n"
    root.mkdir(parents=True, exist_ok=True)
    wheel = root / f"capped-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        for name, text in {**files, f"{info}/RECORD": record}.items():
            z.writestr(name, text)
    return root


@pytest.fixture
def capped_machine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A pip configuration like the machine's: a global constraint capping the package."""
    constraints = tmp_path / "constraints.txt"
    constraints.write_text("capped<=1.0\n")
    config = tmp_path / "pip.conf"
    config.write_text(f"[global]\nconstraint = {constraints}\n")
    monkeypatch.setenv("PIP_CONFIG_FILE", str(config))
    monkeypatch.delenv("PIP_CONSTRAINT", raising=False)
    venv = tmp_path / "venv"
    create_venv(venv)
    return venv / "bin" / "python"


def test_pin_install_lifts_the_machine_cap_plain_install_keeps_it(
    capped_machine: Path, tmp_path: Path
) -> None:
    wheels = _wheel(tmp_path / "wheels", "2.0")
    args = ["--no-index", "--find-links", str(wheels), "capped==2.0"]
    with pytest.raises(TorchEnvError, match=r"capped<=1\.0"):
        pip_install(capped_machine, args)
    pip_install(capped_machine, args, constraints=False)
    site = next((capped_machine.parent.parent / "lib").glob("python3*/site-packages"))
    assert (site / "capped" / "__init__.py").read_text() == "VERSION = '2.0'\n"
