"""Only trusted organisations' code is loaded without an explicit opt-in."""

from __future__ import annotations

from pathlib import Path

import pytest
from kernelhub.errors import TrustError
from kernelhub.signing.trust import check_trusted
from kh_doubles import DirHub


def test_kernels_community_is_trusted_without_asking_the_hub(tmp_path: Path) -> None:
    hub = DirHub(tmp_path)
    check_trusted("kernels-community/activation", hub, trust_remote_code=False)
    assert hub.calls == []


def test_untrusted_org_is_refused_with_the_ways_out(tmp_path: Path) -> None:
    with pytest.raises(TrustError) as err:
        check_trusted("someone/kernel", DirHub(tmp_path), trust_remote_code=False)
    message = str(err.value)
    assert "runs its Python and native code" in message
    assert "trust_remote_code=True" in message
    assert "KERNELHUB_TRUSTED_ORGS" in message
    assert str(tmp_path / "config.toml") in message


def test_every_source_of_trust(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    hub = DirHub(tmp_path, trusted=frozenset({"hub-org"}))
    check_trusted("someone/kernel", hub, trust_remote_code=True)
    check_trusted("hub-org/kernel", hub, trust_remote_code=False)
    monkeypatch.setenv("KERNELHUB_TRUSTED_ORGS", "env-org")
    check_trusted("env-org/kernel", hub, trust_remote_code=False)
    (tmp_path / "config.toml").write_text('[trust]\norgs = ["cfg-org"]\n')
    check_trusted("cfg-org/kernel", hub, trust_remote_code=False)
    with pytest.raises(TrustError):
        check_trusted("other/kernel", hub, trust_remote_code=False)
