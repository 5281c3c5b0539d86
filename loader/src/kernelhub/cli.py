"""``kernelhub``: inspect hub repositories, local builds and the cache.

A thin shell over :mod:`kernelhub.api`; every decision is made there. Errors kernelhub
raises on purpose are printed as one line and exit 1, without a traceback
(:func:`kernelhub.cli_text.error_line`). Text a hub or a file supplied — ref and variant
names, metadata, verdicts that quote them — is printed through :func:`printable`.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from . import api, cli_benchmark, cli_describe, cli_env, cli_signature, cli_variants
from .cache import KernelCache
from .cli_args import add_target_args
from .cli_text import ArgumentParser, error_line
from .errors import KernelHubError
from .hub.calls import hub_name
from .lazy_names import deferred
from .metadata import read_metadata
from .printable import printable
from .user_files import cli_path, user_path

if TYPE_CHECKING:
    from . import cache_listing, deps, deps_resolve, optional_commands, repo_check
    from .layer.autotune import report as autotune_report
    from .layer.autotune import store as autotune_store
else:  # each subcommand imports what it runs, when it runs
    cache_listing = deferred("kernelhub.cache_listing")
    deps = deferred("kernelhub.deps")
    deps_resolve = deferred("kernelhub.deps_resolve")
    optional_commands = deferred("kernelhub.optional_commands")
    repo_check = deferred("kernelhub.repo_check")
    autotune_report = deferred("kernelhub.layer.autotune.report")
    autotune_store = deferred("kernelhub.layer.autotune.store")


def _print_versions(args: argparse.Namespace) -> None:
    print("kernelhub versions is deprecated: use `kernelhub variants` (--all-versions, "
          "--version N or --revision R)", file=sys.stderr)
    hub = api.open_hub_arg(args.hub)
    refs = api.list_refs(args.repo, hub=hub)
    resolution = api.resolve_kernel(
        args.repo, args.version, args.revision, hub=hub, backend=args.backend
    )
    print(f"{args.repo} on {hub_name(resolution.hub)}")
    print("refs:")
    rows = [("branch", printable(n), printable(c)) for n, c in sorted(refs.branches.items())]
    rows += [("tag", printable(n), printable(c)) for n, c in sorted(refs.tags.items())]
    width = max((len(n) for _, n, _ in rows), default=0)
    for kind, name, commit in rows:
        print(f"  {kind:<6} {name:<{width}}  {commit}")
    if not rows:
        print("  (none)")
    print(f"resolved: {printable(resolution.ref)} -> {printable(resolution.commit)}")
    print(f"release:  {printable(api.describe_signature(resolution))}")
    print(f"system:   {resolution.system.describe()}")
    print("variants:")
    report = [(printable(n), printable(v)) for n, v in resolution.selection.report()]
    width = max((len(n) for n, _ in report), default=0)
    chosen = printable(resolution.selection.chosen or "")
    for name, verdict in report:
        mark = "*" if name == chosen else " "
        print(f"  {mark} {name:<{width}}  {verdict}")
    if not report:
        print("    (none: nothing under build/)")


def _print_info(args: argparse.Namespace) -> None:
    target = user_path(args.target, "the target")
    served_by = "-"
    if target.exists():
        path = api.find_local_variant(target, backend=args.backend)
    else:
        resolution = api.resolve_kernel(args.target, args.version, args.revision, hub=args.hub,
                                        backend=args.backend)
        served_by = hub_name(resolution.hub)  # on a search path: the hub that has it
        path = api.locate_kernel(args.target, revision=resolution.commit, hub=resolution.hub,
                                 backend=args.backend)
    meta = read_metadata(path)
    made_by, source = (meta.provenance.get(key) for key in ("kernel-builder", "kernel"))
    builder = made_by.get("version", "unknown") if isinstance(made_by, dict) else "unknown"
    source = source if isinstance(source, dict) else {}
    commit = source.get("commit")
    fields = [
        ("variant", path.name),
        ("path", str(path)),
        ("hub", served_by),
        ("name", meta.name),
        ("id", meta.id),
        ("version", str(meta.version)),
        ("release", meta.release),
        ("backend", meta.backend.type),
        ("archs", ", ".join(meta.backend.archs) or "-"),
        ("torch", meta.torch or "-"),
        ("license", meta.license or "-"),
        ("python-depends", ", ".join(meta.python_depends) or "-"),
        ("builder", str(builder)),
        ("source", f"{commit}{' (dirty)' if source.get('dirty') else ''}" if commit else "-"),
        ("files", str(len(meta.digest_files))),
    ]
    depends = deps.parse_kernel_depends(meta.extra.get(deps.KERNEL_DEPENDS), str(path))
    fields.append(("kernel-depends", ", ".join(map(str, depends)) or "-"))
    if meta.extra.get("kernels-minver"):
        fields.append(("kernels-minver", str(meta.extra["kernels-minver"])))
    width = max(len(k) for k, _ in fields)
    for key, value in fields:
        print(f"{key + ':':<{width + 1}} {printable(value)}")
    if args.dep_tree:
        _print_dep_tree(args, target)


def _print_dep_tree(args: argparse.Namespace, target: Path) -> None:
    if target.exists():
        root = deps_resolve.locate_local(target, backend=args.backend)
    else:
        root = deps_resolve.locate_hub(api.resolve_kernel(args.target, args.version,
                                                          args.revision, hub=args.hub,
                                                          backend=args.backend))
    tree = deps.resolve_tree(root, deps_resolve.hub_resolver(args.hub, args.backend))
    print("dependency tree:")
    print(f"  {root.name}")
    for line in tree.lines("  ") or ["  (no kernel dependencies)"]:
        print(printable(line))


def _cache(args: argparse.Namespace) -> None:
    cache = KernelCache()
    if args.action == "path":
        print(cache.root)
        return
    if args.action == "ls":
        _cache_ls(cache, args.json)
        return
    removed = cache.clear()
    print(f"removed {len(removed)} entr{'y' if len(removed) == 1 else 'ies'} from {cache.root}")


def _cache_ls(cache: KernelCache, as_json: bool) -> None:
    repos = cache_listing.cached_kernels(cache)
    if as_json:
        print(json.dumps({"cache_dir": str(cache.root),
                          "repos": [repo.to_json() for repo in repos]}, indent=2))
        return
    if not repos:
        print(f"no cached kernels in {cache.root}")
        return
    rows = [("REPO", "HUB", "VERSION", "COMMIT", "SIZE", "LAST ACCESSED", "VARIANTS")]
    for repo in repos:
        for c in repo.commits:
            when = time.strftime("%Y-%m-%d %H:%M", time.localtime(c.last_accessed))
            rows.append((repo.repo_id, repo.hub, c.version or ",".join(c.refs) or "-",
                         c.commit[:12], _size(c.size_on_disk), when, c.variants[0]))
            rows += [("", "", "", "", "", "", v) for v in c.variants[1:]]
    shown = [tuple(printable(cell) for cell in row) for row in rows]  # names from the hub
    widths = [max(len(row[i]) for row in shown) for i in range(len(shown[0]) - 1)]
    for row in shown:
        print("  ".join(f"{cell:<{w}}" for cell, w in zip(row, widths, strict=False)) + "  " + row[-1])


def _size(count: int) -> str:
    size = float(count)
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GB"


def build_parser() -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = ArgumentParser(
        prog="kernelhub", description="Inspect kernel repositories, local builds and the cache."
    )
    sub = parser.add_subparsers(dest="command", required=True)

    cli_variants.add_parsers(sub)
    versions = sub.add_parser(
        "versions", help="deprecated (use `variants`): refs and the variant this system loads"
    )
    versions.add_argument("repo", help="org/name")
    add_target_args(versions)
    versions.set_defaults(func=_print_versions)

    info = sub.add_parser("info", help="metadata of the variant this system would load")
    info.add_argument("target", help="org/name on the hub, or a local path")
    info.add_argument("--dep-tree", action="store_true",
                      help="resolve and show the kernel dependencies as a tree")
    add_target_args(info)
    info.set_defaults(func=_print_info)

    cache = sub.add_parser("cache", help="list, locate or clear the kernel cache")
    cache.add_argument("action", choices=["ls", "path", "clear"])
    cache.add_argument("--json", action="store_true", help="ls: one JSON document")
    cache.set_defaults(func=_cache)
    cli_describe.add_parsers(sub)
    cli_signature.add_parsers(sub)
    cli_benchmark.add_parsers(sub)
    cli_env.add_parsers(sub)

    check = sub.add_parser(
        "check", help="check every variant of a published repository (nothing is imported)"
    )
    check.add_argument("repo", help="org/name")
    add_target_args(check)
    check.set_defaults(func=_check)

    lock = sub.add_parser(
        "lock", help="write kernels.lock for the kernels pyproject.toml depends on"
    )
    lock.add_argument("project_dir", nargs="?", type=cli_path, default=Path("."))
    lock.add_argument("--format", dest="lock_format", choices=("kernels", "kernelhub"),
                      default="kernels",
                      help="kernels (default): kernels.lock as kernels 0.17+ reads it, "
                           "kernelhub's hashes in kernelhub.lock beside it; kernelhub: one "
                           "kernels.lock with the hashes (kernels before 0.17 read it, "
                           "0.17+ do not)")
    lock.set_defaults(func=_lock)

    download = sub.add_parser(
        "download", help="fetch every kernel kernels.lock pins into the cache (then load offline)"
    )
    download.add_argument("project_dir", nargs="?", type=cli_path, default=Path("."))
    download.add_argument("--all-variants", action="store_true",
                          help="every variant, not only the one this system loads")
    download.set_defaults(func=_download)

    for name, help_text in (
        ("autotune-report", "what autotuning (kernelize(autotune=True)) chose per layer and "
                            "shape, and why (from the cache)"),
        ("verify-report", "the former name of autotune-report"),
    ):
        report = sub.add_parser(name, help=help_text)
        report.add_argument("--model", help="only decisions this model used (its name or "
                                            "path, as from_pretrained was given it)")
        report.add_argument("--name", help="only this layer or function name (e.g. RMSNorm)")
        report.add_argument("--forget", action="store_true",
                            help="remove these decisions, so the next run measures them again")
        report.set_defaults(func=_autotune_report)
    parser.set_defaults(commands=frozenset(sub.choices))
    return parser


def _check(args: argparse.Namespace) -> None:
    resolution, reports = repo_check.check_repository(args.repo, args.version, args.revision,
                                                      hub=args.hub)
    print(f"{args.repo} at {printable(resolution.ref)} ({printable(resolution.commit[:12])})")
    for report in reports:
        print(f"  {'ok  ' if report.ok else 'FAIL'} {printable(report.variant)}")
        for problem in report.problems:
            print(f"       {printable(problem)}")
    failed = [r.variant for r in reports if not r.ok]
    if failed:
        raise KernelHubError(f"{len(failed)} of {len(reports)} variants failed the check")
    print(f"all {len(reports)} variants pass")


def _lock(args: argparse.Namespace) -> None:
    paths, entries = api.lock_project(args.project_dir, fmt=args.lock_format)
    for entry in entries:
        print(f"{printable(entry.repo_id)}: {printable(entry.sha)} "
              f"({len(entry.variant_hashes)} variants)")
    print(f"wrote {' and '.join(printable(str(p)) for p in paths)}")


def _download(args: argparse.Namespace) -> None:
    for path in api.download_locked(args.project_dir, all_variants=args.all_variants):
        print(printable(str(path)))


def _autotune_report(args: argparse.Namespace) -> None:
    if args.command == "verify-report":
        print("kernelhub verify-report is deprecated: use kernelhub autotune-report",
              file=sys.stderr)
    records = autotune_store.stored_records(args.name, args.model)
    if not records:
        print("no autotuning decisions cached" + (f" for {error_line(args.model)}"
                                                   if args.model else "")
              + " (run a model with kernelize(..., autotune=True))")
        return
    if args.forget:
        removed = autotune_report.forget_decisions(args.model, args.name)
        print(f"forgot {removed} autotuning decision{'s' if removed != 1 else ''}; the next "
              "run with autotune=True measures again")
        return
    for record in records:
        key, d = record.key, record.decision
        times = ""
        if d.kernel_s is not None and d.pytorch_s is not None:
            times = f" [kernel {d.kernel_s * 1e3:.3f} ms, pytorch {d.pytorch_s * 1e3:.3f} ms]"
        print(printable(f"{key.get('name')} ({key.get('kernel')}) {key.get('bucket')}: "
                        f"{d.chosen} — {d.reason}{times}"))  # records on disk: anyone's words
        print(printable(f"    on {key.get('device')}, torch {key.get('torch')}, "
                        f"{key.get('threads')} threads; reference {key.get('reference')} "
                        f"({key.get('reference_version')})"
                        + (f"; used by {', '.join(record.models)}" if record.models else "")))


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    try:
        if argv and not argv[0].startswith("-") and argv[0] not in _commands(parser):
            # None: no such command anywhere, and argparse names the choices
            if (command := optional_commands.load(argv[0])) is not None:
                return command(argv[1:])
        elif not argv or argv[0] in ("-h", "--help"):
            _describe_optional_commands(parser)
        args = parser.parse_args(argv)
        args.func(args)
    except KernelHubError as e:
        print(f"kernelhub: error: {error_line(e)}", file=sys.stderr)
        return 1
    return 0


def _commands(parser: argparse.ArgumentParser) -> Collection[str]:
    """The names of kernelhub's own subcommands."""
    return parser.get_default("commands")


def _describe_optional_commands(parser: argparse.ArgumentParser) -> None:
    """List the commands other distributions add (:mod:`.optional_commands`) in the help."""
    lines = optional_commands.help_lines()
    width = max(len(name) for name, _ in lines)
    parser.epilog = "commands from other distributions:\n" + "\n".join(
        f"  {name:<{width}}  {text}" for name, text in lines)
    parser.formatter_class = argparse.RawDescriptionHelpFormatter


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
