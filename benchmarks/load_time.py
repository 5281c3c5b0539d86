"""How long does loading a kernel take, and does a warm load touch the network?

Our loader (kernelhub) against the ecosystem's reference loader (Hugging Face ``kernels``),
same kernel, same machine, same run. Every load happens in a fresh process; the number
reported is the median time of the load call alone (after ``import torch`` and after
importing the loader, whose import time is a separate column), and every HTTP request
reaching a hub server is counted: olah (a Hub-API mirror of the LocalHub) and
``kernelhub serve`` (the same LocalHub behind our own Hub-API server), each behind a
counting proxy.

    .venv/bin/python benchmarks/load_time.py --runs 5   # builds + publishes activation
    .venv/bin/python benchmarks/load_time.py --hub PATH # a LocalHub that already has it
    .venv/bin/python benchmarks/load_time.py --only e,f,h,i,i0,se,sf,sh,si,si0  # Hub-API rows

The reference is ``kernels`` 0.19.1 (what users install today; ``--reference-version``
picks another). Its "load ms" excludes importing huggingface_hub (``import kernels`` does
that), ours includes it when the load is the first to talk to a server: compare
"import+load" for the whole cost a process pays. Rows i and si are inside the refs TTL
(60 s by default) only while their six processes take under a minute together.

Scenarios:
  a  kernelhub, LocalHub, cold cache      resolve + fetch (git) + verify + import
  b  kernelhub, LocalHub, warm, version=1 one `git for-each-ref`, no fetch
  c  kernelhub, LocalHub, warm, pinned sha no hub call at all
  d  kernelhub, warm, KERNELHUB_OFFLINE=1 versions resolved from the cache
  e  kernels (reference) via olah, cold
  f  kernels (reference) via olah, warm, version=1
  g  kernels (reference), warm, HF_HUB_OFFLINE=1, pinned sha (version=1 is also tried, g1)
  h  kernelhub via olah (HfHub), cold     the same server the reference loader uses
  i  kernelhub via olah (HfHub), warm, version=1   refs seen within KERNELHUB_REFS_TTL
  i0 kernelhub via olah, warm, version=1, KERNELHUB_REFS_TTL=0   refs asked again
  i1 kernelhub via olah, warm, KERNELHUB_OFFLINE=1
  i2 kernelhub via olah, warm, pinned sha       no request, no huggingface_hub import
  i3 kernelhub via olah, warm, locked           load_locked_kernel with a kernels.lock
  c1 kernelhub LocalHub, warm, locked
  se, sf, sh, si, si0   e, f, h, i, i0 through ``kernelhub serve`` instead of olah

The reference's offline mode asks huggingface_hub for the repository's whole ``build/``
snapshot, which huggingface_hub (>= 2, with its cached tree listing) refuses as incomplete
when only this system's variant is there — which is all its ``get_kernel`` downloads. So
g and g1 read a cache prepared the way its offline mode needs (``snapshot_download`` of
``build/*`` at the commit, what its download of all variants does), not f's. g1 still
fails: offline it resolves ``version=N`` from ``refs/v<N>`` in that cache, which its own
downloads (always by commit) never write; the table says so in one line.

Also reported: ``import kernelhub`` after ``import torch`` (best of the fresh processes, and
with ``-X importtime``: what the import pulls in), whether ``huggingface_hub`` was imported
by the load (column "hf"), and the CPU. Processes use bytecode caches as a user's would
(``PYTHONDONTWRITEBYTECODE`` is dropped; one untimed process per scenario writes them).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "tests"), str(REPO / "tests/serve")]

from kernelhub.lock import LockEntry, write_lock  # noqa: E402
from reference_loader import (  # noqa: E402 - the shared helper lives with the tests
    ECOSYSTEM_VERSIONS,
    KernelRepoProxy,
    install_reference_loader,
    olah_server,
    reference_env,
)
from served import serving_process  # noqa: E402 - kernelhub serve as a team runs it

REPO_ID = "kernels-community/activation"

LOAD = r"""
import json, sys, time
import torch
spec = json.loads(sys.argv[1])
c0 = time.process_time()
t0 = time.perf_counter()
if spec.pop("loader") == "kernelhub":
    import kernelhub as loader
else:
    import kernels as loader
    spec.setdefault("trust_remote_code", True)
t1 = time.perf_counter()
try:
    if "lockfile" in spec:
        module = loader.load_locked_kernel(REPO_ID, **spec)
    else:
        module = loader.get_kernel(REPO_ID, **spec)
except Exception as e:
    print(json.dumps({"error": f"{type(e).__name__}: {str(e).splitlines()[0]}"}))
    raise SystemExit(0)
t2 = time.perf_counter()
c2 = time.process_time()
x = torch.randn(8, 64)
out = torch.empty(8, 32)
module.silu_and_mul(out, x)
assert torch.allclose(out, torch.nn.functional.silu(x[:, :32]) * x[:, 32:], atol=1e-5)
print(json.dumps({"import_s": t1 - t0, "load_s": t2 - t1, "cpu_s": c2 - c0,
                  "file": module.__file__,
                  "hf_imported": "huggingface_hub" in sys.modules}))
""".replace("REPO_ID", repr(REPO_ID))

PREPARE_REFERENCE_OFFLINE = r"""
import sys
from huggingface_hub import snapshot_download
snapshot_download(REPO_ID, repo_type="kernel", allow_patterns="build/*", revision=sys.argv[1])
""".replace("REPO_ID", repr(REPO_ID))
"""What the reference's offline mode needs in its cache: every variant of the commit."""

REFERENCE_LIMITS = {
    "g1": ("ValueError: Version 1 of ", "fails by the reference's design: offline it resolves "
           "version=N from refs/v<N> in the HF cache, which its own downloads (by commit) "
           "never write"),
}
"""Reference rows that fail for what the reference loader is, not for how they are run:
key → (the start of the error it then raises, what the table says instead)."""


@dataclass
class Row:
    key: str
    label: str
    loads: list[float] = field(default_factory=list)
    imports: list[float] = field(default_factory=list)
    cpus: list[float] = field(default_factory=list)
    """CPU time of import + load: what the process itself spent, however busy the machine."""
    requests: list[int] = field(default_factory=list)
    hf_imported: set[bool] = field(default_factory=set)
    error: str | None = None

    def failure(self) -> str | None:
        """Why the row has no numbers, in one line (None: it has them)."""
        if self.error is None:
            return None
        expected, why = REFERENCE_LIMITS.get(self.key, (None, ""))
        return why if expected and self.error.startswith(expected) else f"fails: {self.error}"

    def median_ms(self) -> float:
        return statistics.median(self.loads) * 1000 if self.loads else float("nan")

    def median_total_ms(self) -> float:
        """Import of the loader plus the load: what a process pays for its first kernel."""
        return statistics.median(self.totals()) * 1000

    def totals(self) -> list[float]:
        return [i + lo for i, lo in zip(self.imports, self.loads, strict=True)]


Plan = tuple[str, str, str, dict, Callable[[int], dict[str, str]], dict[str, str] | None]
"""A row to run: key, label, loader, load spec, the env of run i, the warm-up's env (None:
that of run i)."""


def load_once(spec: dict, env: dict[str, str], proxies: tuple[KernelRepoProxy, ...], row: Row,
              record: bool = True) -> None:
    """One fresh process, one load; add its timing and the requests that reached any of
    the servers to ``row``."""

    def count() -> int:
        return sum(p.count() for p in proxies)

    before = count()
    proc = subprocess.run([sys.executable, "-c", LOAD, json.dumps(spec)], env=env,
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"{row.key}: the load process failed:\n{proc.stderr}")
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    if "error" in result:
        row.error = result["error"]
        return
    if record:
        row.loads.append(result["load_s"])
        row.imports.append(result["import_s"])
        row.cpus.append(result["cpu_s"])
        row.requests.append(count() - before)
        row.hf_imported.add(bool(result.get("hf_imported")))


def prepare_hub(work: Path) -> Path:
    """Build activation for torch 2.13 CPU and publish it to a fresh LocalHub."""
    builder = [str(REPO / ".venv/bin/builder"), "--project", str(REPO), "--out",
               str(work / "build")]
    for args in (["build", "activation", "--variant", "torch213-cxx11-cpu-*"],
                 ["publish", "activation", "--hub", str(work / "hub"), "--allow-host-abi"]):
        print("$ builder", " ".join(args), flush=True)
        subprocess.run(builder + args, check=True, stdout=subprocess.DEVNULL)
    return work / "hub"


def head_commit(hub: Path) -> str:
    repo = hub / "models" / REPO_ID
    return subprocess.run(["git", "-C", str(repo), "rev-parse", "refs/heads/v1"], check=True,
                          capture_output=True, text=True).stdout.strip()


def run_benchmark(hub: Path, work: Path, runs: int, reference_dir: Path | None,
                  only: frozenset[str] | None = None) -> list[Row]:
    sha = head_commit(hub)
    ours = dict(os.environ)
    for name in ("KERNELHUB_TRUSTED_ORGS", "KERNELHUB_OFFLINE", "HF_HUB_OFFLINE",
                 "KERNELHUB_REFS_TTL", "PYTHONDONTWRITEBYTECODE"):
        ours.pop(name, None)
    lockfile = work / "kernels.lock"
    write_lock(lockfile, [LockEntry(REPO_ID, sha)])
    locked = {"lockfile": str(lockfile)}
    ours.update(KERNELHUB_CONFIG=str(work / "no-config.toml"), NO_PROXY="127.0.0.1",
                no_proxy="127.0.0.1")

    def kh(cache: str, hub_at: str, **extra: str) -> dict[str, str]:
        return {**ours, "KERNELHUB_HUB": hub_at, "KERNELHUB_CACHE": str(work / cache), **extra}

    with ExitStack() as stack:
        # Each server behind its own counting proxy; olah's also maps the kernel type,
        # which olah lacks and kernelhub serve has.
        olah = KernelRepoProxy(stack.enter_context(olah_server(hub, work / "olah")))
        stack.callback(olah.close)
        served = KernelRepoProxy(stack.enter_context(
            serving_process(hub, None, work / "serve.log")), map_types=False)
        stack.callback(served.close)
        proxies = (olah, served)

        def ref(cache: str, at: KernelRepoProxy = olah, **extra: str) -> dict[str, str]:
            if reference_dir is None:  # not installed: no reference row is run
                return {}
            return reference_env(dict(os.environ), reference_dir, at.url, work / cache,
                                 **extra)

        local = str(hub)
        v1 = {"version": 1}
        pinned = {"revision": sha}

        def hub_api_rows(prefix: str, name: str, at: KernelRepoProxy) -> list[Plan]:
            """Rows e, f, h, i and i0 through the server behind ``at``, keys prefixed."""
            slug = name.split()[-1]
            return [
                (f"{prefix}e", f"kernels via {name} cold", "kernels", v1,
                 lambda i: ref(f"hf-{slug}-cold-{i}", at), None),
                (f"{prefix}f", f"kernels via {name} warm version=1", "kernels", v1,
                 lambda i: ref(f"hf-{slug}-warm", at), ref(f"hf-{slug}-warm", at)),
                (f"{prefix}h", f"kernelhub via {name} cold", "kernelhub", v1,
                 lambda i: kh(f"kh-{slug}-cold-{i}", at.url), None),
                (f"{prefix}i", f"kernelhub via {name} warm version=1", "kernelhub", v1,
                 lambda i: kh(f"kh-{slug}-warm", at.url), kh(f"kh-{slug}-warm", at.url)),
                (f"{prefix}i0", f"kernelhub via {name} warm version=1 TTL=0", "kernelhub", v1,
                 lambda i: kh(f"kh-{slug}-warm", at.url, KERNELHUB_REFS_TTL="0"), None),
            ]

        plan: list[Plan] = [
            ("a", "kernelhub LocalHub cold", "kernelhub", v1,
             lambda i: kh(f"kh-cold-{i}", local), None),
            ("b", "kernelhub LocalHub warm version=1", "kernelhub", v1,
             lambda i: kh("kh-warm", local), kh("kh-warm", local)),
            ("c", "kernelhub LocalHub warm pinned sha", "kernelhub", pinned,
             lambda i: kh("kh-warm", local), None),
            ("d", "kernelhub warm KERNELHUB_OFFLINE=1", "kernelhub", v1,
             lambda i: kh("kh-warm", local, KERNELHUB_OFFLINE="1"), None),
            *hub_api_rows("", "olah", olah),
            *hub_api_rows("s", "kernelhub serve", served),
            ("g", "kernels warm HF_HUB_OFFLINE=1 pinned", "kernels", pinned,
             lambda i: ref("hf-offline", HF_HUB_OFFLINE="1"), None),
            ("g1", "kernels warm HF_HUB_OFFLINE=1 version=1", "kernels", v1,
             lambda i: ref("hf-offline", HF_HUB_OFFLINE="1"), None),
            ("i1", "kernelhub via olah warm OFFLINE", "kernelhub", v1,
             lambda i: kh("kh-olah-warm", olah.url, KERNELHUB_OFFLINE="1"), None),
            ("i2", "kernelhub via olah warm pinned sha", "kernelhub", pinned,
             lambda i: kh("kh-olah-warm", olah.url), None),
            ("i3", "kernelhub via olah warm locked", "kernelhub", locked,
             lambda i: kh("kh-olah-warm", olah.url), None),
            ("c1", "kernelhub LocalHub warm locked", "kernelhub", locked,
             lambda i: kh("kh-warm", local), None),
        ]
        if only is not None:  # a warm row reads the cache its warm-up row fills
            needs = {"c": "b", "c1": "b", "d": "b", "i0": "i", "i1": "i", "i2": "i", "i3": "i",
                     "si0": "si"}
            only = only | {needs[k] for k in only if k in needs}
            plan = [p for p in plan if p[0] in only]
        if any(p[0] in ("g", "g1") for p in plan):
            # Untimed, online: the cache g and g1 load from offline (module docstring).
            subprocess.run([sys.executable, "-c", PREPARE_REFERENCE_OFFLINE, sha],
                           env=ref("hf-offline"), check=True, capture_output=True)
        rows = []
        for key, label, loader, spec, env_for, warmup in plan:
            row = Row(key, label)
            # One untimed process first: the warm-up of a warm scenario, and for every
            # scenario the bytecode caches a user's installation has.
            load_once({"loader": loader, **spec}, warmup or env_for(runs), proxies, row,
                      record=False)
            for i in range(runs):
                load_once({"loader": loader, **spec}, env_for(i), proxies, row)
                if row.error:
                    break
            rows.append(row)
            print(f"  {key:3} {label:52} {row.failure() or f'{row.median_ms():8.1f} ms'}",
                  flush=True)
        return rows


def report(rows: list[Row], runs: int) -> str:
    by = {r.key: r for r in rows}
    lines = [f"median of {runs} fresh processes; load = the get_kernel call only "
             "(after import torch and the loader)", "",
             f"{'':4}{'scenario':52} {'load ms':>9} {'min ms':>8} {'import ms':>10} "
             f"{'import+load':>12} {'best i+l':>9} {'cpu i+l':>8} {'HTTP req/load':>14} "
             f"{'hf':>4}"]
    for r in rows:
        if r.error:
            lines.append(f"{r.key:4}{r.label:52} {r.failure()}")
            continue
        reqs = sorted(set(r.requests))
        lines.append(
            f"{r.key:4}{r.label:52} {r.median_ms():9.1f} {min(r.loads) * 1000:8.1f} "
            f"{statistics.median(r.imports) * 1000:10.1f} {r.median_total_ms():12.1f} "
            f"{min(r.totals()) * 1000:9.1f} {min(r.cpus) * 1000:8.1f} "
            f"{'/'.join(map(str, reqs)):>14} "
            f"{'/'.join('yes' if h else 'no' for h in sorted(r.hf_imported)):>4}")
    lines += ["", "ratios of load ms (reference / ours, > 1 means ours is faster); "
              "in brackets the same for import+load:"]
    for ref_key, our_key, what in (("e", "a", "cold, each from its own hub"),
                                   ("e", "h", "cold, both via olah"),
                                   ("se", "sh", "cold, both via kernelhub serve"),
                                   ("f", "b", "warm version=1, each from its own hub"),
                                   ("f", "i", "warm version=1, both via olah"),
                                   ("f", "i0", "warm version=1 via olah, ours with TTL=0"),
                                   ("sf", "si", "warm version=1, both via kernelhub serve"),
                                   ("sf", "si0", "warm version=1 via serve, ours with TTL=0"),
                                   ("g", "c", "warm pinned sha, no hub call"),
                                   ("g", "d", "warm offline"),
                                   ("g", "i2", "warm pinned sha, ours via olah")):
        a, b = by.get(ref_key), by.get(our_key)
        if a and b and a.loads and b.loads:
            lines.append(f"  {ref_key:>2}/{our_key:3}  {a.median_ms() / b.median_ms():6.2f}x "
                         f"({a.median_total_ms() / b.median_total_ms():5.2f}x)  {what}")
    return "\n".join([*lines, "", *targets(by)])


REFERENCE_ROWS = frozenset({"e", "f", "g", "g1", "se", "sf"})
"""Rows of the reference loader (they need it installed)."""

WARM_NO_NETWORK = ("c", "c1", "d", "i1", "i2", "i3")
"""Warm loads that need no hub (pinned, locked, offline), from a LocalHub and via olah."""


def targets(by: dict[str, Row]) -> list[str]:
    """The issue's loader targets, each with the best of the fresh processes (on a shared
    machine a run is only ever slowed down, so the best is the closest to the code's own
    cost; the CPU column is the same measure without waiting for a core)."""
    lines = ["targets (best of the fresh processes; 'cpu' is the same processes' CPU time):"]
    for key in WARM_NO_NETWORK:
        r = by.get(key)
        if r is None or r.error or not r.loads:
            continue
        best, cpu = min(r.totals()) * 1000, min(r.cpus) * 1000
        hf = "huggingface_hub imported" if True in r.hf_imported else "no huggingface_hub"
        verdict = "met" if best <= 15 and True not in r.hf_imported else "NOT met"
        lines.append(f"  {key:3}import+load <= 15 ms: {verdict} ({best:.1f} ms wall, {cpu:.1f} ms "
                     f"cpu, {hf})  {r.label}")
    lines += hub_api_targets(by)
    return lines


HUB_API_TARGETS = (
    ("e", "h", 0.5, True, "cold via olah"),
    ("se", "sh", 0.5, True, "cold via kernelhub serve"),
    ("f", "i", 0.3, False, "warm version=1 via olah"),
    ("sf", "si", 0.3, False, "warm version=1 via kernelhub serve"),
)
"""Issue 22: (reference row, our row, most time of ours / theirs, whether ours must also
make fewer requests, what)."""


def hub_api_targets(by: dict[str, Row]) -> list[str]:
    """Issue 22's Hub-API targets, on the medians of the load call (the table's "load ms"
    column) and, beside them, the same for import + load: the reference imports
    huggingface_hub when it is imported, ours when its first load talks to a server."""
    lines = []
    for ref_key, our_key, most, fewer, what in HUB_API_TARGETS:
        theirs, ours = by.get(ref_key), by.get(our_key)
        if not (theirs and ours and theirs.loads and ours.loads):
            continue
        ratio = ours.median_ms() / theirs.median_ms()
        total = ours.median_total_ms() / theirs.median_total_ms()
        requests = f"{max(ours.requests)} vs {min(theirs.requests)} requests"
        met = ratio <= most and (not fewer or max(ours.requests) < min(theirs.requests))
        lines.append(f"  {our_key:3}{what}: ours <= {most}x the reference's median time"
                     f"{' with fewer requests' if fewer else ''}: {'met' if met else 'NOT met'}"
                     f" ({ratio:.2f}x load, {total:.2f}x import+load, {requests})")
    for key in ("i", "si"):
        r = by.get(key)
        if r is not None and not r.error and r.requests:
            most_seen = max(r.requests)
            lines.append(f"  {key:3}warm version=N via a Hub-API server, inside the refs TTL, "
                         f"0 requests: {'met' if most_seen == 0 else 'NOT met'} "
                         f"({most_seen} at most)")
    return lines


IMPORT_ONLY = r"""
import time
import torch
t0 = time.perf_counter()
import kernelhub
print(time.perf_counter() - t0)
"""


def header() -> str:
    """The machine, and what ``import kernelhub`` costs after ``import torch``."""
    from kernelhub.system import cpu_summary

    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    times = [float(subprocess.run([sys.executable, "-c", IMPORT_ONLY], env=env, check=True,
                                  capture_output=True, text=True).stdout)
             for _ in range(5)]
    trace = subprocess.run([sys.executable, "-X", "importtime", "-c",
                            "import torch; import kernelhub"], env=env, check=True,
                           capture_output=True, text=True).stderr.splitlines()
    start = max(i for i, line in enumerate(trace) if line.rstrip().endswith("| torch"))
    ours = [line.split("|")[-1].strip() for line in trace[start + 1:]]
    return (f"{cpu_summary()}\nimport kernelhub after import torch: best {min(times) * 1e3:.1f} "
            f"ms, median {statistics.median(times) * 1e3:.1f} ms of 5 processes (target <= 10 ms: "
            f"{'met' if min(times) <= 0.010 else 'NOT met'}); it imports "
            f"{len(ours)} modules: {', '.join(ours)}\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hub", type=Path, help="a LocalHub root holding "
                        f"{REPO_ID} v1 with a torch213 CPU variant (default: build one)")
    parser.add_argument("--runs", type=int, default=3, help="fresh processes per scenario")
    parser.add_argument("--reference-version", default=ECOSYSTEM_VERSIONS[-1],
                        help="the kernels release to compare with (default: %(default)s, the "
                        "one users install today)")
    parser.add_argument("--reference-dir", type=Path,
                        help="where to pip install the reference loader (reused if there)")
    parser.add_argument("--only", help="comma-separated scenario keys to run (default: all); "
                        "the warm no-network targets are --only " + ",".join(WARM_NO_NETWORK))
    args = parser.parse_args(argv)
    only = frozenset(args.only.split(",")) if args.only else None
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="kernelhub-load-time-") as tmp:
        work = Path(tmp)
        hub = args.hub.resolve() if args.hub else prepare_hub(work)
        reference_dir = None
        if only is None or only & REFERENCE_ROWS:
            reference_dir = install_reference_loader(args.reference_dir or work / "reference",
                                                     args.reference_version)
        rows = run_benchmark(hub, work, args.runs, reference_dir, only)
    print()
    print(header())
    if reference_dir is not None:
        print(f"reference loader: kernels {args.reference_version}")
    print(report(rows, args.runs))
    print(f"\n(total {time.monotonic() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
