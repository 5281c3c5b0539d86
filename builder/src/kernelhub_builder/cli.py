"""The ``builder`` command: a thin shell over the library modules.

Parses arguments, finds the project, calls :mod:`.compile.build`, :mod:`.check.kernel_tests` and
:mod:`.ship.publish`, and prints. Errors the user can fix (bad manifest, compile error,
publish refused) become one message on stderr and exit status 1, never a traceback.
What the library reports (:mod:`report`) is rendered by :mod:`cli_render`, which only
this module uses.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path

from kernelhub.cli.text import ArgumentParser, error_line
from kernelhub.errors import KernelHubError
from kernelhub.hub import open_hub
from kernelhub.system import FOREIGN_BACKEND_REASONS
from kernelhub.user_files import cli_path
from rich.markup import escape

from . import __version__
from .check.kernel_tests import run_kernel_tests
from .check.variant import (
    ALLOW_HOST_ABI_ENV,
    AbiPolicy,
    allow_host_abi_default,
    check_kernel,
    format_violations,
)
from .cli_render import ConsoleReporter, make_console
from .compile.build import build_kernel
from .errors import ShardError, UsageError
from .layout import default_out_dir, kernel_dir
from .manifest import PROJECT_FILE, Project, VariantNames, load_project
from .plan.matrix import filter_variants, format_plan, plan_to_json, plan_variants
from .plan.select import find_project, select_kernels, select_variants
from .report import reporting_to
from .ship import open_publisher
from .ship.artifacts import merge_artifacts
from .ship.ci_matrix import ci_jobs, github_outputs, missing_jobs, parse_shard, shard_plans
from .ship.publish import (
    SIGN_KEY_ENV,
    SIGN_PASSPHRASE_ENV,
    StalePolicy,
    default_release_key,
    describe_result,
    load_release_key,
    publish_kernel,
)

console = make_console()
"""The one console of the command; library code reaches it only through the reporter."""


def _parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(
        prog="builder",
        description="Build, test and publish PyTorch compute kernels for every build variant.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument("--project", type=cli_path, metavar="PATH",
                        help=f"the project's {PROJECT_FILE} or its directory "
                             "(default: the nearest one upward from the current directory)")
    parser.add_argument("--out", type=cli_path, metavar="DIR",
                        help="where built variants go (default: build-dir of kernels.toml, "
                             "else <project>/build)")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    _init_arguments(commands.add_parser("init", help=INIT_HELP))

    listing = commands.add_parser("list-variants", help="show the variant matrix of a kernel")
    listing.add_argument("kernel", nargs="?", help="one kernel (default: all)")
    listing.add_argument("--json", action="store_true", help="machine-readable output")

    ci = commands.add_parser(
        "ci-matrix", help="print the CI build matrix (one job per kernel and variant, with "
                          "runner labels) as JSON for a workflow's fromJSON")
    ci.add_argument("kernels", nargs="*", metavar="KERNEL", help="default: all")
    ci.add_argument("--github-output", action="store_true",
                    help="print matrix=, count=, device-matrix= and device-count= lines, "
                         "for $GITHUB_OUTPUT")
    ci.add_argument("--missing-on", metavar="HUB",
                    help="only the variants each kernel's release tag on HUB does not hold")
    ci.add_argument("--devices", default="", metavar="LABELS",
                    help="device runners that exist (space/comma-separated: nvidia-gpu, "
                         "amd-gpu, intel-gpu): a device-test job per variant that needs one")

    merge = commands.add_parser(
        "merge-artifacts", help="verify built variants from CI artifacts and merge them into "
                                "the build dir (what the publish job does before publishing)")
    merge.add_argument("artifacts", nargs="+", type=cli_path, metavar="DIR",
                       help="artifact dirs, each holding <kernel>/<variant>/")

    build = commands.add_parser("build", help="build the variants this host can build")
    build.add_argument("kernels", nargs="*", metavar="KERNEL", help="default: all")
    build.add_argument("--variant", action="append", default=[], metavar="V",
                       help="only these variants (name or glob; repeatable)")
    build.add_argument("--shard", type=_shard_argument, metavar="I/N",
                       help="build only shard I of N of the (kernel, variant) pairs this host "
                            "can build (every N-th pair in name order; same split on any "
                            "machine)")
    _abi_argument(build)
    build.add_argument("--no-import-check", dest="import_check", action="store_false",
                       help="skip importing each fresh build in its torch environment")

    check = commands.add_parser(
        "check", help="check built variants: ABI (manylinux_2_28, abi3, dependencies, "
                      "stable ABI), layout, op namespaces, import")
    check.add_argument("kernels", nargs="*", metavar="KERNEL", help="default: all")
    _abi_argument(check)
    check.add_argument("--no-import-check", dest="import_check", action="store_false",
                       help="only the static checks (no torch environment needed)")

    migrate = commands.add_parser(
        "migrate", help="rewrite build.toml files in the newest edition (6), keeping comments")
    migrate.add_argument("kernels", nargs="*", metavar="KERNEL", help="default: all")
    migrate.add_argument("--check", action="store_true",
                         help="change nothing; exit 1 if a build.toml is not in edition 6")

    shell = commands.add_parser(
        "shell", help="open a shell (or run -c COMMAND) in the environment of one built "
                      "variant: its torch env, its include paths, LOCAL_KERNELS at the build")
    shell.add_argument("kernel", nargs="?", help="default: the project's only kernel")
    shell.add_argument("--variant", metavar="V",
                       help="default: the first variant this host builds and runs")
    shell.add_argument("-c", dest="shell_command", metavar="COMMAND",
                       help="run COMMAND with $SHELL -c and exit with its status")

    test = commands.add_parser("test", help="run each kernel's tests against its built variants")
    test.add_argument("kernels", nargs="*", metavar="KERNEL", help="default: all")

    publish = commands.add_parser("publish", help="publish built variants to a hub")
    publish.add_argument("kernels", nargs="*", metavar="KERNEL", help="default: all")
    _publish_arguments(publish)
    publish.add_argument("--build-dir", dest="out", type=cli_path, metavar="DIR",
                         default=argparse.SUPPRESS,
                         help="publish the variants under DIR/<kernel>/<variant> (the same as "
                              "--out; e.g. the result of nix build .#kernels)")

    one_step = commands.add_parser(
        "build-and-publish", help="build the variants this host can build, check them and "
                                  "publish them, stopping before the hub at any failure")
    one_step.add_argument("kernels", nargs="*", metavar="KERNEL", help="default: all")
    one_step.add_argument("--variant", action="append", default=[], metavar="V",
                          help="only these variants (name or glob; repeatable)")
    _abi_argument(one_step)
    one_step.add_argument("--no-import-check", dest="import_check", action="store_false",
                          help="skip the import checks (build and check run the static ones)")
    _publish_arguments(one_step)
    return parser


INIT_HELP = "create a new kernel repository that builds and tests as it is"


def _init_arguments(init: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """``builder init``'s arguments, which ``kernelhub init`` shares."""
    init.add_argument("name", help="the kernel's name, e.g. my-kernel")
    init.add_argument("directory", nargs="?", type=cli_path, help="default: ./NAME")
    init.add_argument("--org", default="my-org", help="hub org for general.hub.repo-id")
    return init


def _publish_arguments(publish: argparse.ArgumentParser) -> None:
    """The options of a publish, shared by ``publish`` and ``build-and-publish``."""
    publish.add_argument("--hub", metavar="PATH",
                         help="hub target: a LocalHub directory, \"hf\" or an http(s):// Hub-API endpoint "
                              "(default: [hub] target of kernels.toml, else the default hub)")
    publish.add_argument("--allow-host-abi", action="store_true",
                         default=allow_host_abi_default(),
                         help="publish binaries that need a newer glibc/libstdc++ than "
                              f"manylinux_2_28 (default: refuse; env {ALLOW_HOST_ABI_ENV}=1)")
    publish.add_argument("--dry-run", action="store_true",
                         help="check and report what would change; publish nothing")
    publish.add_argument("--sign", metavar="KEY", default=None,
                         help="sign the release with this OpenSSH Ed25519 private key "
                              f"(ssh-keygen -t ed25519; env {SIGN_KEY_ENV}; passphrase from "
                              f"{SIGN_PASSPHRASE_ENV}); loaders check it against their policy")
    publish.add_argument("--branch", metavar="NAME",
                         help="publish to this branch instead of v<major> (a preview: no "
                              "release tag)")
    publish.add_argument("--private", action="store_true",
                         help="create the repository as private when the publish creates it "
                              "(Hub-API hubs)")
    publish.add_argument("--create-pr", action="store_true",
                         help="open a pull request against the branch instead of committing "
                              "to it (Hub-API hubs; needs no write access; no tag)")
    publish.add_argument("--variant-names", type=VariantNames, choices=list(VariantNames),
                         metavar="{both,current,legacy}",
                         help="the generations of variant names to publish each build under "
                              "(default: [hub] variant-names of kernels.toml, else both: the "
                              "names kernels 0.19 prefers and the ones 0.17/0.18 read)")
    stale = publish.add_mutually_exclusive_group()
    stale.add_argument("--drop-stale", dest="stale", action="store_const",
                       const=StalePolicy.DROP, default=StalePolicy.REFUSE,
                       help="remove variants of other releases from the branch in the same "
                            "commit (default: refuse to publish while the branch has any)")
    stale.add_argument("--carry-stale", dest="stale", action="store_const",
                       const=StalePolicy.CARRY,
                       help="keep variants of other releases on the branch; the new release "
                            "tag then marks them too (said in the output and the commit)")
    publish.add_argument("--allow-model-repo", action="store_true",
                         help="where a Hub-API server has no kernel repositories, publish to a "
                              "model repository, which only kernelhub loads (default: refuse)")


def _shard_argument(text: str) -> tuple[int, int]:
    try:
        return parse_shard(text)
    except ShardError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _abi_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--abi", type=AbiPolicy, choices=list(AbiPolicy), default=AbiPolicy.HOST,
        metavar="{host,manylinux_2_28}",
        help="host (default): a binary needing a newer glibc/libstdc++ than manylinux_2_28 "
             "is reported and marked in metadata.json, and publish refuses it; "
             "manylinux_2_28: such a binary is an error")


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "init":  # makes a project, so it cannot need one
        return _reported(lambda: _init(args))
    return _reported(lambda: _run(args))


def init_main(argv: Sequence[str] | None = None) -> int:
    """``kernelhub init``: ``builder init`` registered in the entry-point group
    ``kernelhub.commands``, so the loader's command offers it without importing the builder."""
    parser = _init_arguments(ArgumentParser(prog="kernelhub init", description=INIT_HELP))
    args = parser.parse_args(argv)
    return _reported(lambda: _init(args))


def _run(args: argparse.Namespace) -> int:
    project = load_project(args.project if args.project else find_project(Path.cwd()))
    out_dir = (args.out or default_out_dir(project)).resolve()
    with reporting_to(ConsoleReporter(console)):
        return _COMMANDS[args.command](args, project, out_dir)


def _reported(command: Callable[[], int]) -> int:
    """Run ``command``; an error the user can fix is one line on stderr and exit status 1,
    and a warning the library gives is one line too (not Python's file, line and source)."""
    with warnings.catch_warnings():
        warnings.showwarning = _show_warning
        try:
            return command()
        except KernelHubError as e:
            console.print(f"[bold red]error:[/] {_escape(error_line(e))}")
            return 1
        except KeyboardInterrupt:
            console.print("interrupted")
            return 130


def _show_warning(message: Warning | str, category: type[Warning], filename: str,
                  lineno: int, file: object = None, line: str | None = None) -> None:
    """``warnings.showwarning`` while a command runs: ``warning: <message>``."""
    del category, filename, lineno, file, line
    console.print(f"[yellow]warning:[/] {_escape(' '.join(str(message).split()))}")


def _escape(text: str) -> str:
    return escape(text)


def _list_variants(args: argparse.Namespace, project: Project, out_dir: Path) -> int:
    kernels = select_kernels(project, [args.kernel] if args.kernel else [])
    if args.json:
        data = {k.name: plan_to_json(plan_variants(project, k)) for k in kernels}
        print(json.dumps(data, indent=2))
        return 0
    for kernel in kernels:
        print(f"{kernel.name} (v{kernel.version}, release {kernel.release})")
        print(format_plan(plan_variants(project, kernel)))
        for backend in kernel.skipped_backends:  # in general.backends, built by no one here
            print(f"{backend}: not built by kernelhub: {FOREIGN_BACKEND_REASONS[backend]}")
        print()
    return 0


def _ci_matrix(args: argparse.Namespace, project: Project, out_dir: Path) -> int:
    kernels = select_kernels(project, args.kernels)
    jobs = ci_jobs(project, kernels)
    if args.missing_on:
        jobs = missing_jobs(jobs, project, kernels, open_hub(args.missing_on))
    outputs = github_outputs(jobs, args.devices.replace(",", " ").split())
    if args.github_output:
        for key, value in outputs.items():
            print(f"{key}={json.dumps(value, separators=(',', ':'))}")
    else:
        print(json.dumps(outputs["matrix"], indent=2))
    return 0


def _merge_artifacts(args: argparse.Namespace, project: Project, out_dir: Path) -> int:
    merged = merge_artifacts(args.artifacts, out_dir)
    for m in merged:
        print(f"merged  {m.kernel}  {m.variant}  from {', '.join(str(s) for s in m.sources)}")
    print(f"{len(merged)} variant(s) merged into {out_dir}")
    return 0


def _build(args: argparse.Namespace, project: Project, out_dir: Path) -> int:
    kernels = {k.name: k for k in select_kernels(project, args.kernels)}
    plans = select_variants(project, list(kernels.values()), args.variant)
    if args.shard:
        plans = shard_plans(plans, args.shard)
    status = 0
    for name, planned in plans.items():
        blocked = [p for p in planned if not p.buildable]
        named = set(args.variant)  # exact names; a glob may match what this host can't build
        for p in blocked:
            if p.name in named:  # asked for by name: not building it is a failure
                console.print(f"{name} {p.name}: cannot build here: {_escape(p.reason or '')}")
                status = 1
        if blocked and not named & {p.name for p in blocked}:
            console.print(f"{name}: {len(blocked)} variant(s) of the matrix cannot be built on "
                          "this host (builder list-variants says why)")
        results = build_kernel(project, kernels[name], planned, out_dir, abi=args.abi,
                               import_check=args.import_check,
                               strict=any(p.name in named for p in planned))
        for r in results:
            state = "up to date" if r.up_to_date else ("compiled" if r.compiled else "assembled")
            print(f"{r.kernel}  {r.variant}  {r.variant_id}  {state}")
        if not results and not blocked:
            console.print(f"{name}: nothing to build")
    return status


def _test(args: argparse.Namespace, project: Project, out_dir: Path) -> int:
    failed = 0
    ran = 0
    for kernel in select_kernels(project, args.kernels):
        runs, skipped = run_kernel_tests(project, kernel, out_dir)
        for s in skipped:
            print(f"SKIP  {kernel.name}  {s.variant}: {s.reason}")
        for run in runs:
            ran += 1
            verdict = "PASS" if run.passed else "FAIL"
            print(f"{verdict}  {kernel.name}  {run.variant}  (torch {run.torch})")
            if not run.passed:
                failed += 1
                sys.stdout.write(_indent(run.output))
    if failed:
        console.print(f"[bold red]{failed} of {ran} test run(s) failed[/]")
        return 1
    if not ran:
        console.print("no variant could be tested on this host")
        return 1
    console.print(f"all {ran} test run(s) passed")
    return 0


def _indent(text: str) -> str:
    return "".join(f"    {line}\n" for line in text.rstrip().splitlines())


def _publish(args: argparse.Namespace, project: Project, out_dir: Path) -> int:
    hub = open_publisher(args.hub or project.hub, allow_model_repo=args.allow_model_repo)
    sign = args.sign or default_release_key()  # the environment is read only to publish
    key = load_release_key(sign) if sign else None
    for kernel in select_kernels(project, args.kernels):
        result = publish_kernel(project, kernel, out_dir, hub, dry_run=args.dry_run,
                                allow_host_abi=args.allow_host_abi, key=key,
                                stale=args.stale, branch=args.branch, private=args.private,
                                create_pr=args.create_pr, names=args.variant_names)
        print(describe_result(result, key))
    return 0


def _build_and_publish(args: argparse.Namespace, project: Project, out_dir: Path) -> int:
    """build, then check, then publish: the hub sees nothing unless all of them pass."""
    args.shard = None
    if status := _build(args, project, out_dir):
        console.print("[bold red]build failed; nothing was published[/]")
        return status
    if status := _check(args, project, out_dir):
        console.print("[bold red]check failed; nothing was published[/]")
        return status
    return _publish(args, project, out_dir)


def _check(args: argparse.Namespace, project: Project, out_dir: Path) -> int:
    failed = checked = 0
    for kernel in select_kernels(project, args.kernels):
        reports = check_kernel(project, kernel, out_dir, import_check=args.import_check)
        if not reports:
            if args.kernels:  # named: checking nothing is not a pass
                raise UsageError(f"no built variants of {kernel.name} under "
                                 f"{kernel_dir(out_dir, project, kernel)}; run builder build {kernel.name} first")
            console.print(f"{kernel.name}: no built variants, nothing to check")
        for report in reports:
            checked += 1
            fatal = report.fatal(args.abi)
            tolerated = [v for v in report.violations if v not in fatal]
            verdict = "FAIL" if fatal else ("PASS (host ABI)" if tolerated else "PASS")
            print(f"{verdict}  {kernel.name}  {report.variant}")
            failed += bool(fatal)
            if report.violations:
                print(format_violations(report.violations))
            for skipped in report.skipped:
                print(f"  skipped {skipped}")
    if failed:
        console.print(f"[bold red]{failed} of {checked} variant(s) failed the checks[/] "
                      f"(ABI policy {args.abi.value})")
        return 1
    if not checked:
        raise UsageError(f"no built variants under {out_dir}; run builder build first")
    console.print(f"all {checked} variant(s) passed the checks (ABI policy {args.abi.value})")
    return 0


def _migrate(args: argparse.Namespace, project: Project, out_dir: Path) -> int:
    from .manifest.migrate import migrate_kernel

    roots = ([k.root for k in select_kernels(project, args.kernels)] if args.kernels
             else [project.kernel_dir(entry) for entry in project.kernels])
    behind = 0
    for root in roots:
        migration = migrate_kernel(root, project, write=not args.check)
        behind += migration.changed
        print(migration.describe() + (" (not written: --check)" if args.check
                                      and migration.changed else ""))
        for note in migration.notes:
            console.print(f"  note: {_escape(note)}")
    return 1 if args.check and behind else 0


def _shell(args: argparse.Namespace, project: Project, out_dir: Path) -> int:
    from .shell import choose_variant, shell_for

    kernels = select_kernels(project, [args.kernel] if args.kernel else [])
    if len(kernels) != 1:
        raise UsageError(f"name the kernel: this project has {', '.join(k.name for k in kernels)}")
    kernel = kernels[0]
    planned = plan_variants(project, kernel)
    plan = (filter_variants(planned, [args.variant])[0] if args.variant
            else choose_variant(kernel, planned))
    if not plan.buildable:
        raise UsageError(f"{kernel.name} {plan.name}: cannot build here: {plan.reason}")
    build_kernel(project, kernel, [plan], out_dir, strict=True)
    shell = shell_for(project, kernel, plan.variant, out_dir)
    for line in shell.said:
        console.print(f"  {_escape(line)}")
    program = os.environ.get("SHELL") or "/bin/sh"
    command = [program, "-c", args.shell_command] if args.shell_command else [program]
    return subprocess.run(command, env=shell.env, cwd=kernel.root, check=False).returncode


def _init(args: argparse.Namespace) -> int:
    from .scaffold import scaffold

    target = args.directory or Path(args.name)
    for path in scaffold(args.name, target, args.org):
        console.print(f"  {path}")
    console.print(f"created {target}; next: cd {target} && builder build && builder test")
    return 0


_COMMANDS = {
    "list-variants": _list_variants,
    "ci-matrix": _ci_matrix,
    "merge-artifacts": _merge_artifacts,
    "build": _build,
    "test": _test,
    "publish": _publish,
    "check": _check,
    "migrate": _migrate,
    "shell": _shell,
    "build-and-publish": _build_and_publish,
}
