"""``kernelhub benchmark``: run a kernel repository's benchmark classes on this machine.

Loads the variant this machine would load (from a hub, trust checked as for any load, or
from a local path), runs every ``Benchmark`` class of the repository's
``benchmarks/benchmark*.py`` (:mod:`kernelhub.benchmark.runner`), prints the machine and a
table (kernel and reference times, speedup, whether the output matched), writes the
results as JSON and a PNG plot (``--plots DIR``, default ``benchmark-results/``), and
with ``--publish`` commits both to the repository's ``benchmarks`` branch
(:mod:`kernelhub.benchmark.results` has the layout). A workload whose output does not
match its reference fails the command, and such a run is never published.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from .. import api, optional_commands
from ..benchmark import plots as benchmark_plots
from ..benchmark import sources as benchmark_sources
from ..benchmark.results import BenchmarkRun
from ..benchmark.runner import (
    BENCHMARKS_DIR,
    BenchmarkError,
    find_scripts,
    load_classes,
    machine_info,
    run_class,
    scripts_sha,
    torch_device,
)
from ..errors import KernelHubError
from ..printable import printable
from ..system import detect_system
from ..user_files import cli_path, user_path
from .args import add_target_args


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    bench = sub.add_parser(
        "benchmark", help="run a kernel's benchmarks/benchmark*.py classes on this machine")
    bench.add_argument("kernel", help="org/name on the hub, or a local kernel directory")
    add_target_args(bench, trust=True)
    bench.add_argument("--benchmarks", type=cli_path, help="run the scripts in this directory")
    bench.add_argument("--iterations", type=int, default=100, help="timed calls per workload")
    bench.add_argument("--warmup", type=int, default=10, help="untimed calls first")
    bench.add_argument("--json", action="store_true", help="also print the results as JSON")
    bench.add_argument("--output", type=cli_path, help="write the JSON results to this file")
    bench.add_argument("--plots", type=cli_path, default=Path("benchmark-results"),
                       help="directory for the JSON and PNG plot (default: benchmark-results)")
    bench.add_argument("--no-plots", action="store_true", help="do not draw the PNG plot")
    bench.add_argument("--publish", action="store_true",
                       help="commit the results to the repository's benchmarks branch")
    bench.set_defaults(func=_benchmark)


def _benchmark(args: argparse.Namespace) -> None:
    if args.iterations < 1 or args.warmup < 0:
        raise KernelHubError("--iterations must be at least 1 and --warmup at least 0")
    with tempfile.TemporaryDirectory(prefix="kernelhub-benchmarks-") as tmp:
        run, resolution = _run(args, Path(tmp))
    _print_table(run)
    slug = f"{(run.kernel.get('repoId') or Path(run.kernel['path']).name).replace('/', '--')}" \
           f"-{run.kernel['variant']}"
    written = [] if args.no_plots else _write(run, args.plots, slug)
    if args.output:
        try:
            args.output.parent.mkdir(parents=True, exist_ok=True)
            args.output.write_text(run.dumps())
        except OSError as e:
            raise KernelHubError(f"cannot write --output {args.output}: {e.strerror or e}"
                                 ) from None
        written.append(args.output)
    for path in written:
        print(f"wrote {printable(str(path))}", file=sys.stderr)
    if args.json:
        print(run.dumps(), end="")
    if not run.all_verified:
        failed = [r.workload for r in run.results if r.verified is False]
        raise KernelHubError(f"output did not match the reference in {', '.join(failed)}; "
                             "nothing was published")
    if args.publish:
        if resolution is None:
            raise KernelHubError("--publish needs a hub repository, not a local path")
        _publish(run, resolution, args.no_plots)


def _run(args: argparse.Namespace, tmp: Path) -> tuple[BenchmarkRun, api.Resolution | None]:
    target = user_path(args.kernel, "the kernel")
    system = detect_system(args.backend)
    resolution = None
    if target.exists():
        variant_dir = api.find_local_variant(target, backend=args.backend)
        kernel = api.get_local_kernel(variant_dir)
        scripts_dir = args.benchmarks or target / BENCHMARKS_DIR
        info = {"path": str(target), "variant": variant_dir.name, "revision": None,
                "commit": None}
        source = str(scripts_dir)
    else:
        resolution = api.resolve_kernel(args.kernel, args.version, args.revision, hub=args.hub,
                                        backend=args.backend)
        kernel = api.get_kernel(args.kernel, revision=resolution.commit, hub=resolution.hub,
                                trust_remote_code=args.trust_remote_code, backend=args.backend)
        scripts_dir, source = _hub_scripts(args, resolution, tmp)
        info = {"repoId": args.kernel, "revision": resolution.ref, "commit": resolution.commit,
                "variant": resolution.variant}
    info["kernelCommitSha"] = info["commit"] or kernel.__name__.rpartition("_")[2]
    scripts = find_scripts(scripts_dir)
    machine = machine_info(system)
    device = torch_device(system)
    print(printable(f"{info.get('repoId') or info['path']} {info['variant']}; benchmarks "
                    f"from {source}"), file=sys.stderr)
    print(f"  {machine['cpuFeatures']}\n  {machine['system']}; torch {machine['pytorchVersion']}, "
          f"{machine['threads']} threads; GPU {machine['gpu']}", file=sys.stderr)
    results = []
    root = scripts_dir.parent
    for script in scripts:
        classes = load_classes(script, root)
        if not classes:
            print(f"  {printable(script.name)}: no Benchmark classes, skipped", file=sys.stderr)
            continue
        for cls in classes:
            print(printable(f"  {script.name}: {cls.__name__} on {device}"), file=sys.stderr)
            results += run_class(cls, kernel, device, args.warmup, args.iterations)
    if not results:
        raise BenchmarkError(f"no Benchmark classes in {', '.join(s.name for s in scripts)}")
    return BenchmarkRun(tuple(results), machine, info, scripts_sha(scripts),
                        tuple(s.name for s in scripts)), resolution


def _hub_scripts(args: argparse.Namespace, resolution: api.Resolution,
                 tmp: Path) -> tuple[Path, str]:
    if args.benchmarks is not None:
        return args.benchmarks, str(args.benchmarks)
    found = benchmark_sources.hub_benchmarks(resolution.hub, args.kernel, resolution.commit, tmp)
    if found is not None:
        return found, f"{args.kernel} at {resolution.commit[:12]}"
    local = benchmark_sources.project_benchmarks(args.kernel)
    if local is not None:
        return local, f"{local} (the repository publishes none)"
    raise BenchmarkError(
        f"{args.kernel} has no {BENCHMARKS_DIR}/ at {resolution.commit[:12]}, and this is not "
        "a project with its sources (kernels-src/); name the scripts with --benchmarks DIR")


def _print_table(run: BenchmarkRun) -> None:
    rows = [("workload", "N", "kernel ms", "std", "min", "ref ms", "speedup", "match")]
    for r in run.results:
        match = {True: "yes", False: "NO", None: "-"}[r.verified]
        rows.append((r.workload, str(r.timing.iterations), f"{r.timing.mean_ms:.4f}",
                     f"{r.timing.std_ms:.4f}", f"{r.timing.min_ms:.4f}",
                     f"{r.reference.mean_ms:.4f}" if r.reference else "-",
                     f"{r.speedup:.2f}x" if r.speedup is not None else "-", match))
    shown = [tuple(printable(cell) for cell in row) for row in rows]  # names from the kernel
    widths = [max(len(row[i]) for row in shown) for i in range(len(shown[0]))]
    for i, row in enumerate(shown):
        print("  ".join(cell.ljust(w) if j == 0 else cell.rjust(w)
                        for j, (cell, w) in enumerate(zip(row, widths, strict=True))))
        if i == 0:
            print("  ".join("-" * w for w in widths))
    for r in run.results:
        if r.mismatch:
            print(printable(f"{r.workload}: output does not match the reference: "
                            f"{r.mismatch}"))


def _write(run: BenchmarkRun, directory: Path, slug: str) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"{slug}.json").write_text(run.dumps())
    return [directory / f"{slug}.json", benchmark_plots.save_plot(run, directory / f"{slug}.png")]


def _publish(run: BenchmarkRun, resolution: api.Resolution, no_plots: bool) -> None:
    """Commit the run to the hub through ``kernelhub publish-benchmark``, the builder's
    optional command (the loader never imports the code that writes to a hub)."""
    publish = optional_commands.load("publish-benchmark")
    assert publish is not None  # a known command: load() raises when it is missing
    hub = resolution.hub
    target = str(getattr(hub, "root", None) or getattr(hub, "endpoint", ""))
    with tempfile.TemporaryDirectory() as tmp:
        document = Path(tmp) / "results.json"
        document.write_text(run.dumps())
        files = [str(document)]
        if not no_plots:
            files.append(str(benchmark_plots.save_plot(run, Path(tmp) / "plot.png")))
        if publish([resolution.repo_id, resolution.commit, resolution.variant, *files,
                    "--hub", target]) != 0:
            raise KernelHubError(f"publishing the results to {resolution.repo_id} failed")
