"""``kernelhub info`` and ``kernelhub versions``: what this system would load from a
repository, and its metadata and kernel dependencies."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .. import api, deps
from ..formats.metadata import read_metadata
from ..hub.calls import hub_name
from ..printable import printable
from ..user_files import user_path
from .args import add_target_args


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
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
    tree = api.dependency_tree(target if target.exists() else args.target, args.version,
                               args.revision, hub=args.hub, backend=args.backend)
    root = tree.location
    print("dependency tree:")
    print(f"  {root.name}")
    for line in tree.lines("  ") or ["  (no kernel dependencies)"]:
        print(printable(line))
