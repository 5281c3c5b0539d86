"""The build layout (kernelhub.formats.build_layout): one definition of where builds live, which the
builder writes and get_local_kernel reads.

A single-kernel repository built in place keeps its variants in ``build/<variant>`` (a
hub repository's layout, which the ecosystem's loaders read); a project keeps them in
``build/<kernel>/<variant>``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from kernelhub import api
from kernelhub.formats import build_layout
from kernelhub.hub.base import BUILD_DIR
from kh_doubles import make_variant


def _repo(path: Path, toml: str = '[general]\nname = "kern"\n') -> Path:
    path.mkdir(parents=True)
    (path / "build.toml").write_text(toml)
    return path


def test_a_single_kernel_repository_keeps_variants_in_build(tmp_path: Path) -> None:
    assert build_layout.kernel_builds_dir(tmp_path / "build", "kern", single_kernel=True) \
        == tmp_path / "build"
    assert build_layout.kernel_builds_dir(tmp_path / "build", "kern", single_kernel=False) \
        == tmp_path / "build" / "kern"
    assert build_layout.default_build_dir(tmp_path) == tmp_path / BUILD_DIR == tmp_path / "build"


def test_get_local_kernel_loads_a_repository_built_in_place(tmp_path: Path) -> None:
    repo = _repo(tmp_path / "kern-repo")
    variant = repo / "build" / "torch-universal"
    make_variant(variant, name="kern", init="WHERE = 'build/<variant>'\n")
    assert api.find_local_variant(repo) == variant
    assert api.get_local_kernel(repo).WHERE == "build/<variant>"


def test_older_in_place_builds_in_build_kernel_still_load(tmp_path: Path) -> None:
    repo = _repo(tmp_path / "kern-repo")
    variant = repo / "build" / "kern" / "torch-universal"
    make_variant(variant, name="kern")
    assert api.find_local_variant(repo) == variant


def test_the_places_tried_and_their_order(tmp_path: Path) -> None:
    project = tmp_path / "project"
    source = _repo(project / "kernels-src" / "kern-dir")
    assert build_layout.local_build_dirs(source) == [
        source, source / "build", source / "build" / "kern"]
    (project / "kernels.toml").write_text('kernels = ["kern-dir"]\n')
    assert build_layout.local_build_dirs(source)[-1] == project / "build" / "kern"


@pytest.mark.parametrize("toml", [
    "",  # no [general]
    "general = 5\n",  # not a table
    '[general]\nname = ""\n',
    '[general]\nname = 7\n',
    "[general\nname = 'broken'\n",  # not TOML
    "a = " + "[" * 5000 + "]" * 5000 + "\n",  # nested past the parser's recursion limit
])
def test_a_kernel_without_a_usable_name_is_named_after_its_directory(tmp_path: Path,
                                                                      toml: str) -> None:
    assert build_layout.kernel_name(_repo(tmp_path / "dir-name", toml)) == "dir-name"


def test_a_kernel_is_named_by_its_build_toml(tmp_path: Path) -> None:
    assert build_layout.kernel_name(_repo(tmp_path / "dir-name")) == "kern"
    assert build_layout.kernel_name(tmp_path / "no-build-toml") == "no-build-toml"


def test_only_dirs_holding_metadata_are_variants(tmp_path: Path) -> None:
    builds = tmp_path / "build"
    make_variant(builds / "torch-universal", name="kern")
    (builds / ".work" / "kern").mkdir(parents=True)
    (builds / ".staging-torch-cpu-x1").mkdir()
    (builds / "README").write_text("not a variant\n")
    assert build_layout.variant_dirs(builds) == ["torch-universal"]
    assert build_layout.variant_dirs(tmp_path / "missing") == []
