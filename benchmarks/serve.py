"""Load test of ``kernelhub serve`` on loopback: N concurrent cold loads and M concurrent
publishes against one ``kernelhub-serve`` process, bounded in time (it stops by itself).

Each load is what a fresh machine does: huggingface_hub's ``snapshot_download`` of one
variant (``allow_patterns=build/<variant>/*``) into an empty cache, then every file
checked against the variant's ``metadata.json`` digests (``kernelhub.metadata.
verify_variant``) — a load with wrong bytes fails the run. Each publish is a
``create_commit`` adding its own file to branch ``v1`` with no parent pin, racing the
others; afterwards every publish's file must be on the branch and every commit in its
history (no commit lost). Loads and publishes run at the same time.

Prints p50/p99 latency per operation and throughput, the CPU and the server's settings.

    .venv/bin/python benchmarks/serve.py                 # 32 loads, 8 publishes, 16 at once
    .venv/bin/python benchmarks/serve.py --loads 200 --publishes 40 --concurrency 32
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor, as_completed, wait
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO_ROOT / "tests/serve"), str(REPO_ROOT / "tests"),
                str(REPO_ROOT / "loader/tests")]

REPO_ID = "acme/loadtest"
VARIANT = "torch213-cxx11-cpu-x86_64-linux"


def make_variant(dest: Path, size_mb: float) -> None:
    """A variant of a compiled kernel's shape: a library of ``size_mb`` MiB, Python files,
    metadata.json with the digests loaders check."""
    from kh_doubles import make_variant as write_variant

    dest.mkdir(parents=True)
    (dest / "_loadtest_cpu_0123456789.abi3.so").write_bytes(os.urandom(int(size_mb * 2**20)))
    write_variant(dest, name="loadtest", files={"_ops.py": "ops = None\n",
                                               "layers/__init__.py": "class Layer: ...\n"})


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--loads", type=int, default=32)
    p.add_argument("--publishes", type=int, default=8)
    p.add_argument("--concurrency", type=int, default=16)
    p.add_argument("--size-mb", type=float, default=4.0)
    p.add_argument("--deadline", type=float, default=300.0,
                   help="seconds after which the run stops and fails (default 300)")
    args = p.parse_args()

    os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"  # read when huggingface_hub imports
    for var in ("HF_TOKEN", "HF_ENDPOINT"):
        os.environ.pop(var, None)
    from huggingface_hub import CommitOperationAdd, HfApi, snapshot_download
    from kernelhub.metadata import verify_variant
    from served import WRITE_TOKEN, serving_process, write_tokens_file

    with tempfile.TemporaryDirectory(prefix="kernelhub-serve-load-") as tmp:
        work = Path(tmp)
        variant = work / "variant"
        make_variant(variant, args.size_mb)
        tokens = write_tokens_file(work / "tokens.toml")
        with serving_process(work / "hub", tokens, work / "serve.log") as url:
            api = HfApi(endpoint=url, token=WRITE_TOKEN)
            api.create_repo(REPO_ID, repo_type="kernel")
            api.create_branch(REPO_ID, branch="v1", repo_type="kernel")
            api.upload_folder(folder_path=variant, path_in_repo=f"build/{VARIANT}",
                              repo_id=REPO_ID, repo_type="kernel", revision="v1")

            def load(i: int) -> float:
                t0 = time.perf_counter()
                path = snapshot_download(REPO_ID, repo_type="kernel", revision="v1",
                                         endpoint=url, cache_dir=work / f"cache-{i}",
                                         allow_patterns=[f"build/{VARIANT}/*"], token=False)
                verify_variant(Path(path) / "build" / VARIANT)  # raises on any wrong byte
                return time.perf_counter() - t0

            def publish(i: int) -> float:
                t0 = time.perf_counter()
                HfApi(endpoint=url, token=WRITE_TOKEN).create_commit(
                    REPO_ID, [CommitOperationAdd(f"published/{i}.txt", f"{i}\n".encode())],
                    commit_message=f"load test publish {i}", repo_type="kernel", revision="v1")
                return time.perf_counter() - t0

            t_start = time.perf_counter()
            with ThreadPoolExecutor(max_workers=args.concurrency) as pool:
                jobs = {pool.submit(load, i): "load" for i in range(args.loads)}
                jobs.update({pool.submit(publish, i): "publish" for i in range(args.publishes)})
                done, pending = wait(jobs, timeout=args.deadline)
                for job in pending:
                    job.cancel()
                if pending:
                    print(f"FAILED: {len(pending)} operations still running after "
                          f"{args.deadline:.0f} s; stopped", file=sys.stderr)
                    return 1
                times: dict[str, list[float]] = {"load": [], "publish": []}
                for job in as_completed(done):
                    times[jobs[job]].append(job.result())  # re-raises a failed load/publish
            elapsed = time.perf_counter() - t_start

            files = {f.path for f in api.list_repo_tree(REPO_ID, "published", repo_type="kernel",
                                                         revision="v1")}
            titles = {c.title for c in api.list_repo_commits(REPO_ID, repo_type="kernel",
                                                            revision="v1")}
            lost = [i for i in range(args.publishes)
                    if f"published/{i}.txt" not in files or f"load test publish {i}" not in titles]
            if lost:
                print(f"FAILED: publishes {lost} are missing from v1", file=sys.stderr)
                return 1

    mb = args.loads * args.size_mb
    print(f"kernelhub serve load test — {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} CPUs, one kernelhub-serve process (uvicorn), loopback")
    print(f"  {args.loads} cold loads of a {args.size_mb:g} MiB variant + {args.publishes} "
          f"publishes, {args.concurrency} at once, in {elapsed:.2f} s")
    for kind, values in times.items():
        if values:
            print(f"  {kind:8s} n={len(values):4d}  p50 {percentile(values, 50) * 1000:8.1f} ms  "
                  f"p99 {percentile(values, 99) * 1000:8.1f} ms  "
                  f"mean {statistics.fmean(values) * 1000:8.1f} ms")
    print(f"  throughput: {(args.loads + args.publishes) / elapsed:.1f} operations/s, "
          f"{mb / elapsed:.1f} MiB/s of verified variant bytes")
    print(f"  every load verified against metadata.json digests; {args.publishes} of "
          f"{args.publishes} publishes on v1 (no commit lost)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
