"""Settings come from the environment and config file at call time."""

from __future__ import annotations

from pathlib import Path

import pytest
from kernelhub import settings
from kernelhub.errors import KernelHubError


def test_cache_dir_follows_the_environment_at_call_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KERNELHUB_CACHE", str(tmp_path / "a"))
    assert settings.cache_dir() == tmp_path / "a"
    monkeypatch.setenv("KERNELHUB_CACHE", str(tmp_path / "b"))
    assert settings.cache_dir() == tmp_path / "b"
    monkeypatch.delenv("KERNELHUB_CACHE")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert settings.cache_dir() == tmp_path / ".cache" / "kernelhub"


@pytest.mark.parametrize("var", ["KERNELHUB_OFFLINE", "HF_HUB_OFFLINE"])
@pytest.mark.parametrize(("value", "expected"), [("1", True), ("yes", True), ("TRUE", True),
                                                 ("0", False), ("", False)])
def test_offline_flags(monkeypatch: pytest.MonkeyPatch, var: str, value: str, expected: bool) -> None:
    monkeypatch.setenv(var, value)
    assert settings.offline() is expected


def test_trusted_orgs_merge_env_and_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "config.toml").write_text('[trust]\norgs = ["from-config"]\n')
    monkeypatch.setenv("KERNELHUB_TRUSTED_ORGS", " a-org, b-org ,,")
    assert settings.trusted_orgs() == {"a-org", "b-org", "from-config"}


def test_bad_config_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text("[trust]\norgs = 'not-a-list'\n")
    with pytest.raises(KernelHubError, match=r"\[trust\] orgs must be a list"):
        settings.trusted_orgs()
    (tmp_path / "config.toml").write_text("[trust\n")
    with pytest.raises(KernelHubError, match="invalid TOML"):
        settings.trusted_orgs()


def test_use_hub_kernels_off_warns_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(settings, "_warned_disabled", False)
    assert settings.hub_kernels_enabled() is True
    monkeypatch.setenv("USE_HUB_KERNELS", "1")
    assert settings.hub_kernels_enabled() is True
    for value in ("0", "OFF", "no", "false"):
        monkeypatch.setenv("USE_HUB_KERNELS", value)
        if value == "0":
            with pytest.warns(UserWarning, match="hub kernels are disabled"):
                assert settings.hub_kernels_enabled() is False
        else:
            assert settings.hub_kernels_enabled() is False  # no second warning
