"""ci/gpu-check: the GPU machine's build-test-benchmark script.

It can only do its job on a GPU machine; here it must at least parse, and fail fast
with a clear reason where there is no NVIDIA driver.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[3] / "ci" / "gpu-check"


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


def _fake_tools(tmp_path: Path, python_says: str) -> dict[str, str]:
    """A PATH where nvidia-smi and nvcc answer as on a GPU machine, and a PYTHON that
    reports ``python_says`` for its torch: what the script decides before any build."""
    import os

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    tools = {
        "nvidia-smi": "#!/bin/sh\necho 'GPU 0: NVIDIA H200 (UUID: GPU-0)'\n",
        "nvcc": "#!/bin/sh\necho 'Cuda compilation tools, release 13.0, V13.0.88'\n",
        "python": f"#!/bin/sh\necho '{python_says}'\n",
    }
    for name, text in tools.items():
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}",
            "CUDA_HOME": str(tmp_path / "no-cuda"), "PYTHON": str(bin_dir / "python"),
            "GPU_CHECK_DIR": str(tmp_path / "work")}


@pytest.mark.parametrize(("python_says", "reason"), [
    ("2.14.0+cpu none 0", "torch 2.14.0+cpu is not a CUDA build"),
    ("2.14.0+cu130 13.0 0", "torch 2.14.0+cu130 (CUDA 13.0) sees no GPU"),
])
def test_gpu_check_refuses_a_torch_that_cannot_use_the_gpu(
    tmp_path: Path, python_says: str, reason: str
) -> None:
    done = subprocess.run([str(SCRIPT)], capture_output=True, text=True, timeout=60,
                          env=_fake_tools(tmp_path, python_says), check=False)
    assert done.returncode == 2, done.stdout + done.stderr
    assert reason in done.stderr
    assert not (tmp_path / "work").exists()  # refused before anything was written



def test_gpu_check_refuses_a_prebuilt_dir_that_is_not_there(tmp_path: Path) -> None:
    done = subprocess.run([str(SCRIPT), "--prebuilt", str(tmp_path / "nothing")],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2
    assert "--prebuilt" in done.stderr and "no such directory" in done.stderr


SCRATCH = SCRIPT.parent / "scratch-project"


def _python_env() -> dict[str, str]:
    """The scripts' Python: this test's, which has the builder."""
    import os
    import sys

    return {**os.environ, "PYTHON": sys.executable}


def test_scratch_project_makes_an_out_of_matrix_torch_the_whole_matrix(tmp_path: Path) -> None:
    """The lent H100's torch 2.11: a scratch project whose matrix, pin and gpu-torch are
    2.11, with CUDA narrowed to sm_90 and the stable-ABI kernels retargeted; the builder
    reads it as any project and plans torch 2.11 variants from it."""

    from kernelhub_builder.manifest import load_project
    from kernelhub_builder.manifest.build_toml import load_kernel

    out = tmp_path / "project"
    done = subprocess.run([str(SCRATCH), str(out), "--torch", "2.11",
                           "--pin", "torch==2.11.0", "--cuda-capabilities", "9.0",
                           "--stable-abi", "2.11"], env=_python_env(),
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    project = load_project(out)
    assert project.matrix.torch == ("2.11",)
    assert project.torch_pins["2.11"] == "torch==2.11.0" and project.gpu_torch == "2.11"
    assert project.kernels == load_project(SCRIPT.parents[1]).kernels
    activation = load_kernel(project.kernel_dir("activation"), project)
    parts = {part.name: part for part in activation.parts}
    assert parts["activation_cuda"].cuda_capabilities == ("9.0",)
    rmsnorm = load_kernel(project.kernel_dir("rmsnorm"), project)
    assert rmsnorm.torch.stable_abi == "2.11"
    # The real project is untouched: its matrix still starts at 2.13.
    assert load_project(SCRIPT.parents[1]).matrix.torch[0] == "2.13"


def test_scratch_project_refuses_a_torch_that_is_not_major_minor(tmp_path: Path) -> None:

    done = subprocess.run([str(SCRATCH), str(tmp_path / "p"), "--torch",
                           "2.11.0", "--pin", "torch==2.11.0"], env=_python_env(),
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2 and "not <major>.<minor>" in done.stderr
    assert not (tmp_path / "p").exists()


def test_gpu_check_checks_a_torch_outside_the_matrix_on_a_scratch_project(tmp_path: Path) -> None:
    """The lent H100's case: torch 2.11, which the matrix (2.13-2.15) does not hold. The
    script must not stop at "no CUDA variant for torch 2.11": it writes a scratch project
    whose matrix is 2.11, narrowed to the GPU's capability, and goes on to adopt the
    machine's python. Here the python only claims torch 2.11 with a GPU (its real torch is
    this venv's), so the builder's adoption refuses it, saying which torch it found."""
    import sys

    env = _fake_tools(tmp_path, "")
    bin_dir = tmp_path / "bin"
    (bin_dir / "nvidia-smi").write_text(
        "#!/bin/sh\ncase \"$*\" in\n"
        "  *compute_cap,driver*) echo 'NVIDIA H100 80GB HBM3, 9.0, 580.0';;\n"
        "  *compute_cap*) echo '9.0';;\n"
        "  *) echo 'GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-0)';;\nesac\n")
    # The probe of torch and GPU answers as the H100 would; everything else is real Python.
    (bin_dir / "python").write_text(
        "#!/bin/sh\ncase \"$*\" in\n"
        "  *is_available*) echo '2.11.0+cu130 13.0 1';;\n"
        f"  *) exec {sys.executable} \"$@\";;\nesac\n")
    done = subprocess.run([str(SCRIPT), "activation"], capture_output=True, text=True,
                          timeout=300, env=env, check=False)
    out = done.stdout + done.stderr
    assert "no CUDA variant" not in out
    assert ("torch 2.11.0+cu130 is outside the matrix: checking a scratch project "
            "(matrix torch 2.11, sm 9.0, stable ABI 2.11)") in done.stdout, out
    scratch = (tmp_path / "work" / "project" / "kernels.toml").read_text()
    assert 'torch = ["2.11"]' in scratch and '"2.11" = "torch==2.11.0"' in scratch
    assert done.returncode == 2
    assert "the builder cannot adopt" in done.stderr, out
