"""A hub worth looking at, for the page tests: one kernel with variants across the matrix,
a signed release, symbols.json and published benchmark results (in the shape
:mod:`kernelhub_serve.bench_results` reads), made with the real publisher."""

from __future__ import annotations

import json
from pathlib import Path

from kernelhub.release_manifest import NAMESPACE
from kh_doubles import make_variant, new_signing_key

REPO_ID = "acme/activation"
VARIANTS = ["torch213-cxx11-cpu-x86_64-linux", "torch214-cxx11-cpu-x86_64-linux",
            "torch213-cxx11-cu130-x86_64-linux", "torch-stable-abi213-cpu-aarch64-linux",
            "torch213-metal-aarch64-darwin", "torch-cuda", "torch-universal"]
SYMBOLS = {"schema_version": 1,
           "functions": [{"name": "silu_and_mul"}, {"name": "gelu_and_mul"}],
           "layers": [{"name": "SiluAndMul", "attributes": {"has_backward": False,
                                                            "can_torch_compile": True}}]}


def benchmark_result(machine: str, scale: float) -> dict[str, object]:
    """One run in the ecosystem's ``BenchmarkResult.to_payload`` shape."""
    return {
        "results": [{"workload": f"SiluAndMul.tokens_{n}",
                     "timingResults": {"mean_ms": scale * n / 64, "std_ms": scale * n / 2000,
                                       "min_ms": 0.0, "max_ms": 0.0, "iterations": 100,
                                       "ref_mean_ms": 1.8 * scale * n / 64},
                     "verified": True} for n in (1, 32, 512, 2048)],
        "machineInfo": {"gpu": "N/A", "backend": "cpu", "pytorchVersion": "2.13.0",
                        "os": "Linux", "cpu": machine},
        "kernelCommitSha": "0" * 40, "benchmarkScriptPath": "benchmarks/benchmark.py",
    }


def publish_showcase(hub: Path, work: Path) -> str:
    from kernelhub_builder.ship import LocalPublisher

    key = new_signing_key(work / "signing-key")
    variants = {}
    for name in VARIANTS:
        variants[name] = work / "variants" / name
        make_variant(variants[name], name="activation",
                     files={"symbols.json": json.dumps(SYMBOLS)} if "cpu" in name else None)
    publisher = LocalPublisher(hub)
    result = publisher.publish(REPO_ID, "v1", variants, tag="v1.0.0", message="release 1.0.0",
                               sign=lambda data: key.sign(data, NAMESPACE))
    return str(result.commit)


def benchmark_files(work: Path) -> Path:
    folder = work / "bench"
    (folder / "benchmarks/results").mkdir(parents=True)
    for i, machine in enumerate(("Intel Xeon (AVX-512)", "AMD EPYC")):
        (folder / f"benchmarks/results/run-{i}.json").write_text(
            json.dumps(benchmark_result(machine, 1.0 + i / 2)))
    return folder
