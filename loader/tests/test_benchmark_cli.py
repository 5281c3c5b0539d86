"""``kernelhub benchmark`` on a small real kernel: discovery, timing, verification, the
table, the JSON document, the PNG plot and publishing to the hub's benchmarks branch."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from kernelhub.benchmark.results import RESULTS_BRANCH, machine_slug
from kernelhub.cli import main
from kernelhub.hub.git import GitRepo
from kernelhub.system import detect_system
from kernelhub_builder.ship import LocalPublisher
from kh_doubles import make_variant

REPO = "kernels-community/scale"
HOST = "torch{}{}-cxx11-cpu-x86_64-linux".format(*detect_system("cpu").torch)

KERNEL = '''
import torch

def scale(out, x):
    torch.mul(x, 2, out=out)
    return out

def wrong(out, x):
    torch.mul(x, 3, out=out)
    return out
'''

SCRIPT = '''
import random
import torch
from kernelhub.benchmark import Benchmark


class Scale(Benchmark):
    seed = 7

    def setup(self):
        self.x = torch.randn(64, 256, device=self.device)
        self.out = torch.empty_like(self.x)
        self.draw = random.random()  # seeded: the same in every workload

    def benchmark_small(self):
        self.kernel.scale(self.out, self.x)

    def verify_small(self):
        return self.x * 2

    def setup_large(self):
        self.x = torch.randn(512, 1024, device=self.device)
        self.out = torch.empty_like(self.x)

    def benchmark_large(self):
        self.kernel.scale(self.out, self.x)

    def verify_large(self):
        return self.x * 2

    def benchmark_unverified(self):
        self.kernel.scale(self.out, self.x)
'''

WRONG = '''
import torch
from kernelhub.benchmark import Benchmark


class Wrong(Benchmark):
    def setup(self):
        self.x = torch.ones(4, 4)
        self.out = torch.empty(4, 4)

    def benchmark_ones(self):
        self.kernel.wrong(self.out, self.x)

    def verify_ones(self):
        return self.x * 2
'''


@pytest.fixture
def kernel_dir(tmp_path: Path) -> Path:
    """A kernel directory as a repository holds it: build/<variant>/ and benchmarks/."""
    root = tmp_path / "scale"
    make_variant(root / "build" / HOST, name="scale", init=KERNEL)
    (root / "benchmarks").mkdir()
    (root / "benchmarks" / "benchmark_scale.py").write_text(SCRIPT)
    (root / "benchmarks" / "benchmark.py").write_text("if __name__ == '__main__':\n    pass\n")
    return root


def test_local_kernel_table_json_and_plot(kernel_dir: Path, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "results"
    assert main(["benchmark", str(kernel_dir), "--iterations", "5", "--warmup", "1",
                 "--plots", str(out), "--json"]) == 0
    captured = capsys.readouterr()
    assert "benchmark.py: no Benchmark classes, skipped" in captured.err
    assert "benchmark_scale.py: Scale on cpu" in captured.err
    assert "AVX-512" in captured.err  # the machine's description
    table = captured.out.split("{", 1)[0]
    assert "workload" in table and "speedup" in table
    for line in ("Scale.large", "Scale.small", "Scale.unverified"):
        assert line in table
    assert "Scale.small " in table and " yes" in table
    doc = json.loads("{" + captured.out.split("{", 1)[1])
    assert doc["schema"] == "kernelhub-benchmark/1" and doc["variant"] == HOST
    rows = {r["workload"]: r for r in doc["results"]}
    assert rows["Scale.small"]["verified"] is True and "verified" not in rows["Scale.unverified"]
    assert rows["Scale.large"]["timingResults"]["iterations"] == 5
    assert rows["Scale.large"]["refTimingResults"]["mean_ms"] > 0
    assert doc["machineInfo"]["backend"] == "cpu" and doc["benchmarkScripts"] == [
        "benchmark.py", "benchmark_scale.py"]
    slug = f"scale-{HOST}"
    assert json.loads((out / f"{slug}.json").read_text()) == doc
    png = (out / f"{slug}.png").read_bytes()
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 5000


def test_a_kernel_that_disagrees_with_its_reference_fails(
        kernel_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (kernel_dir / "benchmarks" / "benchmark_scale.py").write_text(WRONG)
    assert main(["benchmark", str(kernel_dir), "--iterations", "2", "--plots",
                 str(tmp_path / "r")]) == 1
    captured = capsys.readouterr()
    assert "Wrong.ones: output does not match the reference: largest difference 1" in captured.out
    assert "output did not match the reference in Wrong.ones; nothing was published" in captured.err


def test_publish_commits_results_to_the_benchmarks_branch(
        kernel_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    hub = LocalPublisher(tmp_path / "hub")
    staging = kernel_dir / "build"
    hub.publish(REPO, "v1", {HOST: staging / HOST}, tag="v1.0.0", message="r")
    before = hub.list_refs(REPO)
    assert main(["benchmark", REPO, "--hub", str(hub.root), "--iterations", "2",
                 "--benchmarks", str(kernel_dir / "benchmarks"), "--publish",
                 "--plots", str(tmp_path / "r")]) == 0
    published = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert published["branch"] == RESULTS_BRANCH
    after = hub.list_refs(REPO)
    assert after.branches["v1"] == before.branches["v1"] and after.tags == before.tags
    repo = GitRepo(hub.repo_path(REPO))
    files = {e.path for e in repo.ls_tree(RESULTS_BRANCH, recursive=True)}
    commit = before.branches["v1"]
    doc = json.loads(repo.out("show", f"{RESULTS_BRANCH}:{published['published'][0]}"))
    base = f"results/{commit}/{HOST}/{machine_slug(doc['machineInfo'])}"
    assert files == {f"{base}.json", f"{base}.png"}
    assert doc["commit"] == commit and doc["revision"] == "v1" and doc["repoId"] == REPO


def test_benchmarks_published_next_to_the_builds_are_found(
        kernel_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # The ecosystem's repositories carry benchmarks/ at the root, next to build/.
    hub = LocalPublisher(tmp_path / "hub")
    hub.publish(REPO, "v1", {HOST: kernel_dir / "build" / HOST}, tag=None, message="r")
    repo = GitRepo(hub.repo_path(REPO))
    head = repo.resolve_commit("refs/heads/v1")
    assert head is not None
    from kernelhub.hub.git import IndexEntry, RefUpdate

    script = (kernel_dir / "benchmarks" / "benchmark_scale.py").read_bytes()
    tree = repo.write_tree(repo.tree_of(head), [], [
        IndexEntry("100644", repo.hash_blob(script), "benchmarks/benchmark_scale.py")])
    new = repo.commit_tree(tree, head, "benchmarks")
    assert repo.update_refs([RefUpdate("refs/heads/v1", new, head)]) is None
    assert main(["benchmark", REPO, "--hub", str(hub.root), "--iterations", "2",
                 "--no-plots"]) == 0
    assert f"benchmarks from {REPO} at {new[:12]}" in capsys.readouterr().err


def test_untrusted_repositories_and_missing_scripts(
        kernel_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    hub = LocalPublisher(tmp_path / "hub")
    hub.publish("someone/scale", "v1", {HOST: kernel_dir / "build" / HOST}, tag=None,
                message="r")
    assert main(["benchmark", "someone/scale", "--hub", str(hub.root), "--benchmarks",
                 str(kernel_dir / "benchmarks")]) == 1
    assert "organisation 'someone' is not trusted" in capsys.readouterr().err
    assert main(["benchmark", "someone/scale", "--hub", str(hub.root),
                 "--trust-remote-code"]) == 1
    assert "has no benchmarks/ at" in capsys.readouterr().err
