"""The kernelhub CLI over a real LocalHub and a local build."""

from __future__ import annotations

from pathlib import Path

import pytest
from kernelhub.cli import main
from kernelhub.system import detect_system
from kernelhub_builder.ship import LocalPublisher
from kh_doubles import make_variant

REPO = "kernels-community/kern"
HOST = "torch{}{}-cxx11-cpu-x86_64-linux".format(*detect_system("cpu").torch)


@pytest.fixture
def hub_dir(tmp_path: Path) -> Path:
    hub = LocalPublisher(tmp_path / "hub")
    staging = tmp_path / "staging"
    for name in (HOST, "torch-universal", "torch299-cxx11-cpu-x86_64-linux"):
        make_variant(staging / name, name="kern")
    variants = {p.name: p for p in staging.iterdir()}
    hub.publish(REPO, "v1", variants, tag="v1.0.0", message="release 1.0.0")
    return tmp_path / "hub"


def test_versions_lists_refs_and_every_variant_verdict(
    hub_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["versions", REPO, "--hub", str(hub_dir)]) == 0
    out = capsys.readouterr().out
    assert "branch v1" in out and "tag    v1.0.0" in out
    assert "resolved: v1 -> " in out
    lines = {line.split()[-1] if "*" not in line else line.split()[1]: line for line in out.splitlines()}
    assert f"* {HOST}" in out and "chosen" in lines[HOST]
    assert "torch-universal" in out and "accepted (rank 2)" in out
    assert "torch299-cxx11-cpu-x86_64-linux  rejected: built for torch 2.99" in out


def test_info_for_a_hub_repo_and_a_local_path(
    hub_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["info", REPO, "--hub", str(hub_dir), "--version", "v1.0.0"]) == 0
    out = capsys.readouterr().out
    assert f"variant:        {HOST}" in out
    assert "name:           kern" in out
    assert "release:        1.0.0" in out
    assert "files:          1" in out

    make_variant(tmp_path / "local" / "torch-universal", name="localkern")
    assert main(["info", str(tmp_path / "local")]) == 0
    out = capsys.readouterr().out
    assert "name:           localkern" in out and "variant:        torch-universal" in out


def test_errors_are_one_line_without_traceback(
    hub_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["variants", REPO, "--hub", str(hub_dir), "--version", "7"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("kernelhub: error: kernels-community/kern has no version 7")
    assert "Traceback" not in err
    assert main(["variants", "kernels-community/nope", "--hub", str(hub_dir)]) == 1
    assert "no repository kernels-community/nope" in capsys.readouterr().err
    assert main(["versions", REPO, "--hub", str(hub_dir), "--version", "7"]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("kernelhub versions is deprecated: use `kernelhub variants`")
    assert err[1].startswith("kernelhub: error: kernels-community/kern has no version 7")


def test_cache_path_and_clear(
    hub_dir: Path, isolated_settings: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["cache", "path"]) == 0
    assert capsys.readouterr().out.strip() == str(isolated_settings)
    assert main(["info", REPO, "--hub", str(hub_dir)]) == 0
    assert any(isolated_settings.iterdir())
    capsys.readouterr()
    assert main(["cache", "clear"]) == 0
    assert capsys.readouterr().out.startswith("removed 1 entry from")
    assert [p.name for p in isolated_settings.iterdir()] == ["CACHEDIR.TAG"]
