"""Every GitHub Actions workflow passes actionlint (with shellcheck on its ``run:`` blocks),
every ci/ script passes shellcheck, and the release workflow can run on GitHub-hosted
runners as written: what it asks of runners is checked here, what its scripts do is
rehearsed in tests/test_ci_rehearsal.py."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from e2e import REPO

WORKFLOWS = sorted((REPO / ".github" / "workflows").glob("*.yml"))
RELEASE = REPO / ".github" / "workflows" / "release.yml"
CI_SCRIPTS = sorted(p for p in (REPO / "ci").iterdir() if p.is_file() and p.suffix != ".txt")


def tool(name: str) -> str:
    """ci/setup installs it (ci/requirements-dev.txt); its absence is a set-up failure."""
    found = shutil.which(name, path=str(Path(sys.executable).parent))
    if found is None:
        pytest.fail(f"{name} is not installed in this venv; run bash ci/setup")
    return found


def actionlint(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([tool("actionlint"), "-no-color", "-shellcheck", tool("shellcheck"),
                           str(path)], cwd=REPO, text=True, capture_output=True)


def release() -> dict[str, Any]:
    data = yaml.safe_load(RELEASE.read_text())
    data["on"] = data.pop(True, data.get("on"))  # YAML 1.1 reads the key `on` as true
    return data


def steps_of(job: dict[str, Any]) -> list[dict[str, Any]]:
    return list(job.get("steps", []))


def runs(job: dict[str, Any]) -> str:
    return "\n".join(step.get("run", "") for step in steps_of(job))


def test_there_are_workflows() -> None:
    assert RELEASE in WORKFLOWS


@pytest.mark.parametrize("workflow", WORKFLOWS, ids=[p.name for p in WORKFLOWS])
def test_workflow_passes_actionlint(workflow: Path) -> None:
    proc = actionlint(workflow)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_actionlint_catches_a_broken_workflow(tmp_path: Path) -> None:
    """The check can fail: an output the plan job never defines is an error, and so is a
    shell mistake in a run: block (shellcheck through actionlint)."""
    bad = tmp_path / "bad.yml"
    bad.write_text(RELEASE.read_text().replace("needs.plan.outputs.matrix", "needs.plan.outputs.matrx", 1)
                   .replace('bash ci/build-variant "$KERNEL"', "bash ci/build-variant $KERNEL", 1))
    proc = actionlint(bad)
    assert proc.returncode == 1
    assert "matrx" in proc.stdout and "SC2086" in proc.stdout


@pytest.mark.parametrize("script", CI_SCRIPTS, ids=[p.name for p in CI_SCRIPTS])
def test_ci_script_passes_shellcheck(script: Path) -> None:
    proc = subprocess.run([tool("shellcheck"), str(script)], text=True, capture_output=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_release_matrix_comes_from_the_builder() -> None:
    text = RELEASE.read_text()
    assert "fromJSON(needs.plan.outputs.matrix)" in text
    assert "fromJSON(needs.plan.outputs.device-matrix)" in text
    assert "bash ci/matrix" in text
    assert "bash ci/build-variant" in text and "bash ci/publish-artifacts" in text


def test_every_job_runs_on_a_hosted_runner_but_the_optional_device_tests() -> None:
    """Build jobs take their runner from the matrix (hosted labels only: test_ci_matrix);
    the only self-hosted work is the device tests, which never block a release."""
    jobs = release()["jobs"]
    for name, job in jobs.items():
        if name in ("build", "device-test"):
            assert job["runs-on"] == "${{ matrix.runs-on }}", name
        else:
            assert job["runs-on"].startswith(("ubuntu-", "macos-")), name
    device = jobs["device-test"]
    assert device["continue-on-error"] is True
    assert "device-count" in device["if"] and "!cancelled()" in device["if"]


def test_a_release_publishes_what_was_built_and_records_the_rest() -> None:
    """The publish job runs when some build or device jobs failed or never ran, reads the
    plan to say what is missing, and keeps only builds of the release on its tag, so a
    later run (schedule / only-missing, planned with --missing-on) can add the rest."""
    data = release()
    publish = data["jobs"]["publish"]
    assert set(publish["needs"]) == {"plan", "build", "device-test"}
    assert "!cancelled()" in publish["if"] and "needs.plan.result == 'success'" in publish["if"]
    script = runs(publish)
    assert "--plan plan.json" in script and "--results device-results" in script
    assert "--drop-stale" in script
    assert any(s.get("with", {}).get("name") == "release-report" for s in steps_of(publish))
    assert "schedule" in data["on"] and "only-missing" in data["on"]["workflow_dispatch"]["inputs"]
    assert "--missing-on" in runs(data["jobs"]["plan"])


def test_nix_is_installed_only_the_way_hosted_runners_allow_and_only_where_used() -> None:
    """No job installs system packages itself (ci/setup uses apt-get through sudo or brew
    as the runner allows); every ci/setup runs with KERNELHUB_SKIP_NIX unless a step
    before it installed Nix single-user (the runner's user must own the store: builds
    read its toolchain)."""
    data = release()
    assert data["env"]["KERNELHUB_SETUP_BROWSER"] == "0"  # a runner's chromium is a snap
    for name, job in data["jobs"].items():
        assert not re.search(r"\b(apt-get|sudo|brew)\b", runs(job)), name
        installs_nix = False
        for step in steps_of(job):
            if str(step.get("uses", "")).startswith("cachix/install-nix-action@"):
                assert step["with"]["install_options"] == "--no-daemon"
                assert "KERNELHUB_SKIP_NIX == '0'" in step["if"]
                installs_nix = True
            if step.get("run", "").strip() == "bash ci/setup":
                skip = job.get("env", {}).get("KERNELHUB_SKIP_NIX")
                assert skip == "1" or (installs_nix and "'0'" in str(skip)), name


def test_compile_only_toolkit_jobs_install_their_toolkit_from_packages() -> None:
    build = release()["jobs"]["build"]
    step = next(s for s in steps_of(build) if "ci/install-toolkit" in s.get("run", ""))
    assert "matrix.toolkit" in step["if"]
    assert build["env"]["TORCH_INDEX"] == "${{ matrix.torch-index }}"
