"""Subcommands other distributions add to ``kernelhub`` (entry-point group
``kernelhub.commands``): found in installed metadata, run with the arguments after their
name, and a missing one says what to install.

The distributions here are real ones on ``sys.path``: a ``*.dist-info`` directory with an
``entry_points.txt``, what pip writes, beside the module it names.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from kernelhub import cli, optional_commands
from kernelhub.optional_commands import Known


def install_distribution(site: Path, name: str, commands: dict[str, str], module: str = "") -> None:
    """Write distribution ``name`` into ``site`` as pip would: metadata plus its module."""
    info = site / f"{name.replace('-', '_')}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    lines = "".join(f"{command} = {target}\n" for command, target in commands.items())
    (info / "entry_points.txt").write_text(f"[kernelhub.commands]\n{lines}")
    if module:
        (site / f"{name.replace('-', '_')}.py").write_text(module)


HELLO = '''
import sys

def main(argv):
    print("hello", *argv)
    return 3 if "--fail" in argv else 0
'''


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.syspath_prepend(str(site))
    return site


def test_an_installed_command_runs_with_the_arguments_after_its_name(site, capsys):
    install_distribution(site, "kh-hello", {"hello": "kh_hello:main"}, HELLO)
    assert cli.main(["hello", "a", "--b"]) == 0
    assert capsys.readouterr().out == "hello a --b\n"
    assert cli.main(["hello", "--fail"]) == 3  # its exit status is the command's


def test_a_known_command_that_is_not_installed_names_what_to_install(monkeypatch, capsys):
    monkeypatch.setitem(optional_commands.KNOWN, "frobnicate",
                        Known("kernelhub-frobnicate", "frobnicate kernels"))
    assert cli.main(["frobnicate", "--now"]) == 1
    err = capsys.readouterr().err
    assert err.strip().splitlines() == [
        "kernelhub: error: `kernelhub frobnicate` comes with kernelhub-frobnicate, which is "
        "not installed: pip install kernelhub-frobnicate"
    ]


def test_a_command_that_fails_to_import_is_one_line_not_a_traceback(site, capsys):
    install_distribution(site, "kh-broken", {"broken": "kh_broken_missing:main"})
    assert cli.main(["broken"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in err[0]
    assert "`kernelhub broken` (kh_broken_missing:main, from kh-broken) failed to import" in err[0]
    assert "pip install --force-reinstall kh-broken" in err[0]


def test_an_unknown_command_is_argparses_usage_error(capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.main(["no-such-command"])
    assert exit_.value.code == 2
    assert "invalid choice: 'no-such-command'" in capsys.readouterr().err


def test_own_commands_never_read_entry_points(monkeypatch, tmp_path, capsys):
    def fail(**_kw):
        raise AssertionError("entry points scanned for a built-in command")

    monkeypatch.setattr(optional_commands, "entry_points", fail)
    monkeypatch.setenv("KERNELHUB_CACHE", str(tmp_path / "cache"))
    assert cli.main(["cache", "path"]) == 0
    assert capsys.readouterr().out.strip()


def test_help_lists_installed_and_known_commands(site, capsys):
    install_distribution(site, "kh-hello", {"hello": "kh_hello:main"}, HELLO)
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    out = capsys.readouterr().out
    section = out[out.index("commands from other distributions:"):]
    assert re.search(r"\n  hello +from kh-hello\n", section)
    for name, known in optional_commands.KNOWN.items():
        assert f"  {name}" in section and known.help in section


def test_builder_registers_init(tmp_path):
    """kernelhub-builder's own metadata registers ``init``; ``kernelhub init`` runs it."""
    done = subprocess.run([sys.executable, "-m", "kernelhub.cli", "init", "my-kernel"],
                          cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "my-kernel" / "build.toml").is_file()
    assert "kernelhub init" in subprocess.run(
        [sys.executable, "-m", "kernelhub.cli", "init", "--help"],
        capture_output=True, text=True).stdout
