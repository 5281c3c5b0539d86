"""The CI matrix comes from the manifests and covers each variant once; shards partition
the buildable variants; merging artifacts verifies and refuses conflicts."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import pytest
from kernelhub_builder.cli import main
from kernelhub_builder.errors import ShardError
from kernelhub_builder.ship.ci_matrix import parse_shard, shard_of

REPO = Path(__file__).resolve().parents[3]
FIXTURE = Path(__file__).parents[1] / "fixtures" / "project"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_the_ci_matrix_covers_every_variant_of_list_variants_exactly_once(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = run(capsys, "--project", str(REPO), "list-variants", "--json")
    assert code == 0
    listed = Counter((kernel, row["variant"]) for kernel, rows in json.loads(out).items()
                     for row in rows)
    code, out, _ = run(capsys, "--project", str(REPO), "ci-matrix")
    assert code == 0
    jobs = json.loads(out)["include"]
    in_matrix = Counter((job["kernel"], job["variant"]) for job in jobs)
    assert in_matrix == listed
    assert set(in_matrix.values()) == {1}
    assert len({job["artifact"] for job in jobs}) == len(jobs)  # artifact names never collide


def test_runner_labels_say_where_each_variant_builds_and_whether_it_is_tested(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = run(capsys, "--project", str(REPO), "ci-matrix", "activation",
                       "triton-activation")
    assert code == 0
    jobs = {job["variant"]: job for job in json.loads(out)["include"]}
    cpu = jobs["torch213-cxx11-cpu-x86_64-linux"]
    assert (cpu["runs-on"], cpu["gpu"], cpu["test"], cpu["toolkit"]) == (
        ["ubuntu-24.04"], False, True, None)
    cuda = jobs["torch214-cxx11-cu130-aarch64-linux"]
    assert cuda["runs-on"] == ["self-hosted", "Linux", "ARM64", "nvidia-gpu", "cuda-13.0"]
    assert (cuda["os"], cuda["arch"], cuda["toolkit"], cuda["gpu"]) == (
        "linux", "aarch64", "cuda-13.0", True)
    metal = jobs["torch213-metal-aarch64-darwin"]
    assert (metal["runs-on"], metal["test"]) == (["macos-15"], False)
    triton = jobs["torch-cuda"]  # pure Python: no toolkit, but a GPU to test it
    assert (triton["toolkit"], triton["gpu"], "nvidia-gpu" in triton["runs-on"]) == (
        None, True, True)


def test_github_output_is_one_line_the_workflow_reads_with_fromjson(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = run(capsys, "--project", str(REPO), "ci-matrix", "--github-output")
    assert code == 0
    (line,) = out.splitlines()
    key, _, value = line.partition("=")
    assert key == "matrix" and json.loads(value)["include"]


def test_shards_partition_the_items_in_a_fixed_order() -> None:
    items = [f"v{i}" for i in range(7)]
    shards = [shard_of(items, (i, 3)) for i in (1, 2, 3)]
    assert sorted(x for s in shards for x in s) == sorted(items)
    assert [len(s) for s in shards] == [3, 2, 2]
    assert parse_shard("2/3") == (2, 3)
    for bad in ("0/2", "3/2", "1", "a/b", "1/0"):
        with pytest.raises(ShardError, match="expected i/n"):
            parse_shard(bad)


def test_build_shard_bad_value_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--project", str(FIXTURE), "build", "--shard", "3/2"])
    assert exit_info.value.code == 2
    assert "expected i/n" in capsys.readouterr().err


@pytest.fixture
def project(tmp_path: Path) -> Path:
    shutil.copytree(FIXTURE, tmp_path / "project")
    return tmp_path / "project"


def test_merge_refuses_a_tampered_or_conflicting_artifact_and_merges_nothing(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A pure-Python variant: a real build, no compiler needed.
    out_a, out_b = tmp_path / "a", tmp_path / "b"
    for out in (out_a, out_b):
        code, _, err = run(capsys, "--project", str(project), "--out", str(out), "build",
                           "relu_py", "--no-import-check")
        assert code == 0, err
    merged = tmp_path / "merged"
    code, out, _ = run(capsys, "--project", str(project), "--out", str(merged),
                       "merge-artifacts", str(out_a), str(out_b))
    assert code == 0
    assert "merged  relu_py  torch-cpu" in out
    assert (merged / "relu_py" / "torch-cpu" / "metadata.json").is_file()

    # Same variant, different bytes (digests updated to match): two jobs disagree.
    changed = out_b / "relu_py" / "torch-cpu" / "__init__.py"
    changed.write_text(changed.read_text() + "\n# built differently\n")
    from kernelhub.metadata import compute_digests, read_metadata, write_metadata

    variant_b = changed.parent
    meta = read_metadata(variant_b)
    write_metadata(variant_b, type(meta)(**{**meta.__dict__,
                                            "digest_files": compute_digests(variant_b)}))
    fresh = tmp_path / "fresh"
    code, _, err = run(capsys, "--project", str(project), "--out", str(fresh),
                       "merge-artifacts", str(out_a), str(out_b))
    assert code == 1
    assert "differs between artifacts" in err and "Nothing merged" in err
    assert not (fresh / "relu_py").exists()

    # A file changed after the build: its digest no longer matches.
    (out_a / "relu_py" / "torch-cpu" / "__init__.py").write_text("import os\n")
    code, _, err = run(capsys, "--project", str(project), "--out", str(fresh),
                       "merge-artifacts", str(out_a))
    assert code == 1
    assert "is not valid" in err and "__init__.py" in err
