"""``kernelhub benchmark`` on this project's published kernels, the way the README says:
``kernelhub benchmark kernels-community/activation`` prints the machine and the table and
writes the plot; and a benchmark class written against the ecosystem's own ``Benchmark``
(kernels 0.19.1) runs unchanged."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from e2e import REPO, Workspace, run
from reference_loader import install_reference_loader

KERNELHUB = str(REPO / ".venv/bin/kernelhub")
FAST = ["--iterations", "3", "--warmup", "1"]


def test_activation_table_and_plots(published: Workspace, tmp_path: Path) -> None:
    proc = run([KERNELHUB, "benchmark", "kernels-community/activation", *FAST,
                "--plots", str(tmp_path)], env=published.env())
    assert "benchmarks from" in proc.stderr and "kernels-src/activation/benchmarks" in proc.stderr
    assert "AVX-512" in proc.stderr  # the machine's description
    for workload in ("SiluAndMul.decode_fp32", "SiluAndMul.prefill_bf16",
                     "GeluTanhAndMul.prefill_fp32", "SiluAndMulLayer.prefill_bf16"):
        row = next(line for line in proc.stdout.splitlines() if line.startswith(workload))
        assert row.rstrip().endswith("yes"), row  # verified against PyTorch
    (doc_path,) = tmp_path.glob("kernels-community--activation-*.json")
    doc = json.loads(doc_path.read_text())
    assert doc["repoId"] == "kernels-community/activation" and len(doc["commit"]) == 40
    assert all(r["verified"] for r in doc["results"])
    assert doc_path.with_suffix(".png").read_bytes().startswith(b"\x89PNG")


@pytest.mark.parametrize("kernel", ["rmsnorm", "layernorm", "rotary", "flash-attn2",
                                    "liger-kernels"])
def test_every_cpu_kernel_s_benchmarks_verify(published: Workspace, tmp_path: Path,
                                              kernel: str) -> None:
    proc = run([KERNELHUB, "benchmark", f"kernels-community/{kernel}", "--iterations", "1",
                "--warmup", "0", "--no-plots", "--json"], env=published.env())
    doc = json.loads(proc.stdout[proc.stdout.index("{"):])
    assert doc["results"] and all(r["verified"] for r in doc["results"]), proc.stdout
    # Every benchmark*.py holds Benchmark classes: the ecosystem's `kernels benchmark`
    # raises on one that does not (our timing scripts are timing.py).
    assert "no Benchmark classes" not in proc.stderr, proc.stderr


ECOSYSTEM_SCRIPT = '''
import torch
import torch.nn.functional as F
from kernels.benchmark import Benchmark   # the ecosystem's own base class


class SiluAndMulBenchmark(Benchmark):
    seed = 42

    def setup(self):
        self.x = torch.rand(16, 2048, device=self.device) * 2 - 1
        self.out = torch.empty(16, 1024, device=self.device)

    def benchmark_small(self):
        self.kernel.silu_and_mul(self.out, self.x)

    def verify_small(self):
        return F.silu(self.x[..., :1024]) * self.x[..., 1024:]
'''


def test_a_class_written_for_the_ecosystems_runner_runs_unchanged(
        published: Workspace, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    reference = install_reference_loader(tmp_path_factory.mktemp("kernels-0.19.1"), "0.19.1")
    scripts = tmp_path / "benchmarks"
    scripts.mkdir()
    (scripts / "benchmark_ecosystem.py").write_text(ECOSYSTEM_SCRIPT)
    env = published.env(PYTHONPATH=os.pathsep.join(
        p for p in (str(reference), os.environ.get("PYTHONPATH")) if p))
    proc = run([KERNELHUB, "benchmark", "kernels-community/activation", *FAST, "--benchmarks",
                str(scripts), "--no-plots"], env=env)
    assert "SiluAndMulBenchmark on cpu" in proc.stderr
    row = next(line for line in proc.stdout.splitlines()
               if line.startswith("SiluAndMulBenchmark.small"))
    assert row.rstrip().endswith("yes"), row
