"""The ``builder`` command as a user runs it: exit codes, what it prints, its errors."""

from __future__ import annotations

import json
import shutil
import textwrap
from pathlib import Path

import pytest
from kernelhub_builder.cli import main
from kernelhub_builder.plan.toolchains import detect_host

FIXTURE = Path(__file__).parent / "fixtures" / "project"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    shutil.copytree(FIXTURE, tmp_path / "project")
    return tmp_path / "project"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_list_variants_json_shows_the_whole_matrix(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "--project", str(project), "list-variants", "--json")
    assert code == 0
    plans = json.loads(out)
    assert sorted(plans) == ["relu_py", "scale", "scale_stable"]
    host = detect_host().system
    scale = {row["variant"]: row for row in plans["scale"]}
    assert scale[f"torch213-cxx11-cpu-{host}"]["buildable"] is True
    assert scale[f"torch214-cxx11-cpu-{host}"]["torch"] == "2.14"
    assert [row["variant"] for row in plans["relu_py"]] == ["torch-cpu"]
    stable = [row["variant"] for row in plans["scale_stable"]]
    assert f"torch-stable-abi213-cpu-{host}" in stable


def test_the_project_is_found_upward_from_the_current_directory(
    project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(project / "kernels-src" / "relu_py" / "tests")
    code, out, _ = run(capsys, "list-variants", "relu_py")
    assert code == 0
    assert "relu_py (v1, release 1.0.0)" in out and "torch-cpu" in out


def test_build_then_rebuild_then_publish(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out_dir = tmp_path / "out"
    base = ["--project", str(project), "--out", str(out_dir)]
    code, out, _ = run(capsys, *base, "build", "relu_py")
    assert code == 0 and "relu_py  torch-cpu" in out and "assembled" in out
    assert (out_dir / "relu_py" / "torch-cpu" / "metadata.json").is_file()

    code, out, err = run(capsys, *base, "build", "relu_py")
    assert code == 0 and "up to date" in out and "no compile work" in err

    hub = str(tmp_path / "hub")
    code, out, _ = run(capsys, *base, "publish", "relu_py", "--hub", hub, "--dry-run")
    assert code == 0 and "dry run" in out
    assert not (tmp_path / "hub" / "models" / "kernelhub-tests" / "relu_py").exists()

    code, out, _ = run(capsys, *base, "publish", "relu_py", "--hub", hub)
    assert code == 0
    assert "published kernelhub-tests/relu_py@v1" in out and "tag       v1.0.0" in out

    code, out, _ = run(capsys, *base, "publish", "relu_py", "--hub", hub)
    assert code == 0 and "no change" in out


@pytest.mark.slow
def test_builder_test_runs_the_kernel_tests(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["--project", str(project), "--out", str(tmp_path / "out")]
    assert run(capsys, *base, "build", "relu_py")[0] == 0
    code, out, err = run(capsys, *base, "test", "relu_py")
    assert code == 0, out + err
    assert "PASS  relu_py  torch-cpu  (torch 2.14)" in out
    assert "all 1 test run(s) passed" in err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["build", "nope"], "unknown kernel 'nope'; this project has: scale, scale_stable, relu_py"),
        (["build", "relu_py", "--variant", "torch-cuda"], "matches no variant"),
        (["publish", "relu_py", "--hub", "HUB"], "run builder build relu_py first"),
        (["test", "relu_py"], "run builder build relu_py first"),
    ],
)
def test_user_errors_exit_1_with_a_message_and_no_traceback(
    project: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    message: str,
) -> None:
    argv = [str(tmp_path / "hub") if a == "HUB" else a for a in argv]
    code, out, err = run(capsys, "--project", str(project), "--out", str(tmp_path / "out"), *argv)
    assert code == 1
    assert message in " ".join(err.split())
    assert "Traceback" not in out + err


def test_no_project_found(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    code, _, err = run(capsys, "list-variants")
    assert code == 1 and "no kernels.toml" in err and "--project" in err


def test_a_bad_manifest_names_the_file(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    build_toml = project / "kernels-src" / "relu_py" / "build.toml"
    build_toml.write_text(build_toml.read_text().replace("version = 1", "version = 'one'"))
    code, _, err = run(capsys, "--project", str(project), "build", "relu_py")
    assert code == 1
    assert "build.toml" in err and "version" in err and "Traceback" not in err


def test_a_compile_error_shows_the_compiler_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A kernel with no torch headers, so the compiler fails in a fraction of a second.
    root = tmp_path / "broken-project"
    kernel = root / "kernels-src" / "broken"
    (kernel / "torch-ext" / "broken").mkdir(parents=True)
    (kernel / "src").mkdir()
    (root / "kernels.toml").write_text(textwrap.dedent("""\
        kernels = ["broken"]
        [matrix]
        torch = ["2.13"]
        backends = ["cpu"]
        [toolchain.torch]
        "2.13" = "torch==2.13.0"
    """))
    (kernel / "build.toml").write_text(textwrap.dedent("""\
        [general]
        name = "broken"
        backends = ["cpu"]
        [torch]
        src = ["torch-ext/binding.cpp"]
        [kernel.broken_cpu]
        backend = "cpu"
        src = ["src/ok.cpp"]
    """))
    (kernel / "torch-ext" / "broken" / "__init__.py").write_text("")
    (kernel / "torch-ext" / "binding.cpp").write_text("int broken_op( { return 0; }\n")
    (kernel / "src" / "ok.cpp").write_text("int ok_op() { return 1; }\n")

    code, out, err = run(capsys, "--project", str(root), "--out", str(tmp_path / "out"), "build")
    assert code == 1
    assert "binding.cpp" in err and "error" in err
    assert "Traceback" not in out + err
    assert not (tmp_path / "out" / "broken" / f"torch213-cxx11-cpu-{detect_host().system}").exists()


@pytest.mark.parametrize("existing", ["file", "non-empty dir"])
def test_init_refuses_an_existing_file_or_non_empty_dir_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], existing: str
) -> None:
    target = tmp_path / "target"
    if existing == "file":
        target.write_text("mine\n")
    else:
        target.mkdir()
        (target / "notes.txt").write_text("mine\n")
    code, _, err = run(capsys, "init", "my-kernel", str(target))
    assert code == 1
    assert err.strip().splitlines() == [
        f"error: {target} exists and is not an empty directory; choose a new directory"]
    assert "Traceback" not in err


def test_init_refuses_a_name_the_ecosystems_tools_refuse_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(capsys, "init", "my_kernel", str(tmp_path / "target"))
    assert code == 1
    (line,) = err.strip().splitlines()
    assert "'my_kernel' is not a kernel name" in line and "refuse '_'" in line
    assert not (tmp_path / "target").exists()
