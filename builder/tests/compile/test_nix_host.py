"""Where the Nix host toolchain is recorded, and what a CI job asks set-up to make (no Nix
needed; the builds that read it are in tests/test_nix_flake.py)."""

from __future__ import annotations

import os
import pwd
from pathlib import Path

import pytest
from kernelhub_builder.compile import nix_host
from kernelhub_builder.compile.nix_build import main
from kernelhub_builder.errors import NixBuildError

REPO = Path(__file__).resolve().parents[3]


def test_the_env_file_goes_under_the_user_databases_home_whatever_home_is(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    expected = Path(pwd.getpwuid(os.getuid()).pw_dir) / ".config" / "kernelhub" / "nix-host.env"
    assert nix_host.host_env_file() == expected


def test_a_user_without_a_database_entry_is_told_how(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(nix_host, "database_home", lambda uid=None: None)
    monkeypatch.setattr(os, "getuid", lambda: 4242)
    with pytest.raises(NixBuildError, match=r"uid 4242 has no entry .* --env-file "
                                            r"/etc/kernelhub/nix-host.env"):
        nix_host.host_env_file()
    monkeypatch.setattr(os, "getuid", lambda: 0)
    assert nix_host.host_env_file() == nix_host.SYSTEM_ENV_FILE


def test_host_setup_refuses_a_torch_outside_the_matrix_in_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A CI job makes only the torch env it needs (--torch); a minor the matrix does not
    have is an error before anything is made."""
    monkeypatch.setattr(nix_host, "ensure_host_python", lambda *a: tmp_path / "python")
    code = main(["host-setup", "--project-file", str(REPO / "kernels.toml"),
                 "--env-file", str(tmp_path / "env"), "--torch", "9.9"])
    assert code == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "torch 9.9 is not in the matrix" in err
    assert not (tmp_path / "env").exists()
