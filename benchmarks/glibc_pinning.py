"""What the manylinux_2_28 symbol pinning (kernelhub_builder/compile/portable.py) costs, measured here.

For one ATen kernel (activation, torch 2.13 CPU) and one stable-ABI kernel (rmsnorm), build
the variant twice from scratch — pinned (the default) and with ``KERNELHUB_HOST_GLIBC=1``
(this host's glibc symbol versions) — and report the build wall time, what ``builder check``
says about manylinux_2_28, and the kernel benchmark at one shape for both binaries,
interleaved so machine load hits both alike.

    .venv/bin/python benchmarks/glibc_pinning.py [--work DIR] [--rounds N]

Takes a few minutes (four compiles). Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
CASES = {
    "activation": ("torch213-cxx11-cpu-x86_64-linux",
                   ["--tokens", "2048", "--d", "4096", "--dtypes", "float32"]),
    "rmsnorm": ("torch-stable-abi213-cpu-x86_64-linux",
                ["--rows", "4096", "--hidden", "4096", "--dtypes", "float32"]),
}


def build(kernel: str, variant: str, out: Path, host: bool) -> tuple[float, str]:
    env = dict(os.environ)
    if host:
        env["KERNELHUB_HOST_GLIBC"] = "1"
    start = time.perf_counter()
    subprocess.run([str(BIN / "builder"), "--out", str(out), "build", kernel, "--variant",
                    variant, "--no-import-check"], cwd=REPO, env=env, check=True,
                   capture_output=True, text=True)
    seconds = time.perf_counter() - start
    check = subprocess.run([str(BIN / "builder"), "--out", str(out), "check", kernel,
                            "--no-import-check", "--abi", "manylinux_2_28"], cwd=REPO,
                           env=env, capture_output=True, text=True)
    needs = sorted(set(re.findall(r"@(GLIBC\w*_[\d.]+)", check.stdout)))
    return seconds, ("PASS" if check.returncode == 0 else "FAIL " + " ".join(needs))


def kernel_ms(kernel: str, variant_dir: Path, args: list[str]) -> float:
    proc = subprocess.run([str(BIN / "python"), str(REPO / "kernels-src" / kernel / "benchmarks"
                                                    / "timing.py"), str(variant_dir), *args],
                          cwd=REPO, check=True, capture_output=True, text=True)
    # The first timing line of each benchmark is the kernel's own time.
    line = next(ln for ln in proc.stdout.splitlines() if re.search(r"\d ms\s", ln))
    return float(re.search(r"([\d.]+) ms", line).group(1))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--work", type=Path, default=Path("/tmp/kernelhub-glibc-pinning"))
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    rows = []
    for kernel, (variant, bench_args) in CASES.items():
        result = {}
        for mode in ("pinned", "host"):
            out = args.work / mode
            seconds, verdict = build(kernel, variant, out, host=mode == "host")
            result[mode] = {"build": seconds, "check": verdict, "dir": out / kernel / variant,
                            "ms": []}
        for _ in range(args.rounds):
            for mode in ("pinned", "host"):
                result[mode]["ms"].append(kernel_ms(kernel, result[mode]["dir"], bench_args))
        for mode in ("pinned", "host"):
            r = result[mode]
            rows.append((kernel, variant, mode, f"{r['build']:.1f}", r["check"],
                         f"{min(r['ms']):.3f}", " ".join(f"{m:.3f}" for m in r["ms"])))
    print("| kernel | variant | glibc | build s | check --abi manylinux_2_28 | kernel ms (best) "
          "| all rounds |")
    print("|---|---|---|---|---|---|---|")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
