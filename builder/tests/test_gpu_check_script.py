"""ci/gpu-check: the GPU machine's build-test-benchmark script.

It can only do its job on a GPU machine; here it must at least parse, and fail fast
with a clear reason where there is no NVIDIA driver.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "ci" / "gpu-check"


def test_gpu_check_parses_as_bash() -> None:
    done = subprocess.run(["bash", "-n", str(SCRIPT)], capture_output=True, text=True,
                          check=False)
    assert done.returncode == 0, done.stderr


@pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="this machine has a GPU")
def test_gpu_check_fails_fast_without_a_gpu() -> None:
    done = subprocess.run([str(SCRIPT)], capture_output=True, text=True, timeout=60,
                          check=False)
    assert done.returncode == 2
    assert "no nvidia-smi" in done.stderr and "GPU machine" in done.stderr
