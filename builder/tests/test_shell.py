"""``builder shell``: one built variant's environment for a shell or a command — its
torch env on PATH, LOCAL_KERNELS at the build, the headers it compiles against."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from kernelhub_builder.cli import main
from kernelhub_builder.compile.render import GENERATED_DIR
from kernelhub_builder.errors import UsageError
from kernelhub_builder.layout import work_dir
from kernelhub_builder.manifest import load_kernel, load_project
from kernelhub_builder.plan.matrix import plan_variants
from kernelhub_builder.shell import choose_variant, shell_for

pytestmark = pytest.mark.slow

FIXTURE = Path(__file__).parent / "fixtures" / "project"

PROBE = ('python -c "import os, sys, kernels, torch; '
         "m = kernels.get_kernel('kernelhub-tests/relu-py'); "
         "print('relu', m.relu(torch.tensor([-1.0, 2.0])).tolist()); "
         "print('python', sys.executable)\"; exit 7")


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    shutil.copytree(FIXTURE, root, ignore=shutil.ignore_patterns("__pycache__"))
    build_toml = root / "kernels-src" / "relu_py" / "build.toml"
    build_toml.write_text(build_toml.read_text() + '\n[general.hub]\nrepo-id = "kernelhub-tests/relu-py"\n')
    return root


def test_shell_runs_a_command_against_the_build(project: Path,
                                                capfd: pytest.CaptureFixture[str]) -> None:
    status = main(["--project", str(project), "shell", "relu_py", "-c", PROBE])
    out, err = capfd.readouterr()
    assert status == 7, err  # the command's own exit status
    assert "relu [0.0, 2.0]" in out
    python = next(line.split(" ", 1)[1] for line in out.splitlines() if line.startswith("python "))
    assert "kernelhub-builder/envs/torch-" in python  # the variant's torch env, not ours
    assert "LOCAL_KERNELS kernelhub-tests/relu-py → this variant" in err
    assert (project / "build" / "relu_py" / "torch-cpu" / "metadata.json").is_file()


def test_include_paths_are_what_the_build_compiles_with(project: Path) -> None:
    loaded = load_project(project)
    kernel = load_kernel(loaded.kernel_dir("scale"), loaded)
    plan = choose_variant(kernel, plan_variants(loaded, kernel))
    out = project / "build"
    variant = out / "scale" / plan.name
    variant.mkdir(parents=True)
    (variant / "metadata.json").write_text("{}")  # shell_for only asks whether it is built
    generated = work_dir(out, kernel, plan.variant) / GENERATED_DIR
    generated.mkdir(parents=True)
    shell = shell_for(loaded, kernel, plan.variant, out, base={"PATH": "/usr/bin"})
    cpath = shell.env["CPATH"].split(":")
    assert cpath[:2] == [str(generated), str(kernel.root / "scale_cpu")]
    assert any(p.endswith("site-packages/torch/include") for p in cpath)
    assert shell.env["PATH"].split(":")[0] == str(shell.torch_env.python.parent)
    assert shell.env["PYTHONDONTWRITEBYTECODE"] == "1"


def test_an_unbuilt_variant_says_how_to_build_it(project: Path) -> None:
    loaded = load_project(project)
    kernel = load_kernel(loaded.kernel_dir("scale"), loaded)
    plan = choose_variant(kernel, plan_variants(loaded, kernel))
    with pytest.raises(UsageError, match=f"run builder build scale --variant {plan.name}"):
        shell_for(loaded, kernel, plan.variant, project / "build")
