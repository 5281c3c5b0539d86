"""Where the Nix host toolchain is recorded, and what a CI job asks set-up to make (no Nix
needed; the builds that read it are in tests/test_nix_flake.py)."""

from __future__ import annotations

import os
import pwd
import subprocess
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


# -- two checkouts, one nix-host.env (issue 33, item 6) --------------------------------


def _set_up(monkeypatch: pytest.MonkeyPatch, env_file: Path, home: Path,
            cuda: str | None = None) -> None:
    """What one checkout's host-setup records, with its own builder home (and CUDA)."""
    home.mkdir(parents=True, exist_ok=True)
    monkeypatch.setenv("KERNELHUB_BUILDER_HOME", str(home))
    if cuda is None:
        monkeypatch.delenv("CUDA_HOME", raising=False)
    else:
        monkeypatch.setenv("CUDA_HOME", cuda)
    nix_host.write_host_env(env_file)


def test_a_second_checkout_s_set_up_keeps_the_first_one_s(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    env_file = tmp_path / "nix-host.env"
    first, second = tmp_path / "first-home", tmp_path / "second-home"
    _set_up(monkeypatch, env_file, first, cuda="/usr/local/cuda-13.0")
    _set_up(monkeypatch, env_file, second)
    facts = nix_host.read_host_env(env_file)
    assert facts["KERNELHUB_BUILDER_HOMES"] == f"{second}:{first}"
    assert facts["CUDA_HOME"] == "/usr/local/cuda-13.0"  # the second set-up named none
    _set_up(monkeypatch, env_file, first)  # again: first moves to the front, once
    assert nix_host.read_host_env(env_file)["KERNELHUB_BUILDER_HOMES"] == f"{first}:{second}"
    second.rmdir()  # a home that is gone is dropped at the next set-up
    _set_up(monkeypatch, env_file, first)
    assert nix_host.read_host_env(env_file)["KERNELHUB_BUILDER_HOMES"] == str(first)


def _builder_python(home: Path, key: str) -> None:
    """A builder Python for dependencies ``key`` in ``home`` that says which home ran it."""
    root = home / nix_host.PYTHON_DIR / key
    (root / "bin").mkdir(parents=True)
    (root / "bin" / "python").write_text('#!/bin/sh\necho "ran from $KERNELHUB_BUILDER_HOME"\n')
    (root / "bin" / "python").chmod(0o755)
    (root / nix_host.MARKER_FILE).write_text("{}")


def test_each_checkout_s_nix_build_finds_its_own_builder_home(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """nix/host-build.sh as a Nix build runs it (no HOME; the user database's home, here
    a getent on PATH that names a scratch one): each set of dependencies finds the home
    whose set-up made its Python, whichever checkout set up last."""
    user_home = tmp_path / "user"
    env_file = user_home / nix_host.ENV_FILE_IN_HOME
    first, second = tmp_path / "first-home", tmp_path / "second-home"
    _set_up(monkeypatch, env_file, first)
    _set_up(monkeypatch, env_file, second)
    _builder_python(first, "key-of-first")
    _builder_python(second, "key-of-second")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "getent").write_text(f'#!/bin/sh\necho "me:x:{os.getuid()}:0::{user_home}:/bin/sh"\n')
    (bin_dir / "getent").chmod(0o755)
    for key, home in (("key-of-first", first), ("key-of-second", second)):
        done = subprocess.run(
            ["/bin/sh", str(REPO / "nix" / "host-build.sh"), "stamp"], text=True,
            capture_output=True, check=False, cwd=tmp_path,
            env={"PATH": f"{bin_dir}:/usr/bin:/bin", "pythonKey": key, "builderSrc": "b",
                 "loaderSrc": "l", "NIX_BUILD_TOP": str(tmp_path), "built": "x", "out": "y",
                 "commit": "", "dirty": "0"})
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == f"ran from {home}"
