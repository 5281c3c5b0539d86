"""``builder migrate``: a tree in edition 5 (or the unversioned schema) rewritten in
edition 6 reads as the same kernel, keeps every comment, migrates once, and a file that
cannot be migrated is left as it was.

Round trips run on our six kernels and on community-shaped trees written for these tests
(tests/fixtures/community-*); the ecosystem's own parser (kernels 0.19.1) reads every
rewrite without its "upgrading edition 5 in memory" warning.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from kernelhub_builder.cli import main
from kernelhub_builder.errors import ManifestError
from kernelhub_builder.manifest import KernelManifest, load_kernel, load_project
from kernelhub_builder.manifest.migrate import migrate_kernel

REPO = Path(__file__).resolve().parents[3]
OURS = sorted(p.parent.name for p in (REPO / "kernels-src").glob("*/build.toml"))
COMMUNITY = ("community-scale", "community-legacy", "community-universal")


def copy_tree(source: Path, dest: Path) -> Path:
    shutil.copytree(source, dest, ignore=shutil.ignore_patterns("__pycache__", "build"))
    return dest


def quietly_load(path: Path) -> KernelManifest:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # unbuildable backends, said once elsewhere
        return load_kernel(path)


def assert_round_trip(tree: Path) -> None:
    before = quietly_load(tree)
    original = (tree / "build.toml").read_text()
    migration = migrate_kernel(tree)
    assert migration.changed and migration.before == before.edition
    after = quietly_load(tree)
    assert after == dataclasses.replace(before, edition=6, universal=False)
    text = (tree / "build.toml").read_text()
    assert text == migration.text
    comments = [line.strip() for line in original.splitlines() if line.lstrip().startswith("#")]
    assert [c for c in comments if c not in text] == []
    trailing = [line.split("#", 1)[1] for line in original.splitlines()
                if "#" in line and not line.lstrip().startswith("#")]
    assert [c for c in trailing if c not in text] == []
    again = migrate_kernel(tree)
    assert not again.changed and again.text == text


def as_edition_5(text: str) -> str:
    """An edition-6 file as edition 5 wrote it: the edition and the part kinds."""
    text = text.replace("edition = 6", "edition = 5")
    return re.sub(r'^language = "cpp-(\w+)"', r'backend = "\1"', text, flags=re.MULTILINE)


@pytest.mark.parametrize("kernel", OURS)
def test_our_kernels_round_trip(tmp_path: Path, kernel: str) -> None:
    """Our trees are in edition 6 (builder migrate wrote them); their edition-5 form
    migrates back to the very same text."""
    tree = copy_tree(REPO / "kernels-src" / kernel, tmp_path / kernel)
    ours = (tree / "build.toml").read_text()
    assert quietly_load(tree).edition == 6
    (tree / "build.toml").write_text(as_edition_5(ours))
    assert quietly_load(tree).edition == 5
    assert_round_trip(tree)
    assert (tree / "build.toml").read_text() == ours


@pytest.mark.parametrize("fixture", COMMUNITY)
def test_community_trees_round_trip(tmp_path: Path, fixture: str) -> None:
    assert_round_trip(copy_tree(REPO / "tests" / "fixtures" / fixture, tmp_path / fixture))


def test_edition_5_diff_is_the_edition_and_the_part_kinds(tmp_path: Path) -> None:
    tree = copy_tree(REPO / "tests" / "fixtures" / "community-scale", tmp_path / "scale")
    original = (tree / "build.toml").read_text().splitlines()
    migrated = migrate_kernel(tree).text.splitlines()
    changed = [(a, b) for a, b in zip(original, migrated, strict=True) if a != b]
    assert changed == [("edition = 5", "edition = 6"),
                       ('backend = "cpu"', 'language = "cpp-cpu"')]


def test_the_oldest_schema_is_written_out(tmp_path: Path) -> None:
    """Defaults written out, the CUDA bound moved, the hipified part given its twin."""
    tree = copy_tree(REPO / "tests" / "fixtures" / "community-legacy", tmp_path / "legacy")
    text = migrate_kernel(tree).text
    assert 'version = 1\nedition = 6\nlicense = "apache-2.0"\nbackends = ["cuda", "rocm", "metal"]' in text
    assert '[general.cuda]\nminver = "12.6"  # CUDA toolkits older than this are skipped\n' in text
    assert "cuda-minver" not in text and "universal" not in text
    assert '[kernel.relu_rocm]\nlanguage = "cpp-rocm"\ndepends = ["torch"]\n' in text
    assert 'language = "cpp-metal"  # Objective-C++ host code and a Metal shader' in text


def test_universal_becomes_noarch_for_every_backend_and_says_so(tmp_path: Path) -> None:
    tree = copy_tree(REPO / "tests" / "fixtures" / "community-universal", tmp_path / "gelu")
    migration = migrate_kernel(tree)
    assert "[torch-noarch]\npyext = [\"py\"]" in migration.text
    assert len(migration.notes) == 1
    assert "one torch-<backend> variant per backend instead of torch-universal" in migration.notes[0]


@pytest.mark.parametrize(
    ("fixture", "edit", "key", "message"),
    [
        ("community-scale", ("version = 1\n", 'version = 1\nrelease = "1.2.0"\n'),
         "general.release", "move it to kernels.toml [releases]"),
        ("community-legacy", ('license = "apache-2.0"\n', ""), "general.license",
         "edition 6 requires a license"),
        ("community-scale", ('src = ["scale_cpu/scale_cpu.cpp"]',
                             'src = ["scale_cpu/scale_cpu.cpp"]\ncuda-maxver = "13.0"'),
         "kernel._scale_cpu.cuda-maxver", None),
    ],
)
def test_what_edition_6_cannot_say_is_refused_and_nothing_changes(
        tmp_path: Path, fixture: str, edit: tuple[str, str], key: str, message: str | None) -> None:
    tree = copy_tree(REPO / "tests" / "fixtures" / fixture, tmp_path / fixture)
    build_toml = tree / "build.toml"
    assert edit[0] in build_toml.read_text()
    build_toml.write_text(build_toml.read_text().replace(*edit, 1))
    original = build_toml.read_text()
    with pytest.raises(ManifestError) as info:
        migrate_kernel(tree)
    assert info.value.key == key
    if message:
        assert message in str(info.value)
    assert build_toml.read_text() == original
    assert sorted(p.name for p in tree.iterdir() if p.name.startswith(".build.toml")) == []


def test_an_underscore_name_is_migrated_with_a_note(tmp_path: Path) -> None:
    tree = copy_tree(REPO / "builder" / "tests" / "fixtures" / "project" / "kernels-src" /
                     "scale_stable", tmp_path / "scale_stable")
    migration = migrate_kernel(tree)
    assert migration.changed
    assert "renamed 'scale-stable'" in migration.notes[0]
    assert 'name = "scale-stable"' in migration.text


def test_an_underscore_name_with_a_release_entry_says_to_rename_that_too(tmp_path: Path) -> None:
    tree = copy_tree(REPO / "builder" / "tests" / "fixtures" / "project" / "kernels-src" /
                     "scale_stable", tmp_path / "kernels-src" / "scale_stable")
    (tmp_path / "kernels.toml").write_text('kernels = ["scale_stable"]\n'
                                           '[releases]\nscale_stable = "2.1.0"\n')
    original = (tree / "build.toml").read_text()
    with pytest.raises(ManifestError) as info:
        migrate_kernel(tree, load_project(tmp_path))
    assert info.value.key == "releases.scale_stable"
    assert "rename this [releases] entry to 'scale-stable' too" in str(info.value)
    assert (tree / "build.toml").read_text() == original


def test_cli_check_writes_nothing_and_fails_until_migrated(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tree = copy_tree(REPO / "tests" / "fixtures" / "community-scale", tmp_path / "scale")
    original = (tree / "build.toml").read_text()
    assert main(["--project", str(tree), "migrate", "--check"]) == 1
    assert (tree / "build.toml").read_text() == original
    assert "edition 5 → edition 6 (not written: --check)" in capsys.readouterr().out
    assert main(["--project", str(tree), "migrate"]) == 0
    assert main(["--project", str(tree), "migrate", "--check"]) == 0
    assert "already edition 6" in capsys.readouterr().out


@pytest.fixture(scope="module")
def ecosystem_parser(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """kernels 0.19.1 installed out of our venv: its Rust ``Build.open`` is the oracle."""
    from reference_loader import ReferenceLoaderUnavailable, install_reference_loader

    try:
        return install_reference_loader(tmp_path_factory.mktemp("kernels-0.19.1"), "0.19.1")
    except ReferenceLoaderUnavailable as e:
        pytest.skip(str(e).splitlines()[0])


def ecosystem_reads(reference: Path, tree: Path) -> subprocess.CompletedProcess[str]:
    code = "import sys, kernels._rust as r; r.Build.open(sys.argv[1])"
    env = {**os.environ, "PYTHONPATH": str(reference)}
    return subprocess.run([sys.executable, "-c", code, str(tree)], capture_output=True,
                          text=True, env=env, timeout=120)


@pytest.mark.parametrize("tree", [*(f"kernels-src/{k}" for k in OURS),
                                  *(f"tests/fixtures/{f}" for f in COMMUNITY)])
def test_the_ecosystems_parser_reads_every_rewrite_without_warning(
        ecosystem_parser: Path, tmp_path: Path, tree: str) -> None:
    copy = copy_tree(REPO / tree, tmp_path / "tree")
    if quietly_load(copy).edition != 6:
        migrate_kernel(copy)
    done = ecosystem_reads(ecosystem_parser, copy)
    assert done.returncode == 0, done.stderr
    assert "edition" not in done.stderr, done.stderr  # no "upgrading ... in memory"
