"""Formats of the ecosystem's 0.19 metadata: the ZIP build layout (verified archive bytes
unpacked, hostile archives refused, reproducible writing), kernels-minver and the
dirty-tree warning."""

from __future__ import annotations

import io
import stat
import warnings
import zipfile
from pathlib import Path

import pytest
from kernelhub.errors import IntegrityError, MetadataError
from kernelhub.formats.minver import KernelsVersionError, check_kernels_minver
from kernelhub.formats.provenance import dirty_sources, warn_if_dirty
from kernelhub.formats.zip_layout import build_layout, extract_verified

REG = stat.S_IFREG | 0o644


def test_build_layout_values() -> None:
    assert build_layout(None, "m") == "files"
    assert build_layout("zip", "m") == "zip"
    with pytest.raises(MetadataError, match="must be one of files, zip, got 'ZIP'"):
        build_layout("ZIP", "m")


def test_an_archive_unpacks_into_the_private_copy(tmp_path: Path) -> None:
    files = {"__init__.py": b"from . import layers\n", "layers/__init__.py": b"X = 1\n"}
    archive = _zip([(name, data, REG) for name, data in files.items()])
    out = tmp_path / "out"
    members = extract_verified(archive, out, {"metadata.json", "_x.abi3.so"}, "a.zip")
    assert members == files
    assert (out / "layers" / "__init__.py").read_text() == "X = 1\n"


def _zip(entries: list[tuple[str, bytes, int]]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, data, mode in entries:
            info = zipfile.ZipInfo(name)
            info.external_attr = mode << 16
            zf.writestr(info, data)
    return buf.getvalue()


@pytest.mark.parametrize(("entries", "why"), [
    ([("../evil.py", b"x", REG)], "leaves the package"),
    ([("/abs.py", b"x", REG)], "leaves the package"),
    ([("link.py", b"target", stat.S_IFLNK | 0o777)], "is a symbolic link"),
    ([("__pycache__/m.cpython-311.pyc", b"x", REG)], "is bytecode"),
    ([("m.pyc", b"x", REG)], "is bytecode"),
    ([("metadata.json", b"{}", REG)], "shadows the variant's file"),
])
def test_hostile_archives_are_refused(tmp_path: Path, entries: list[tuple[str, bytes, int]],
                                      why: str) -> None:
    with pytest.raises(IntegrityError, match=why):
        extract_verified(_zip(entries), tmp_path, {"metadata.json"}, "x.zip")
    assert not any(tmp_path.iterdir())  # nothing written before the whole archive passed


def test_duplicates_and_garbage(tmp_path: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zipfile warns about the duplicate name itself
        dup = _zip([("a.py", b"1", REG), ("a.py", b"2", REG)])
    with pytest.raises(IntegrityError, match="appears twice"):
        extract_verified(dup, tmp_path, set(), "x.zip")
    with pytest.raises(IntegrityError, match="not a ZIP archive"):
        extract_verified(b"not a zip", tmp_path, set(), "x.zip")


def test_kernels_minver() -> None:
    check_kernels_minver(None, "v")
    check_kernels_minver("0.17.0", "v")
    check_kernels_minver("0.19.1", "v")
    with pytest.raises(KernelsVersionError, match=r"v needs kernels>=0.20.0, a format newer "
                                                  r"than this kernelhub reads \(up to kernels "
                                                  r"0.19.1\); upgrade kernelhub"):
        check_kernels_minver("0.20.0", "v")
    for bad in ("0.19", "x.y.z", 19, "0.19.0.1"):
        with pytest.raises(MetadataError, match=r"must be a version X\.Y\.Z"):
            check_kernels_minver(bad, "v")


def test_dirty_builds_warn_once() -> None:
    clean = {"kernel": {"commit": "a" * 40, "dirty": False}, "kernel-builder": {"version": "1"}}
    dirty = {"kernel": {"commit": "a" * 40, "dirty": True},
             "kernel-builder": {"version": "1", "commit": "b" * 40, "dirty": True}}
    assert dirty_sources(clean) == [] and dirty_sources({}) == []
    assert dirty_sources(dirty) == ["kernel source", "kernel-builder"]
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        assert warn_if_dirty(dirty, "act", "torch-cpu") is True
        assert warn_if_dirty(dirty, "act", "torch-cpu") is True
        assert warn_if_dirty(clean, "act", "torch-cuda") is False
    assert len(seen) == 1
    assert "built from a dirty git tree (kernel source and kernel-builder had uncommitted" \
        in str(seen[0].message)

