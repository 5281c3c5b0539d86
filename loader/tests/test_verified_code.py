"""Code compiled from verified sources is remembered under this user's HMAC, and nothing
else found in the cache is ever run as code."""

from __future__ import annotations

import hashlib
import marshal
from pathlib import Path

import pytest
from kernelhub.load import verified_import
from kernelhub.load.verified_import import _BYTECODE_FORMAT, CODE_RECORDS, compiled
from kernelhub.signing import verified_marks

SOURCE = b"def answer():\n    return 42\n\nclass Box:\n    def size(self):\n        return 3\n"
OTHER = b"RAN = 'other source'\n"


@pytest.fixture
def user(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A user with their own config dir (the HMAC secret lives there) and cache."""
    monkeypatch.setenv("KERNELHUB_CONFIG", str(tmp_path / "config" / "config.toml"))
    monkeypatch.setenv("KERNELHUB_CACHE", str(tmp_path / "cache"))
    return tmp_path


def record_of(source: bytes) -> Path:
    key = hashlib.sha256(_BYTECODE_FORMAT + source).digest()
    return verified_marks._data_path(CODE_RECORDS, key)


def run(code) -> dict[str, object]:
    namespace: dict[str, object] = {}
    exec(code, namespace)
    return namespace


def no_compiling(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("compiled again")
    monkeypatch.setattr(verified_import, "compile", refuse, raising=False)


def test_the_second_load_reads_the_code_under_its_own_path(user, monkeypatch) -> None:
    first = run(compiled(SOURCE, "/first/copy/mod.py"))
    assert record_of(SOURCE).is_file()
    no_compiling(monkeypatch)
    again = run(compiled(SOURCE, "/second/copy/mod.py"))
    assert again["answer"]() == 42 == first["answer"]()
    assert again["answer"].__code__.co_filename == "/second/copy/mod.py"
    assert again["Box"]().size.__code__.co_filename == "/second/copy/mod.py"


def test_a_kept_copy_takes_its_code_as_recorded_under_its_path(user, monkeypatch) -> None:
    """A kept copy's module is remembered under its path too: later loads from that path
    take the code as it is (no code object renamed); other paths still get their own."""
    compiled(SOURCE, "/first/copy/mod.py")  # remembered under the source alone
    no_compiling(monkeypatch)
    renamed: list[str] = []
    rename = verified_import._at

    def counted(code, path: str):
        renamed.append(path)
        return rename(code, path)

    monkeypatch.setattr(verified_import, "_at", counted)
    kept = "/kept/copy/mod.py"
    first = run(compiled(SOURCE, kept, kept=True))  # renamed once, then remembered at kept
    assert renamed and set(renamed) == {kept}
    renamed.clear()
    again = run(compiled(SOURCE, kept, kept=True))
    assert not renamed
    assert again["answer"]() == 42 == first["answer"]()
    assert again["Box"]().size.__code__.co_filename == kept
    elsewhere = run(compiled(SOURCE, "/other/copy/mod.py", kept=True))
    assert elsewhere["answer"].__code__.co_filename == "/other/copy/mod.py" and renamed
    renamed.clear()
    run(compiled(SOURCE, "/not/kept/mod.py"))  # not kept: renamed from the source's record
    assert set(renamed) == {"/not/kept/mod.py"}


def test_a_record_not_made_by_this_user_never_runs(user) -> None:
    """Bytecode planted in the cache (any tag, or a genuine record of other bytes moved
    under this source's key) is not run: the verified source is compiled instead."""
    compiled(OTHER, "/x/other.py")  # a genuine record, for other bytes
    planted = record_of(SOURCE)
    planted.parent.mkdir(parents=True, exist_ok=True)
    forged = marshal.dumps(compile("RAN = 'forged'\n", "/x/forged.py", "exec"))
    for record in (b"\0" * 32 + forged, record_of(OTHER).read_bytes()):
        planted.write_bytes(record)
        namespace = run(compiled(SOURCE, "/y/mod.py"))
        assert "RAN" not in namespace and namespace["answer"]() == 42


def test_a_secret_others_can_read_authenticates_nothing(user) -> None:
    compiled(SOURCE, "/a/mod.py")
    secret = user / "config" / verified_marks.SECRET_FILE
    secret.chmod(0o644)
    assert verified_marks.recall_data(CODE_RECORDS, b"any key") is None
    key = hashlib.sha256(_BYTECODE_FORMAT + SOURCE).digest()
    assert verified_marks.recall_data(CODE_RECORDS, key) is None
    assert run(compiled(SOURCE, "/b/mod.py"))["answer"]() == 42


def test_records_carry_the_rfc_2104_hmac_sha256_hmac_computes(user) -> None:
    """verified_marks takes hmac's OpenSSL functions without importing hmac (a warm load's
    cost): the tags are hmac's own, so records written either way authenticate."""
    import hmac

    key = hashlib.sha256(b"content").digest()
    data = b"recorded bytes\0\xff"
    assert verified_marks.remember_data(CODE_RECORDS, key, data)
    secret = verified_marks._secret()
    assert secret is not None
    raw = verified_marks._data_path(CODE_RECORDS, key).read_bytes()
    assert raw == hmac.new(secret, key + data, hashlib.sha256).digest() + data
    assert verified_marks.recall_data(CODE_RECORDS, key) == data
    verified_marks.remember(key, "SHA256:fingerprint")
    mark = verified_marks._mark_path(key).read_text().split("\n")
    assert mark[:2] == ["SHA256:fingerprint", hmac.new(
        secret, key + b"SHA256:fingerprint", hashlib.sha256).hexdigest()]
    assert verified_marks.recall(key) == "SHA256:fingerprint"
    flipped = bytes([raw[0] ^ 1]) + raw[1:]
    verified_marks._data_path(CODE_RECORDS, key).write_bytes(flipped)
    assert verified_marks.recall_data(CODE_RECORDS, key) is None
