"""metadata.json as the builder writes it reads under the ecosystem's loaders.

kernels 0.17 and 0.19 parse metadata.json strictly: ``license`` must be a string and a
``provenance.kernel`` part must name a full commit id. A kernel without a license (the
schema before editions allows that) and a dirty Nix build without a revision were written
as ``null`` and ``{"dirty": true}``, which both refused. The variants here are staged by the
builder's own assemble step and stamped by the Nix build's stamp step (a pure-Python
kernel: nothing is compiled), then parsed by the real 0.17.2 and 0.19.1 loaders.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from kernelhub.formats.metadata import NO_LICENSE, read_metadata
from kernelhub.formats.provenance import NULL_COMMIT, dirty_sources
from kernelhub.formats.variants import parse_variant
from kernelhub_builder.compile.assemble import Artifacts, install_staged, stage_variant
from kernelhub_builder.compile.nix_build import stamp
from kernelhub_builder.manifest import load_kernel
from reference_loader import (
    ECOSYSTEM_VERSIONS,
    ReferenceLoaderUnavailable,
    install_reference_loader,
)

FIXTURE = Path(__file__).parents[1] / "fixtures" / "project" / "kernels-src" / "relu_py"

PARSE = r"""
import json, sys
from kernels._rust import Metadata
out = {}
for path in sys.argv[1:]:
    m = Metadata.read_from_file(path)
    kernel = m.provenance.kernel
    out[path] = {"license": m.license,
                 "kernel": None if kernel is None else [str(kernel.commit), kernel.dirty],
                 "dirty": m.provenance.dirty}
print(json.dumps(out))
"""


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(cwd), "-c", "user.name=t", "-c", "user.email=t@t",
                    *args], check=True, capture_output=True)


def _stage(root: Path, out: Path) -> Path:
    kernel = load_kernel(root)
    dest = out / kernel.name / "torch-cpu"
    staging, _ = stage_variant(kernel, parse_variant("torch-cpu"), "_relu_py_test",
                               Artifacts(ops_py_text="ops = None\n"), dest, None)
    install_staged(staging, dest)
    return dest


@pytest.mark.parametrize("version", ECOSYSTEM_VERSIONS)
def test_what_the_builder_writes_parses_under_the_ecosystems_loaders(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, version: str
) -> None:
    try:
        ecosystem = install_reference_loader(tmp_path_factory.mktemp(f"kernels-{version}"),
                                             version)
    except ReferenceLoaderUnavailable as e:
        pytest.skip(str(e))

    # A kernel that declares no license (the schema before editions), outside git
    root = tmp_path / "src" / "relu_py"
    shutil.copytree(FIXTURE, root)
    toml = root / "build.toml"
    # (named as the ecosystem's loaders require: no '_')
    toml.write_text(toml.read_text().replace('license = "Apache-2.0"\n', "")
                    .replace('name = "relu_py"', 'name = "relu-py"'))
    outside = _stage(root, tmp_path / "outside")
    meta = read_metadata(outside)
    assert meta.license == NO_LICENSE
    assert "kernel" not in meta.provenance  # no commit to name, nothing dirty to say

    # The same in git with an uncommitted change: the commit, marked dirty.
    _git(root, "init", "-q")
    _git(root, "add", ".")
    _git(root, "commit", "-qm", "relu_py")
    toml.write_text(toml.read_text() + "# changed\n")
    in_git = _stage(root, tmp_path / "in-git")
    kernel_part = read_metadata(in_git).provenance["kernel"]
    assert isinstance(kernel_part, dict) and kernel_part["dirty"] is True
    assert len(str(kernel_part["commit"])) == 40 and kernel_part["commit"] != NULL_COMMIT

    # The Nix stamp of a dirty flake without a revision (Nix 2.8), and of a clean commit.
    dirty_nix = tmp_path / "nix-dirty"
    stamp(outside, dirty_nix, None, True)
    assert read_metadata(dirty_nix).provenance["kernel"] == {"commit": NULL_COMMIT, "dirty": True}
    assert dirty_sources(read_metadata(dirty_nix).provenance) == ["kernel source"]
    clean_nix = tmp_path / "nix-clean"
    stamp(outside, clean_nix, "ab" * 20, False)

    paths = [str(d / "metadata.json") for d in (outside, in_git, dirty_nix, clean_nix)]
    env = {**os.environ, "PYTHONPATH": str(ecosystem)}
    proc = subprocess.run([sys.executable, "-c", PARSE, *paths], env=env, capture_output=True,
                          text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    read = json.loads(proc.stdout)
    assert {v["license"] for v in read.values()} == {NO_LICENSE}
    assert read[paths[0]] == {"license": NO_LICENSE, "kernel": None, "dirty": False}
    assert read[paths[1]]["kernel"][1] is True and read[paths[1]]["dirty"] is True
    assert read[paths[2]]["kernel"] == [NULL_COMMIT, True] and read[paths[2]]["dirty"] is True
    assert read[paths[3]]["kernel"] == ["ab" * 20, False] and read[paths[3]]["dirty"] is False
