"""A local kernel path loads exactly what was named, never a build found in a parent.

Walking up to ``<parent>/build/<name>/`` used to load whatever another user left in a
world-writable directory such as /tmp. Now the places looked at are fixed by the path
itself, and the error lists each of them.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from kernelhub import api
from kernelhub.errors import KernelHubError
from kh_doubles import make_variant


def _source_dir(path: Path, name: str = "kern") -> Path:
    path.mkdir(parents=True)
    (path / "build.toml").write_text(f'[general]\nname = "{name}"\n')
    return path


@pytest.mark.parametrize("depth", [1, 3])
def test_a_build_in_a_parent_directory_is_never_loaded(tmp_path: Path, depth: int) -> None:
    # Someone else's build/<kernel>/ higher up the tree (e.g. /tmp/build/kern).
    planted = tmp_path / "build" / "kern" / "torch-universal"
    make_variant(planted, name="kern", init="raise SystemExit('planted build ran')\n")
    source = _source_dir(tmp_path.joinpath(*["d"] * depth) / "kern")
    with pytest.raises(KernelHubError) as err:
        api.find_local_variant(source)
    message = str(err.value)
    assert str(planted.parent) not in message
    assert str(source) in message and str(source / "build") in message
    with pytest.raises(KernelHubError):
        api.get_local_kernel(source)


def test_the_error_lists_every_place_looked_at(tmp_path: Path) -> None:
    source = _source_dir(tmp_path / "kern")
    with pytest.raises(KernelHubError) as err:
        api.find_local_variant(source)
    message = str(err.value)
    for place in (source, source / "build", source / "build" / "kern"):
        assert str(place) in message
    assert "parent" not in message
    assert "\n" not in message


def test_the_builders_project_layout_still_works(tmp_path: Path) -> None:
    # <project>/kernels-src/<dir>/ with builds in <project>/build/<name>/: the project is
    # recognised by its kernels.toml, one level above kernels-src, and nowhere else.
    project = tmp_path / "project"
    source = _source_dir(project / "kernels-src" / "kern-dir")
    (project / "kernels.toml").write_text('kernels = ["kern"]\n')
    variant = project / "build" / "kern" / "torch-universal"
    make_variant(variant, name="kern", init="LABEL = 'project'\n")
    assert api.find_local_variant(source) == variant


def test_kernels_src_without_a_project_file_is_not_a_project(tmp_path: Path) -> None:
    source = _source_dir(tmp_path / "kernels-src" / "kern")
    make_variant(tmp_path / "build" / "kern" / "torch-universal", name="kern")
    with pytest.raises(KernelHubError, match="looked in"):
        api.find_local_variant(source)
