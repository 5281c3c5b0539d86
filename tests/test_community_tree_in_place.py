"""A kernel author's own repository, shaped like the ecosystem's community trees, builds
and tests in place: one build.toml at its root and no kernels.toml, a part whose name
starts with ``_``, backends listed without a part of their own, an optional import
inside a ``try`` and one inside a function, and tests that load the build the
ecosystem's way (``from kernels import get_kernel`` with ``LOCAL_KERNELS``). The build
lands where the ecosystem puts it, ``build/<variant>``, and the ecosystem's own loaders
(0.17.2 and 0.19.1) load it with ``get_local_kernel(<repo>)``.

The fixture (tests/fixtures/community-scale) was written for these tests in that shape.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
from e2e import BIN, REPO, Workspace, run
from reference_loader import ReferenceLoaderUnavailable, install_reference_loader

FIXTURE = REPO / "tests/fixtures/community-scale"
VARIANT = "torch-stable-abi213-cpu-x86_64-linux"
ECOSYSTEM_LOAD = """
import json, sys, torch
from importlib.metadata import version
from pathlib import Path
from kernels import get_local_kernel
m = get_local_kernel(Path(sys.argv[1]))
print(json.dumps({"kernels": version("kernels"), "file": m.__file__}))
"""


@pytest.fixture
def author_repo(tmp_path: Path) -> Path:
    repo = tmp_path / "scale"
    shutil.copytree(FIXTURE, repo)
    return repo


@pytest.mark.slow
def test_builds_and_tests_in_place(author_repo: Path, workspace: Workspace):
    env = workspace.env()
    builder = str(BIN / "builder")
    plan = run([builder, "list-variants", "--json"], env=env, cwd=author_repo).stdout
    planned = {v["variant"]: v["backend"] for v in json.loads(plan)["scale"]}
    assert VARIANT in planned
    assert {"cuda", "metal"} <= set(planned.values())  # listed without a part of their own

    run([builder, "build", "--variant", VARIANT], env=env, cwd=author_repo)
    variant = author_repo / "build" / VARIANT  # the ecosystem's layout
    metadata = json.loads((variant / "metadata.json").read_text())
    assert metadata["name"] == "scale" and metadata["python-depends"] == []

    tested = run([builder, "test"], env=env, cwd=author_repo)
    assert "PASS" in tested.stdout and "FAIL" not in tested.stdout

    for version in ("0.17.2", "0.19.1"):
        try:
            reference = install_reference_loader(workspace.root / f"kernels-{version}", version)
        except ReferenceLoaderUnavailable as e:
            pytest.skip(str(e))
        loaded = run([sys.executable, "-c", ECOSYSTEM_LOAD, str(author_repo)],
                     env={**env, "PYTHONPATH": str(reference)})
        said = json.loads(loaded.stdout.strip().splitlines()[-1])
        assert said == {"kernels": version, "file": str(variant / "__init__.py")}
