"""The publish job's record: what a release lacks and why, and which device-tested variants
stay out of it (the flow itself is rehearsed in tests/test_ci_rehearsal.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from kernelhub_builder.ship.ci_release import (
    device_results,
    exclude_failed,
    main,
    merged_variants,
    release_record,
)

PLAN = [
    {"kernel": "a", "variant": "torch-cpu", "device": None},
    {"kernel": "a", "variant": "torch-cuda", "device": "nvidia-gpu"},
    {"kernel": "b", "variant": "torch-xpu", "device": "intel-gpu"},
    {"kernel": "b", "variant": "torch-cuda", "device": "nvidia-gpu"},
]


def result(root: Path, kernel: str, variant: str, passed: object) -> None:
    root.mkdir(parents=True, exist_ok=True)
    (root / f"{kernel}--{variant}.json").write_text(json.dumps(
        {"kernel": kernel, "variant": variant, "passed": passed, "device": "x"}))


def merged_dir(root: Path, *pairs: tuple[str, str]) -> Path:
    for kernel, variant in pairs:
        (root / kernel / variant).mkdir(parents=True)
        (root / kernel / variant / "metadata.json").write_text("{}")
    (root / ".work").mkdir(parents=True, exist_ok=True)  # builder scratch: not a kernel
    return root


def test_missing_variants_are_recorded_with_why_and_untested_ones_are_named(
    tmp_path: Path
) -> None:
    results = tmp_path / "results"
    result(results, "a", "torch-cuda", True)
    result(results, "b", "torch-cuda", False)
    merged = merged_dir(tmp_path / "merged", ("a", "torch-cpu"), ("a", "torch-cuda"),
                        ("b", "torch-xpu"), ("b", "torch-cuda"))
    found = device_results([results])
    assert found == {("a", "torch-cuda"): True, ("b", "torch-cuda"): False}

    assert exclude_failed(merged, found) == [("b", "torch-cuda")]
    assert merged_variants(merged) == [("a", "torch-cpu"), ("a", "torch-cuda"), ("b", "torch-xpu")]

    built = [("a", "torch-cpu"), ("a", "torch-cuda"), ("b", "torch-xpu"), ("b", "torch-cuda")]
    record = release_record(PLAN, built, merged_variants(merged), found)
    assert record.missing == {("b", "torch-cuda"): "its device test failed"}
    assert record.untested == [("b", "torch-xpu")]  # published; no intel-gpu runner ran it
    nothing_else = release_record(PLAN, [("a", "torch-cpu")], [("a", "torch-cpu")],
                                  {("b", "torch-cuda"): False})
    assert set(nothing_else.missing) == {("a", "torch-cuda"), ("b", "torch-xpu"),
                                        ("b", "torch-cuda")}
    assert all(why.startswith("no build") for why in nothing_else.missing.values())
    text = nothing_else.markdown()
    assert "1 variant(s) published, 3 missing" in text and "`b` `torch-xpu`: no build" in text


def test_a_kernel_whose_every_variant_failed_leaves_no_empty_dir(tmp_path: Path) -> None:
    merged = merged_dir(tmp_path / "merged", ("b", "torch-cuda"))
    assert exclude_failed(merged, {("b", "torch-cuda"): False}) == [("b", "torch-cuda")]
    assert not (merged / "b").exists()


def test_report_command_writes_json_and_markdown_and_bad_input_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"include": PLAN}))
    merged = merged_dir(tmp_path / "merged", ("a", "torch-cpu"))
    artifacts = tmp_path / "artifacts"
    merged_dir(artifacts / "variant--a--torch-cpu", ("a", "torch-cpu"))
    assert main(["report", "--plan", str(plan), "--artifacts", str(artifacts),
                 "--merged", str(merged), "--out", str(tmp_path / "report")]) == 0
    data = json.loads((tmp_path / "report" / "release-report.json").read_text())
    assert data["published"] == [{"kernel": "a", "variant": "torch-cpu"}]
    assert len(data["missing"]) == 3
    assert "3 missing" in capsys.readouterr().out

    plan.write_text("[]")
    assert main(["report", "--plan", str(plan), "--artifacts", str(artifacts),
                 "--merged", str(merged), "--out", str(tmp_path / "report")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not a build matrix" in err
    bad = tmp_path / "bad-results"
    bad.mkdir()
    (bad / "x.json").write_text('{"kernel": "a"}')
    assert main(["exclude", "--merged", str(merged), "--results", str(bad)]) == 1
    assert "not a device-test result" in capsys.readouterr().err
