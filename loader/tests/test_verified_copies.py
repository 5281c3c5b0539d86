"""A warm load reuses the verified copy an earlier process kept, and only while neither
the cache variant nor the copy changed (kernelhub.load.verified_copies).

Every tampering test changes a file after a load kept its copy, keeping its size and
putting its mtime back (what a careful attacker would do); the ctime still moves, so the
next load reads the variant in full and refuses it, or makes a fresh copy.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from kernelhub import api, settings
from kernelhub.errors import IntegrityError
from kernelhub.load import verified_copies
from kernelhub.load.verified_import import VerifiedVariant, snapshot_variant
from kernelhub.signing import verified_marks
from kh_doubles import DirHub, make_variant

REPO = "kernels-community/kept"


@pytest.fixture
def settled(monkeypatch: pytest.MonkeyPatch) -> None:
    """Files written by the test count as settled at once (the margin has its own test)."""
    monkeypatch.setattr(verified_copies, "SETTLED_NS", 0)


def _variant(tmp_path: Path, native: bool = True) -> Path:
    dest = tmp_path / "cached" / "torch-universal"
    files = {"helper.py": "VALUE = 1\n", **({"lib.so": "\x7fELF native\n"} if native else {})}
    make_variant(dest, init="from .helper import VALUE\n", files=files)
    return dest


def _rewrite_keeping_size_and_mtime(path: Path, data: bytes) -> None:
    before = path.stat()
    assert len(data) == before.st_size
    path.write_bytes(data)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))


def _kept(tmp_path: Path) -> tuple[Path, VerifiedVariant]:
    source = _variant(tmp_path)
    first = snapshot_variant(source, keep=True)
    assert first.kept, "a settled cache variant is kept for later loads"
    return source, first


def test_an_unchanged_variant_reuses_the_kept_copy(tmp_path: Path, settled: None) -> None:
    source, first = _kept(tmp_path)
    again = snapshot_variant(source, keep=True)
    assert again.copy == first.copy and again.kept
    assert again.python_sources == first.python_sources
    assert again.files == first.files and again.metadata == first.metadata
    assert first.copy.parent == verified_copies.root()
    again.discard()  # a kept copy stays for the loads its record serves
    assert (first.copy / "helper.py").read_bytes() == b"VALUE = 1\n"


@pytest.mark.parametrize("rel", ["helper.py", "lib.so"])
def test_a_cache_file_changed_after_a_kept_load_is_refused(tmp_path: Path, settled: None,
                                                           rel: str) -> None:
    source, _ = _kept(tmp_path)
    original = (source / rel).read_bytes()
    _rewrite_keeping_size_and_mtime(source / rel, original.replace(b"1", b"2").replace(b"n", b"m"))
    with pytest.raises(IntegrityError, match=rf"{rel.replace('.', '[.]')}: sha256 does not match"):
        snapshot_variant(source, keep=True)


def test_a_file_added_to_the_cache_after_a_kept_load_is_refused(tmp_path: Path,
                                                                settled: None) -> None:
    source, _ = _kept(tmp_path)
    (source / "extra.py").write_text("import os\n")
    with pytest.raises(IntegrityError, match=r"extra\.py"):
        snapshot_variant(source, keep=True)


def test_a_changed_kept_copy_is_not_used(tmp_path: Path, settled: None) -> None:
    source, first = _kept(tmp_path)
    _rewrite_keeping_size_and_mtime(first.copy / "helper.py", b"VALUE = 9\n")
    again = snapshot_variant(source, keep=True)
    assert again.copy != first.copy
    assert again.python_sources["helper.py"] == b"VALUE = 1\n"
    # ... and the fresh copy is what the record now names.
    assert snapshot_variant(source, keep=True).copy == again.copy


def test_a_record_this_users_loader_did_not_write_is_not_used(tmp_path: Path,
                                                              settled: None) -> None:
    source, first = _kept(tmp_path)
    records = settings.cache_dir() / verified_marks.MARKS_DIR / verified_copies.RECORDS
    (record,) = records.iterdir()
    raw = bytearray(record.read_bytes())
    raw[0] ^= 1  # the HMAC no longer matches: as if anyone but this user wrote it
    record.write_bytes(bytes(raw))
    assert snapshot_variant(source, keep=True).copy != first.copy


def test_a_just_written_variant_is_not_recorded(tmp_path: Path) -> None:
    """A file whose ctime is within the clock's tick of its hashing could be rewritten
    with the same times; such a variant is copied again by the next load."""
    source = _variant(tmp_path)
    first = snapshot_variant(source, keep=True)
    assert not first.kept
    first.discard()
    assert not first.copy.exists()


def test_local_builds_are_never_kept(tmp_path: Path, settled: None) -> None:
    variant = snapshot_variant(_variant(tmp_path))
    assert not variant.kept and verified_copies.root() not in variant.copy.parents
    variant.discard()
    assert not variant.copy.exists()


def test_a_root_others_can_write_is_not_used(tmp_path: Path, settled: None) -> None:
    where = verified_copies.root()
    assert where is not None
    where.chmod(0o777)
    try:
        assert verified_copies.root() is None
        assert not snapshot_variant(_variant(tmp_path), keep=True).kept
    finally:
        where.chmod(0o700)
    assert stat.S_IMODE(where.stat().st_mode) == 0o700


def test_tampering_after_a_warm_hub_load_is_caught(tmp_path: Path, dirhub: DirHub,
                                                   settled: None) -> None:
    commit = dirhub.add(REPO, "v1", {"torch-universal": _variant(tmp_path, native=False)})
    assert api.get_kernel(REPO, revision=commit, hub=dirhub).VALUE == 1
    path = api.locate_kernel(REPO, revision=commit, hub=dirhub)
    assert snapshot_variant(path, keep=True).kept, "the warm load kept its copy"
    _rewrite_keeping_size_and_mtime(path / "helper.py", b"VALUE = 2\n")
    from kernelhub.load import pipeline
    pipeline._memo.clear()  # a new process: nothing remembered in memory
    with pytest.raises(IntegrityError, match=r"helper\.py: sha256 does not match"):
        api.get_kernel(REPO, revision=commit, hub=dirhub)


def test_a_copy_no_record_can_describe_is_removed_at_exit(tmp_path: Path, settled: None,
                                                          monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    """A read-only cache keeps no record: the copy is then the process's own, not kept
    (else every process would leave one behind)."""
    monkeypatch.setattr(verified_marks, "remember_data", lambda *args: False)
    variant = snapshot_variant(_variant(tmp_path), keep=True)
    assert not variant.kept
    variant.discard()
    assert not variant.copy.exists()
