"""Load test of ``kernelhub serve`` on loopback: N concurrent cold loads and M concurrent
publishes against one ``kernelhub-serve`` process, bounded in time (it stops by itself).

Each load is what a fresh machine does: huggingface_hub's ``snapshot_download`` of one
variant (``allow_patterns=build/<variant>/*``) into an empty cache, then every file
checked against the variant's ``metadata.json`` digests (``kernelhub.formats.metadata.
verify_variant``) — a load with wrong bytes fails the run. Each publish is a
``create_commit`` adding its own file to branch ``v1`` with no parent pin, racing the
others; afterwards every publish's file must be on the branch and every commit in its
history (no commit lost). Loads and publishes run at the same time.

Prints p50/p99 latency per operation and throughput, the CPU and the server's settings.

    .venv/bin/python benchmarks/serve.py                 # 32 loads, 8 publishes, 16 at once
    .venv/bin/python benchmarks/serve.py --loads 200 --publishes 40 --concurrency 32

``--scaling`` instead runs 1, 16 and 64 concurrent cold loads against one serve process
directly, then through nginx (the configuration ``kernelhub_serve.nginx`` renders, the
system's nginx) in front of two serve processes over the same hub, and prints one table:
p50, p99, loads/s, CPU per load, the servers' peak RSS and how many requests reached serve
through nginx, and the 64-at-once ratio (issue 34's target:
nginx + 2 processes at least 3x one process). Each level starts with an empty nginx cache.

    .venv/bin/python benchmarks/serve.py --scaling
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import statistics
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor, as_completed, wait
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
    p.add_argument("--scaling", action="store_true",
                   help="1/16/64 concurrent cold loads, one process vs nginx + 2 processes")
    args = p.parse_args()
    if args.scaling:
        return scaling(args.size_mb, args.deadline)

    os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"  # read when huggingface_hub imports
    for var in ("HF_TOKEN", "HF_ENDPOINT"):
        os.environ.pop(var, None)
    from huggingface_hub import CommitOperationAdd, HfApi, snapshot_download
    from kernelhub.formats.metadata import verify_variant
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


def cpu_line() -> str:
    flags: set[str] = set()
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name":
                model = value.strip()
            elif key.strip() == "flags":
                flags = set(value.split())
    except OSError:
        pass
    shown = " ".join(f for f in ("avx2", "avx512f", "avx512_bf16", "avx512_vnni", "amx_tile")
                     if f in flags)
    return f"CPU: {model}, {os.cpu_count()} CPUs, {shown or 'no AVX flags read'}"


def tree_cpu_s(pids: list[int]) -> float:
    """CPU seconds (user + system) these processes and their children have used so far,
    exited children (serve's git subprocesses, once reaped) included."""
    total, seen, todo = 0, set(), list(pids)
    tick = os.sysconf("SC_CLK_TCK")
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        proc = Path(f"/proc/{pid}")
        try:
            fields = (proc / "stat").read_text().rsplit(")", 1)[1].split()
            total += sum(int(f) for f in fields[11:15])  # utime stime cutime cstime
            for task in (proc / "task").iterdir():
                todo += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            continue
    return total / tick


def children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def tree_rss_mib(pids: list[int]) -> float:
    """Peak RSS (VmHWM) of these processes and their children, in MiB."""
    total, seen, todo = 0, set(), list(pids)
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        proc = Path(f"/proc/{pid}")
        try:
            for line in (proc / "status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    total += int(line.split()[1])
            for task in (proc / "task").iterdir():
                todo += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            continue
    return total / 1024


def reached_serve(access_log: Path) -> int:
    """How many requests nginx passed on to a serve process (its access log names an
    upstream for those; a cache hit has none): the serve work a level left."""
    return sum(1 for line in access_log.read_text().splitlines()
               if not line.endswith("upstream=-"))


CLIENT_PROCESSES = 4
"""The loads of a level run in this many client processes (threads within each), so the
client's own GIL is not what the comparison measures."""


def _warm(_: int) -> None:
    import huggingface_hub  # noqa: F401  (imported once per client process, untimed)


def _load_batch(url: str, cache_root: str, indices: list[int], threads: int) -> list[float]:
    """One client process's share of a level: cold loads, ``threads`` at once."""
    from huggingface_hub import snapshot_download
    from kernelhub.formats.metadata import verify_variant

    def load(i: int) -> float:
        t0 = time.perf_counter()
        path = snapshot_download(REPO_ID, repo_type="kernel", endpoint=url,
                                 cache_dir=f"{cache_root}/{i}", token=False,
                                 allow_patterns=[f"build/{VARIANT}/*"])
        verify_variant(Path(path) / "build" / VARIANT)  # raises on any wrong byte
        return time.perf_counter() - t0

    with ThreadPoolExecutor(max_workers=threads) as pool:
        return list(pool.map(load, indices))


def scaling(size_mb: float, deadline: float) -> int:
    os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"
    for var in ("HF_TOKEN", "HF_ENDPOINT"):
        os.environ.pop(var, None)
    from huggingface_hub import HfApi
    from proxied import nginx_in_front
    from served import WRITE_TOKEN, serving_process, write_tokens_file

    levels = (1, 16, 64)
    rows = []
    with tempfile.TemporaryDirectory(prefix="kernelhub-serve-scaling-") as tmp:
        work = Path(tmp)
        make_variant(work / "variant", size_mb)
        tokens = write_tokens_file(work / "tokens.toml")
        serves: list = []
        with serving_process(work / "hub", tokens, work / "a.log", started=serves) as a, \
                serving_process(work / "hub", tokens, work / "b.log", started=serves) as b:
            api = HfApi(endpoint=a, token=WRITE_TOKEN)
            api.create_repo(REPO_ID, repo_type="kernel")
            api.upload_folder(folder_path=work / "variant", path_in_repo=f"build/{VARIANT}",
                              repo_id=REPO_ID, repo_type="kernel")
            run = 0

            def level(url: str, concurrency: int, servers: list[int]
                      ) -> tuple[list[float], float, float, float]:
                """Load times, seconds, and CPU seconds used by the servers (serve
                processes + nginx) and by the client processes."""
                nonlocal run
                run += 1
                loads = max(2 * concurrency, 8)
                procs = min(CLIENT_PROCESSES, concurrency)
                chunks = [list(range(loads))[k::procs] for k in range(procs)]
                client0 = children_cpu_s()
                with ProcessPoolExecutor(max_workers=procs) as pool:
                    list(pool.map(_warm, range(procs)))  # started before the clock
                    server0 = tree_cpu_s(servers)
                    t0 = time.perf_counter()
                    futures = [pool.submit(_load_batch, url, str(work / f"cache-{run}"), chunk,
                                           concurrency // procs) for chunk in chunks]
                    _, pending = wait(futures, timeout=deadline)
                    if pending:
                        raise SystemExit(f"FAILED: {len(pending)} client processes still "
                                         f"running after {deadline:.0f} s")
                    elapsed = time.perf_counter() - t0
                    server_cpu = tree_cpu_s(servers) - server0
                    times = [t for f in futures for t in f.result()]
                return times, elapsed, server_cpu, children_cpu_s() - client0

            for concurrency in levels:
                times, elapsed, server_cpu, client_cpu = level(a, concurrency, [serves[0].pid])
                rows.append(("1 serve, direct", concurrency, times, elapsed, server_cpu,
                             client_cpu, tree_rss_mib([serves[0].pid]), "all"))
            for concurrency in levels:
                proxies: list = []
                with nginx_in_front(work / f"nginx-{concurrency}", [a, b],
                                    started=proxies) as proxy:
                    times, elapsed, server_cpu, client_cpu = level(
                        proxy, concurrency, [p.pid for p in serves + proxies])
                    rss = tree_rss_mib([p.pid for p in serves])
                    nginx_rss = tree_rss_mib([p.pid for p in proxies])
                upstream = reached_serve(work / f"nginx-{concurrency}" / "nginx" / "access.log")
                rows.append((f"nginx + 2 serve (nginx {nginx_rss:.0f} MiB)", concurrency, times,
                             elapsed, server_cpu, client_cpu, rss,
                             f"{upstream} ({upstream / len(times):.2f}/load)"))

    print(f"kernelhub serve scaling — {cpu_line()}; loopback; cold loads (empty client "
          f"cache, snapshot_download + digest check) of one {size_mb:g} MiB variant, from "
          f"{CLIENT_PROCESSES} client processes")
    print("| setup | at once | loads | p50 ms | p99 ms | loads/s | server CPU ms/load | "
          "client CPU ms/load | serve peak RSS MiB | requests reaching serve |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    rate = {}
    for name, concurrency, times, elapsed, server_cpu, client_cpu, rss, upstream in rows:
        rate[(name.split(" (")[0], concurrency)] = len(times) / elapsed
        print(f"| {name} | {concurrency} | {len(times)} | {percentile(times, 50) * 1000:.0f} | "
              f"{percentile(times, 99) * 1000:.0f} | {len(times) / elapsed:.1f} | "
              f"{server_cpu / len(times) * 1000:.1f} | {client_cpu / len(times) * 1000:.1f} | "
              f"{rss:.0f} | {upstream} |")
    ratio = rate[("nginx + 2 serve", 64)] / rate[("1 serve, direct", 64)]
    print(f"64 at once: nginx + 2 serve = {ratio:.2f}x the loads/s of one serve process "
          "(target 3x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
