"""A hub worth looking at, for the page tests: one kernel with variants across the matrix,
a signed release, symbols.json, benchmark classes next to the builds, and benchmark
results as they reach a hub — a run of ``kernelhub benchmark --publish`` made through the
served hub's Hub API, and the ecosystem's payload committed under ``benchmarks/results/``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from kernelhub.formats.release_manifest import NAMESPACE
from kh_doubles import make_variant

REPO_ID = "acme/activation"
VARIANTS = ["torch213-cxx11-cpu-x86_64-linux", "torch214-cxx11-cpu-x86_64-linux",
            "torch213-cxx11-cu130-x86_64-linux", "torch-stable-abi213-cpu-aarch64-linux",
            "torch213-metal-aarch64-darwin", "torch-cuda", "torch-universal"]
SYMBOLS = {"schema_version": 1,
           "functions": [{"name": "silu_and_mul"}, {"name": "gelu_and_mul"}],
           "layers": [{"name": "SiluAndMul", "attributes": {"has_backward": False,
                                                            "can_torch_compile": True}}]}

KERNEL = '''
import torch
import torch.nn.functional as F


def silu_and_mul(out, x):
    d = x.shape[-1] // 2
    torch.mul(F.silu(x[..., :d]), x[..., d:], out=out)
    return out
'''

BENCHMARK = '''
import torch
import torch.nn.functional as F
from kernelhub.benchmark import Benchmark


class SiluAndMul(Benchmark):
    seed = 0

    def _make(self, tokens):
        self.x = torch.randn(tokens, 2048, device=self.device)
        self.out = torch.empty(tokens, 1024, device=self.device)

    def setup_tokens_1(self):
        self._make(1)

    def benchmark_tokens_1(self):
        self.kernel.silu_and_mul(self.out, self.x)

    def verify_tokens_1(self):
        return F.silu(self.x[:, :1024]) * self.x[:, 1024:]

    def setup_tokens_256(self):
        self._make(256)

    def benchmark_tokens_256(self):
        self.kernel.silu_and_mul(self.out, self.x)

    def verify_tokens_256(self):
        return F.silu(self.x[:, :1024]) * self.x[:, 1024:]
'''


def ecosystem_payload(machine: str, scale: float) -> dict[str, object]:
    """A run in the shape of the ecosystem's ``BenchmarkResult.to_payload`` (what
    ``kernels benchmark --output`` writes; its ``--upload`` posts the same to the public
    Hub instead of committing it)."""
    return {
        "results": [{"workload": f"SiluAndMul.tokens_{n}",
                     "timingResults": {"mean_ms": scale * n / 64, "std_ms": scale * n / 2000,
                                       "min_ms": 0.9 * scale * n / 64,
                                       "max_ms": 1.2 * scale * n / 64, "q1_ms": 0.0,
                                       "q3_ms": 0.0, "iqr_ms": 0.0, "outliers": 0,
                                       "iterations": 100},
                     "verified": True} for n in (1, 32, 512, 2048)],
        "machineInfo": {"gpu": "N/A", "backend": "cpu", "pytorchVersion": "2.13.0",
                        "os": "Linux", "cpu": machine},
        "kernelCommitSha": "0" * 40, "benchmarkScriptPath": "benchmarks",
    }


def publish_showcase(hub: Path, work: Path) -> str:
    from kernelhub_builder.ship import LocalPublisher
    from kh_doubles import new_signing_key

    key = new_signing_key(work / "signing-key")
    variants = {}
    for name in VARIANTS:
        variants[name] = work / "variants" / name
        make_variant(variants[name], name="activation", init=KERNEL,
                     files={"symbols.json": json.dumps(SYMBOLS)} if "cpu" in name else None)
    publisher = LocalPublisher(hub)
    result = publisher.publish(REPO_ID, "v1", variants, tag="v1.0.0", message="release 1.0.0",
                               sign=lambda data: key.sign(data, NAMESPACE))
    return str(result.commit)


def repository_files(work: Path) -> Path:
    """What the kernel's author commits next to ``build/``: the benchmark classes, and a
    run in the ecosystem's shape under ``benchmarks/results/``."""
    folder = work / "repository"
    (folder / "benchmarks/results").mkdir(parents=True)
    (folder / "benchmarks/benchmark.py").write_text(BENCHMARK)
    (folder / "benchmarks/results/amd-epyc.json").write_text(
        json.dumps(ecosystem_payload("AMD EPYC 9654", 1.5)))
    return folder


def benchmark_and_publish(endpoint: str, token: str, work: Path) -> dict[str, object]:
    """``kernelhub benchmark REPO --publish`` as a user runs it, against the served hub:
    it loads the variant for this machine over the Hub API, runs the repository's classes
    and commits the results to the ``benchmarks`` branch through the same API. Returns
    what it printed about the publish."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "KERNELHUB_"))}
    env.update(HF_TOKEN=token, HF_HOME=str(work / "hf-home"), NO_PROXY="127.0.0.1",
               KERNELHUB_CACHE=str(work / "bench-cache"), HF_HUB_DISABLE_PROGRESS_BARS="1")
    proc = subprocess.run(
        [str(Path(sys.executable).parent / "kernelhub"), "benchmark", REPO_ID, "--hub", endpoint,
         "--trust-remote-code", "--iterations", "5", "--warmup", "1", "--publish",
         "--plots", str(work / "bench-out")],
        env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])
