"""ci/device-check: one bounded call on a lent GPU + AMX machine.

Here (no GPU) it must refuse bad arguments before writing anything, and its GPU step
must say it was skipped and let the call go on, rather than fail or hang.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[3] / "ci" / "device-check"


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, timeout=120,
                          check=False)


def test_device_check_parses_as_bash() -> None:
    done = subprocess.run(["bash", "-n", str(SCRIPT)], capture_output=True, text=True,
                          check=False)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize(("args", "reason"), [
    (["--steps", "gpu,lunch"], "unknown step 'lunch'"),
    (["--steps", "attn"], "--prebuilt '' is not a directory"),
    (["--steps", "model", "--prebuilt", "."], "--hub '' is not a directory"),
    (["--frobnicate"], "unknown argument '--frobnicate'"),
])
def test_device_check_refuses_bad_arguments_before_writing(
    tmp_path: Path, args: list[str], reason: str
) -> None:
    done = _run(str(tmp_path / "out"), *args)
    assert done.returncode == 2, done.stdout + done.stderr
    assert reason in done.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="this machine has a GPU")
def test_device_check_skips_the_gpu_step_without_a_gpu(tmp_path: Path) -> None:
    (tmp_path / "prebuilt").mkdir()
    done = _run(str(tmp_path / "out"), "--steps", "gpu", "--prebuilt", str(tmp_path / "prebuilt"))
    assert done.returncode == 0, done.stdout + done.stderr
    summary = (tmp_path / "out" / "summary.log").read_text()
    assert "gpu: skipped: no NVIDIA GPU" in summary
    machine = (tmp_path / "out" / "machine.log").read_text()
    assert "cpu: " in machine and "gpu: " in machine


def test_device_check_reports_a_step_that_fails(tmp_path: Path) -> None:
    """A prebuilt dir without flash-attn2: the attention step fails, saying why, and the
    call's status says so."""
    (tmp_path / "prebuilt").mkdir()
    done = _run(str(tmp_path / "out"), "--steps", "attn", "--prebuilt", str(tmp_path / "prebuilt"))
    assert done.returncode == 1
    assert "attn: FAILED: no CPU variant of flash-attn2" in (tmp_path / "out" / "summary.log").read_text()


PREPARE = SCRIPT.parent / "device-prepare"


@pytest.mark.parametrize(("args", "reason"), [
    (["--torch", "2.11"], "--torch '2.11' is not a torch release X.Y.Z"),
    ([], "--torch '' is not a torch release X.Y.Z"),
    (["--torch", "2.11.0", "--bogus"], "unknown argument '--bogus'"),
])
def test_device_prepare_refuses_bad_arguments_before_building(
    tmp_path: Path, args: list[str], reason: str
) -> None:
    """ci/device-prepare (the development machine's half: builds for the lent machine's
    torch) says what is wrong before it creates, builds or downloads anything."""
    done = subprocess.run([str(PREPARE), str(tmp_path / "dest"), *args], capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 2, done.stdout + done.stderr
    assert reason in done.stderr
    assert not (tmp_path / "dest").exists()
