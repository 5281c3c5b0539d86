"""The jobs of .github/workflows/release.yml, rehearsed on this machine with the very
scripts their steps run, in the order the workflow runs them.

* plan: ``ci/matrix`` writes the build and device-test matrices to ``$GITHUB_OUTPUT``.
* build (one per entry, each in its own clone at its own path, as separate runners):
  ``ci/build-variant``; the compile-only CUDA job first runs ``ci/install-toolkit`` and
  builds with the toolkit it laid out from NVIDIA's wheels (no device here, none needed).
  One planned job "fails" (uploads nothing).
* device-test: ``ci/test-variant`` against the uploaded artifacts: the pure-Python CUDA
  variant's tests pass; the cu130 build's cannot without a GPU (none here), so it fails.
* publish: ``ci/publish-artifacts`` with the plan and the device results publishes what
  was built and passed, keeps the failed one out, and records both missing variants.
* a later run: ``ci/matrix --missing-on HUB`` plans what the release tags lack (and
  nothing they hold); building and publishing triton-activation's adds it to its tag.

Lean on purpose (CI has 2 cores): rmsnorm's stable-ABI CPU variant (compiled and tested)
and cu130 variant (compiled only; where the torch 2.14 environment is the CUDA 13.0
build, as ci/setup-nix makes it), and triton-activation's two pure-Python variants.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from e2e import BIN, RELEASES, REPO, Workspace, run
from kernelhub.formats.metadata import read_metadata
from kernelhub.formats.variants import parse_variant
from kernelhub.hub.local import LocalHub
from kernelhub_builder.manifest import VariantNames
from kernelhub_builder.plan.toolchains import detect_host
from kernelhub_builder.ship.names import published_names

pytestmark = pytest.mark.slow

KERNELS = ("rmsnorm", "triton-activation")
SCRIPTS = ("matrix", "install-toolkit", "build-variant", "test-variant", "publish-artifacts")
"""Every ci/ script release.yml runs besides ci/setup (which ci/test itself runs)."""


def cpu_variant() -> str:
    return f"torch-stable-abi213-cpu-{detect_host().system}"


def cuda_variant() -> str:
    return f"torch-stable-abi213-cu130-{detect_host().system}"


def make_origin(root: Path) -> Path:
    """A repository holding this checkout's kernels and CI scripts, committed once."""
    origin = root / "origin"
    origin.mkdir()
    for rel in ("kernels.toml", "kernels-src", "ci"):
        src = REPO / rel
        if src.is_dir():
            shutil.copytree(src, origin / rel, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(src, origin / rel)
    git = ["git", "-C", str(origin), "-c", "user.name=ci", "-c", "user.email=ci@localhost"]
    run([*git, "init", "-q", "-b", "main"])
    run([*git, "add", "-A"])
    run([*git, "commit", "-q", "-m", "release"])
    return origin


class Runner:
    """One fresh runner: a clone of the origin (actions/checkout) and the Actions files."""

    def __init__(self, origin: Path, root: Path, ws: Workspace, **env: str) -> None:
        self.tree = root / "work" / "kernelhub"
        run(["git", "clone", "-q", str(origin), str(self.tree)])
        self.files = root / "actions"
        self.files.mkdir()
        self.env = ws.env(BUILDER=str(BIN / "builder"), PYTHON=str(BIN / "python"),
                          KERNELHUB_CI_NIX="0", GITHUB_ACTIONS="true",
                          GITHUB_OUTPUT=str(self.files / "output"),
                          GITHUB_ENV=str(self.files / "env"),
                          GITHUB_PATH=str(self.files / "path"),
                          GITHUB_STEP_SUMMARY=str(self.files / "summary"), **env)

    def step(self, script: str, *args: str, check: bool = True
             ) -> subprocess.CompletedProcess[str]:
        assert script in SCRIPTS
        return run(["bash", str(self.tree / "ci" / script), *args], env=self.env,
                   cwd=self.tree, check=check)

    def take_env_files(self) -> None:
        """What Actions does between steps with $GITHUB_ENV and $GITHUB_PATH."""
        for line in (self.files / "env").read_text().splitlines():
            key, _, value = line.partition("=")
            self.env[key] = value
        for directory in (self.files / "path").read_text().splitlines():
            self.env["PATH"] = f"{directory}:{self.env['PATH']}"

    def outputs(self) -> dict[str, object]:
        return {key: json.loads(value) for key, _, value in
                (line.partition("=") for line in (self.files / "output").read_text().splitlines())}


def upload(runner: Runner, artifacts: Path, name: str) -> None:
    """upload-artifact of dist/, then download-artifact with a pattern: one dir each."""
    shutil.copytree(runner.tree / "dist", artifacts / name)


def cuda_build_possible() -> str | None:
    """Why the compile-only CUDA job cannot be rehearsed here, or None."""
    from kernelhub_builder.manifest import load_project
    from kernelhub_builder.plan.torch_env import ensure_torch_env

    env = ensure_torch_env("2.14", load_project(REPO).torch_pins.get("2.14"))
    if not (env.cuda or "").startswith("13.0"):
        return "no torch 2.14 environment built for CUDA 13.0 here (ci/setup-nix makes one)"
    return None


def gpu_here() -> bool:
    smi = shutil.which("nvidia-smi")
    return smi is not None and subprocess.run([smi, "-L"], capture_output=True).returncode == 0


def test_release_jobs_publish_what_was_built_record_the_rest_and_a_later_run_adds_it(
    tmp_path: Path,
) -> None:
    ws = Workspace(root=tmp_path, out=tmp_path / "unused", hub=tmp_path / "hub")
    origin = make_origin(tmp_path)
    cuda_skip = cuda_build_possible()
    cpu, cuda = ("rmsnorm", cpu_variant()), ("rmsnorm", cuda_variant())
    triton_cuda, triton_xpu = ("triton-activation", "torch-cuda"), ("triton-activation", "torch-xpu")

    # -- plan ------------------------------------------------------------------------
    plan_runner = Runner(origin, tmp_path / "plan", ws)
    plan_runner.step("matrix", *KERNELS, "--devices", "nvidia-gpu")
    outputs = plan_runner.outputs()
    jobs = {(j["kernel"], j["variant"]): j for j in outputs["matrix"]["include"]}  # type: ignore[index]
    assert outputs["count"] == len(jobs)
    device_jobs = {(t["kernel"], t["variant"]) for t in outputs["device-matrix"]["include"]}  # type: ignore[index]
    assert {cuda, triton_cuda} <= device_jobs and cpu not in device_jobs
    rehearsed = [cpu, triton_cuda, triton_xpu, *([cuda] if cuda_skip is None else [])]
    plan = tmp_path / "plan.json"  # the publish job's copy of the plan, for these jobs
    plan.write_text(json.dumps({"include": [jobs[key] for key in rehearsed]}))

    # -- build jobs, each on its own runner ----------------------------------------------
    artifacts = tmp_path / "artifacts"
    for n, (kernel, variant) in enumerate(rehearsed):
        job = jobs[kernel, variant]
        assert job["runs-on"][0] in ("ubuntu-24.04", "ubuntu-24.04-arm"), job  # hosted
        if (kernel, variant) == triton_xpu:
            continue  # this build job failed: it uploads nothing
        runner = Runner(origin, tmp_path / f"runner-{n}", ws)
        if job["toolkit"]:  # compile-only: the toolkit from NVIDIA's wheels, no device
            said = runner.step("install-toolkit", job["toolkit"], str(tmp_path / "toolkits"))
            runner.take_env_files()
            assert runner.env["CUDA_HOME"].startswith(str(tmp_path / "toolkits"))
            assert f"CUDA_HOME={runner.env['CUDA_HOME']}" in said.stdout
        runner.step("build-variant", kernel, variant, "--dist", "dist",
                    *(["--test"] if job["test"] else []))
        upload(runner, artifacts, job["artifact"])
        staged = artifacts / job["artifact"] / kernel / variant
        assert read_metadata(staged).release == RELEASES[kernel]

    # -- device tests: what ran says pass or fail; cu130's cannot pass without a GPU ------
    results = tmp_path / "device-results"
    tester = Runner(origin, tmp_path / "device-runner", ws)
    expected = {triton_cuda: True, **({cuda: gpu_here()} if cuda_skip is None else {})}
    for (kernel, variant), passes in expected.items():
        artifact = artifacts / jobs[kernel, variant]["artifact"]
        result = results / f"{jobs[kernel, variant]['artifact']}.json"
        proc = tester.step("test-variant", kernel, variant, str(artifact), str(result),
                           check=False)
        assert (proc.returncode == 0) is passes, proc.stdout + proc.stderr
        assert json.loads(result.read_text())["passed"] is passes

    # -- publish ---------------------------------------------------------------------
    publisher = Runner(origin, tmp_path / "publish-runner", ws)
    report = tmp_path / "report"
    proc = publisher.step("publish-artifacts", str(artifacts), str(ws.hub), "--plan", str(plan),
                          "--results", str(results), "--report", str(report), "--drop-stale")
    record = json.loads((report / "release-report.json").read_text())
    missing = {(m["kernel"], m["variant"]): m["why"] for m in record["missing"]}
    failed = [key for key, passes in expected.items() if not passes]
    assert missing == {triton_xpu: "no build: the build job failed or did not run",
                       **dict.fromkeys(failed, "its device test failed")}
    for kernel, variant in failed:
        assert f"not published: {kernel} {variant} (its device test failed)" in proc.stdout
    assert "::warning title=missing from the release::triton-activation torch-xpu" in proc.stdout
    assert f"{len(missing)} missing" in (publisher.files / "summary").read_text()
    hub = LocalHub(ws.hub)
    published = [key for key in rehearsed if key not in missing]
    for repo, kernel in (("kernels-community/rmsnorm", "rmsnorm"),
                         ("kernels-community/triton-activation", "triton-activation")):
        tag = hub.list_refs(repo).tags[f"v{RELEASES[kernel]}"]
        # Each build under both generations of names (the same bytes; builder publish).
        assert hub.list_variants(repo, tag) == sorted(
            n for k, v in published if k == kernel
            for n in published_names(parse_variant(v), VariantNames.BOTH))
    assert [(p["kernel"], p["variant"]) for p in record["published"]] == sorted(published)

    # -- a later run plans exactly what the release tags lack, and adds it -----------------
    later = Runner(origin, tmp_path / "later-plan", ws)
    later.step("matrix", *KERNELS, "--missing-on", str(ws.hub))
    planned = {(j["kernel"], j["variant"]) for j in later.outputs()["matrix"]["include"]}  # type: ignore[index]
    assert set(missing) <= planned and not set(published) & planned
    runner = Runner(origin, tmp_path / "later-runner", ws)  # triton's missing build only
    runner.step("build-variant", *triton_xpu, "--dist", "dist")
    second = tmp_path / "artifacts-2"
    upload(runner, second, jobs[triton_xpu]["artifact"])
    plan_2 = tmp_path / "plan-2.json"
    plan_2.write_text(json.dumps({"include": [jobs[triton_xpu]]}))
    before = hub.list_refs("kernels-community/rmsnorm")
    Runner(origin, tmp_path / "later-publish", ws).step(
        "publish-artifacts", str(second), str(ws.hub), "--plan", str(plan_2),
        "--report", str(tmp_path / "report-2"), "--drop-stale")
    assert json.loads((tmp_path / "report-2" / "release-report.json").read_text())["missing"] == []
    triton = hub.list_refs("kernels-community/triton-activation")
    assert hub.list_variants("kernels-community/triton-activation",
                             triton.tags[f"v{RELEASES['triton-activation']}"]) == [
                                 "torch-cuda", "torch-xpu"]
    assert hub.list_refs("kernels-community/rmsnorm") == before  # untouched
    if cuda_skip is not None:
        pytest.skip(f"rehearsed all but the compile-only CUDA job: {cuda_skip}")


def test_every_script_the_workflow_runs_is_rehearsed() -> None:
    text = (REPO / ".github" / "workflows" / "release.yml").read_text()
    called = set(re.findall(r"\bbash ci/([\w-]+)", text))
    assert called - {"setup"} == set(SCRIPTS)
    assert os.access(REPO / "ci" / "install-toolkit", os.X_OK)


@pytest.mark.parametrize(("toolkit", "said"), [
    ("cuda-13", "is not <backend>-<major>.<minor>"),
    ("cuda-13.0.1", "is not <backend>-<major>.<minor>"),
    ("tpu-1.0", "unknown toolkit 'tpu-1.0'"),
])
def test_install_toolkit_refuses_what_the_matrix_never_says(
    tmp_path: Path, toolkit: str, said: str
) -> None:
    proc = run(["bash", str(REPO / "ci" / "install-toolkit"), toolkit, str(tmp_path)],
               check=False)
    assert proc.returncode == 2 and said in proc.stderr
    assert not any(tmp_path.iterdir())  # nothing installed
