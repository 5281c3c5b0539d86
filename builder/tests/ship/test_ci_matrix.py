"""The CI matrix comes from the manifests and covers each variant once; shards partition
the buildable variants; merging artifacts verifies and refuses conflicts."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import pytest
import tomllib
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


def test_every_variant_builds_on_a_hosted_runner_and_device_tests_are_separate(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Compiling needs the toolkit, never the device: every build job is on a GitHub-hosted
    runner (toolkit from packages, torch from PyTorch's index for it); tests that need a
    device are device-test jobs, on self-hosted runners, only for the devices named."""
    code, out, _ = run(capsys, "--project", str(REPO), "ci-matrix")
    assert code == 0
    jobs = json.loads(out)["include"]
    assert {tuple(j["runs-on"]) for j in jobs} <= {
        ("ubuntu-24.04",), ("ubuntu-24.04-arm",), ("macos-15",)}
    # The ecosystem builds ROCm and XPU for x86_64 only; no torch exists for them on aarch64.
    assert not [j["variant"] for j in jobs
                if j["arch"] == "aarch64" and j["toolkit"] and j["toolkit"][:4] in ("rocm", "xpu-")]
    by_variant = {(j["kernel"], j["variant"]): j for j in jobs}
    cpu = by_variant["activation", "torch213-cxx11-cpu-x86_64-linux"]
    assert (cpu["runs-on"], cpu["test"], cpu["toolkit"], cpu["device"], cpu["torch"]) == (
        ["ubuntu-24.04"], True, None, None, "2.13")
    assert cpu["torch-index"] == "https://download.pytorch.org/whl/cpu"
    cuda = by_variant["activation", "torch214-cxx11-cu130-aarch64-linux"]
    assert (cuda["runs-on"], cuda["toolkit"], cuda["test"], cuda["device"]) == (
        ["ubuntu-24.04-arm"], "cuda-13.0", False, "nvidia-gpu")
    assert cuda["torch-index"] == "https://download.pytorch.org/whl/cu130"
    stable = by_variant["rmsnorm", "torch-stable-abi213-cu130-x86_64-linux"]
    assert stable["torch"] == "2.14"  # a GPU stable-ABI build uses the newest torch's env
    rocm = by_variant["activation", "torch213-cxx11-rocm70-x86_64-linux"]
    assert (rocm["toolkit"], rocm["torch-index"]) == (
        "rocm-7.0", "https://download.pytorch.org/whl/rocm7.0")
    metal = by_variant["activation", "torch213-metal-aarch64-darwin"]
    assert (metal["runs-on"], metal["test"], metal["device"], metal["torch-index"]) == (
        ["macos-15"], False, None, None)
    triton = by_variant["triton-activation", "torch-cuda"]  # pure Python: no toolkit
    assert (triton["runs-on"], triton["toolkit"], triton["test"], triton["device"]) == (
        ["ubuntu-24.04"], None, False, "nvidia-gpu")


def test_github_output_has_both_matrices_and_their_sizes(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = run(capsys, "--project", str(REPO), "ci-matrix", "--github-output",
                       "activation", "triton-activation", "--devices", "nvidia-gpu")
    assert code == 0
    outputs = {key: json.loads(value) for key, _, value in
               (line.partition("=") for line in out.splitlines())}
    assert set(outputs) == {"matrix", "count", "device-matrix", "device-count"}
    assert outputs["count"] == len(outputs["matrix"]["include"]) > 0
    tests = outputs["device-matrix"]["include"]
    assert outputs["device-count"] == len(tests) > 0
    assert {t["device"] for t in tests} == {"nvidia-gpu"}  # only the devices that exist
    cuda = next(t for t in tests if t["variant"] == "torch214-cxx11-cu130-x86_64-linux")
    assert cuda["runs-on"] == ["self-hosted", "Linux", "X64", "nvidia-gpu"]
    assert cuda["artifact"] == "variant--activation--torch214-cxx11-cu130-x86_64-linux"
    assert cuda["result"] == "device-test--activation--torch214-cxx11-cu130-x86_64-linux"

    code, out, _ = run(capsys, "--project", str(REPO), "ci-matrix", "--github-output")
    assert code == 0 and "device-count=0" in out.splitlines()
    code, _, err = run(capsys, "--project", str(REPO), "ci-matrix", "--devices", "tpu")
    assert code == 1 and "unknown device label(s) ['tpu']" in err


def test_missing_on_a_hub_plans_only_what_the_release_tag_lacks(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A later run completes a release: variants already under the tag are not rebuilt."""
    from kernelhub_builder.ship import LocalPublisher
    from kh_doubles import make_variant

    hub = tmp_path / "hub"
    code, out, _ = run(capsys, "--project", str(REPO), "ci-matrix", "triton-activation",
                       "--missing-on", str(hub))
    assert code == 0  # nothing published yet: everything is missing
    assert [j["variant"] for j in json.loads(out)["include"]] == ["torch-cuda", "torch-xpu"]
    staged = tmp_path / "torch-cuda"
    make_variant(staged, name="triton_activation", backend="cuda")
    LocalPublisher(hub).publish("kernels-community/triton-activation", "v1",
                                {"torch-cuda": staged}, tag="v1.0.0", message="partial")
    code, out, _ = run(capsys, "--project", str(REPO), "ci-matrix", "triton-activation",
                       "--missing-on", str(hub), "--github-output")
    assert code == 0
    lines = dict(line.split("=", 1) for line in out.splitlines())
    assert [j["variant"] for j in json.loads(lines["matrix"])["include"]] == ["torch-xpu"]
    assert lines["count"] == "1"


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
    from kernelhub.formats.metadata import compute_digests, read_metadata, write_metadata

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


def test_missing_on_plans_a_build_until_the_tag_holds_every_name_it_is_published_under(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """builder publish writes each build under both generations of names: a tag that holds
    only the legacy name (an older kernelhub's release) still lacks the current one."""
    from kernelhub.formats.variants import parse_variant
    from kernelhub_builder.manifest import VariantNames
    from kernelhub_builder.ship import LocalPublisher
    from kernelhub_builder.ship.names import published_names
    from kh_doubles import make_variant

    def planned() -> list[str]:
        code, out, _ = run(capsys, "--project", str(REPO), "ci-matrix", "activation",
                           "--missing-on", str(hub))
        assert code == 0
        return [j["variant"] for j in json.loads(out)["include"]]

    hub = tmp_path / "hub"
    tag = "v" + tomllib.loads((REPO / "kernels.toml").read_text())["releases"]["activation"]
    variant = next(v for v in planned() if v.endswith("-cpu-x86_64-linux"))
    legacy, current = variant, published_names(parse_variant(variant), VariantNames.CURRENT)[0]
    assert current != legacy
    staged = tmp_path / "staged"
    make_variant(staged, name="activation")
    publisher = LocalPublisher(hub)
    publisher.publish("kernels-community/activation", "v1", {legacy: staged}, tag=tag,
                      message="legacy name only")
    assert variant in planned()
    publisher.publish("kernels-community/activation", "v1", {legacy: staged, current: staged},
                      tag=tag, message="both names")
    assert variant not in planned()
