"""Where builds go: a single-kernel repository built in place gets the ecosystem's layout,
``build/<variant>``, which the ecosystem's own ``get_local_kernel(<repo>)`` reads (kernels
0.17.2 and 0.19.1, each installed outside our venv as tests/reference_loader.py does); a
project's kernels go to ``build/<kernel>/<variant>``.

The repository is pure Python (``[torch-noarch]``), so nothing compiles: the layout is
what is under test, and the compiled case is tests/test_community_tree_in_place.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from kernelhub import get_local_kernel
from kernelhub_builder import layout
from kernelhub_builder.cli import main
from kernelhub_builder.manifest import load_kernels, load_project
from reference_loader import ReferenceLoaderUnavailable, install_reference_loader

FIXTURE_PROJECT = Path(__file__).parent / "fixtures" / "project"
VARIANT = "torch-cpu"


def write_repo(root: Path) -> Path:
    """A kernel author's repository: build.toml at the root, the package in torch-ext/."""
    package = root / "torch-ext" / "double_it"
    package.mkdir(parents=True)
    (root / "build.toml").write_text(
        '[general]\nname = "double-it"\nversion = 1\nlicense = "Apache-2.0"\n'
        'backends = ["cpu"]\n\n[torch-noarch]\n')
    (package / "__init__.py").write_text(
        "import torch\n\n\ndef double(x: torch.Tensor) -> torch.Tensor:\n    return x * 2\n")
    return root


@pytest.fixture(scope="module")
def built_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    repo = write_repo(tmp_path_factory.mktemp("author") / "double-it")
    assert main(["--project", str(repo), "build", "--no-import-check"]) == 0
    return repo


def test_a_repository_built_in_place_has_build_variant(built_repo: Path) -> None:
    variant = built_repo / "build" / VARIANT
    assert json.loads((variant / "metadata.json").read_text())["name"] == "double-it"
    assert not (built_repo / "build" / "double-it").exists()
    project = load_project(built_repo)
    (kernel,) = load_kernels(project)
    assert layout.is_single_kernel(project, kernel)
    assert layout.built_variants(layout.default_out_dir(project), project, kernel)[0][1] == variant


def test_check_and_a_rebuild_find_the_in_place_build(built_repo: Path, capsys) -> None:
    assert main(["--project", str(built_repo), "check", "--no-import-check"]) == 0
    assert f"PASS  double-it  {VARIANT}" in capsys.readouterr().out
    assert main(["--project", str(built_repo), "build", "--no-import-check"]) == 0
    assert f"double-it  {VARIANT}" in (rebuilt := capsys.readouterr().out)
    assert "up to date" in rebuilt  # found where the first build put it
    assert sorted(p.name for p in (built_repo / "build").iterdir()
                  if (p / "metadata.json").is_file()) == [VARIANT]


def test_our_get_local_kernel_loads_the_repository(built_repo: Path) -> None:
    import torch

    module = get_local_kernel(built_repo)
    assert torch.equal(module.double(torch.arange(3)), torch.tensor([0, 2, 4]))


@pytest.mark.parametrize("version", ["0.17.2", "0.19.1"])
def test_the_ecosystems_get_local_kernel_loads_the_repository(
    built_repo: Path, version: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    try:
        reference = install_reference_loader(tmp_path_factory.mktemp(f"kernels-{version}"),
                                             version)
    except ReferenceLoaderUnavailable as e:
        pytest.skip(str(e))
    code = (
        "import json, sys, torch\n"
        "from importlib.metadata import version\n"
        "from pathlib import Path\n"
        "from kernels import get_local_kernel\n"
        "m = get_local_kernel(Path(sys.argv[1]))\n"
        "print(json.dumps({'kernels': version('kernels'), 'file': m.__file__,\n"
        "                  'out': m.double(torch.arange(3)).tolist()}))\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("LOCAL_KERNELS", "KERNELS_CACHE")}
    env["PYTHONPATH"] = str(reference)
    done = subprocess.run([sys.executable, "-c", code, str(built_repo)], env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    said = json.loads(done.stdout.strip().splitlines()[-1])
    assert said["kernels"] == version
    assert said["file"] == str(built_repo / "build" / VARIANT / "__init__.py")
    assert said["out"] == [0, 2, 4]


def test_a_projects_kernels_keep_build_kernel_variant(tmp_path: Path) -> None:
    project = load_project(FIXTURE_PROJECT)
    kernel = next(k for k in load_kernels(project) if k.name == "relu_py")
    assert not layout.is_single_kernel(project, kernel)
    out = layout.default_out_dir(project)
    assert out == FIXTURE_PROJECT.resolve() / "build"
    assert layout.kernel_dir(out, project, kernel) == out / "relu_py"


def test_the_builder_s_scratch_is_beside_the_builds_not_among_them(tmp_path: Path) -> None:
    """Issue 33: ``build/.work/<k>/<variant>`` sat where scanners of ``build/`` took it for
    a build. The work tree and the per-variant lock now live in ``build-scratch/``."""
    from kernelhub.formats.variants import parse_variant

    project = load_project(FIXTURE_PROJECT / "kernels.toml")
    kernel = load_kernels(project)[0]
    variant = parse_variant("torch213-cxx11-cpu-x86_64-linux")
    out = tmp_path / "build"
    work = layout.work_dir(out, kernel, variant)
    lock = layout.lock_file(out, kernel, variant)
    assert work == tmp_path / "build-scratch" / kernel.name / variant.name
    assert lock.parent == work.parent
    assert not work.is_relative_to(out) and not lock.is_relative_to(out)
