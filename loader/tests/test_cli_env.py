"""``kernelhub env``: the effective hubs, cache, trust and offline state, each with the
setting it came from."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from kernelhub.cli import main


def test_env_shows_what_a_load_would_use(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    team = tmp_path / "team-hub"
    team.mkdir()
    (team / "kernelhub.toml").write_text('[trust]\norgs = ["team"]\n')
    monkeypatch.setenv("KERNELHUB_HUB", f"{team},hf")
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("KERNELHUB_TRUSTED_ORGS", "acme")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf-cache"))
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setenv("HF_TOKEN_PATH", str(tmp_path / "no-token"))

    assert main(["env"]) == 0
    out = capsys.readouterr().out
    assert f"1. {team}" in out and "2. http://127.0.0.1:9" in out and "KERNELHUB_HUB" in out
    assert "offline:          yes (HF_HUB_OFFLINE)" in out
    assert f"ecosystem cache:  {tmp_path / 'hf-cache'}" in out

    assert main(["env", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["hubs"] == [str(team), "http://127.0.0.1:9"]
    assert doc["trusted_orgs"] == ["acme", "kernels-community"]
    assert doc["hub_trusted_orgs"] == {str(team): ["team"]}
    assert doc["offline"] is True and doc["token"].startswith("none")
    assert doc["cache"] == str(tmp_path / "cache")
