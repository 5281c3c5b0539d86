"""``kernelhub variants``: the build variants of a repository and what this system makes of
each, per kernel version (``kernelhub versions``, deprecated, shows one resolved ref).

The options and the ``--json`` document follow the kernel ecosystem's ``kernels variants``
(0.19), so scripts written for it read ours: ``{"repo_id", "revisions": [{"version",
"revision", "variants": [{"variant", "compatible", "preferred", "reason"}]}]}``; kernelhub
adds ``commit``, ``hub`` and ``system`` (extra keys, never renamed: the shape is stable).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from .. import api
from ..errors import KernelHubError
from ..hub.calls import hub_name
from ..printable import printable
from ..versions import branch_major
from .args import add_target_args


def _version_arg(value: str) -> int | str:
    if value == "latest":
        return value
    try:
        return int(value)
    except ValueError:
        raise argparse.ArgumentTypeError("the version is an integer or 'latest'") from None


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    variants = sub.add_parser(
        "variants", help="build variants of a repository and which this system would load")
    variants.add_argument("repo", help="org/name")
    which = variants.add_mutually_exclusive_group()
    which.add_argument("--all-versions", action="store_true",
                       help="every kernel version (v<N> branch), not only the latest")
    which.add_argument("--version", type=_version_arg,
                       help="one kernel version: an integer or 'latest' (the default)")
    which.add_argument("--revision", help="a branch, tag or commit instead of a version")
    variants.add_argument("--only-compatible", action="store_true",
                          help="only the variants this system can load")
    variants.add_argument("--json", action="store_true", help="one JSON document (stable keys)")
    add_target_args(variants, spec=False)
    variants.set_defaults(func=_variants)


def _selected(args: argparse.Namespace) -> list[tuple[int | None, str]]:
    """(version or None, ref) pairs to show, from the options."""
    if args.revision is not None:
        return [(None, args.revision)]
    refs = api.list_refs(args.repo, hub=args.hub)
    versions = {major: name for name in refs.branches
                if (major := branch_major(name)) is not None}
    if not versions:
        raise KernelHubError(
            f"{args.repo} has no kernel versions (no v<N> branches; branches: "
            f"{', '.join(sorted(refs.branches)) or 'none'}); name one with --revision")
    if args.all_versions:
        return [(v, versions[v]) for v in sorted(versions)]
    if args.version in (None, "latest"):
        latest = max(versions)
        return [(latest, versions[latest])]
    if args.version not in versions:
        raise KernelHubError(
            f"{args.repo} has no version {args.version}; versions: "
            f"{', '.join(str(v) for v in sorted(versions))}")
    return [(args.version, versions[args.version])]


def _revision_report(args: argparse.Namespace, version: int | None, ref: str) -> dict[str, Any]:
    resolution = api.resolve_kernel(args.repo, revision=ref, hub=args.hub, backend=args.backend)
    selection = resolution.selection
    rows = [{"variant": name, "compatible": True, "preferred": name == selection.chosen,
             "reason": None} for name in selection.ranked]
    if not args.only_compatible:
        rows += [{"variant": name, "compatible": False, "preferred": False, "reason": why}
                 for name, why in sorted(selection.rejected.items())]
    return {"version": version, "revision": ref, "commit": resolution.commit, "variants": rows,
            "system": resolution.system.describe(), "hub": resolution.hub.key,
            "hub_name": hub_name(resolution.hub),
            "release": api.describe_signature(resolution)}


def _variants(args: argparse.Namespace) -> None:
    reports = [_revision_report(args, version, ref) for version, ref in _selected(args)]
    if args.json:
        print(json.dumps({"repo_id": args.repo, "revisions": reports}, indent=2))
        return
    for i, report in enumerate(reports):
        revision = printable(report["revision"])  # ref names and the rest: the hub's words
        label = (f"version {report['version']}" if report["version"] is not None
                 else f"revision {revision}")
        print(f"{'' if i == 0 else chr(10)}{args.repo} {label} "
              f"({revision} -> {printable(report['commit'][:12])}) on {report['system']}:")
        print(f"  hub:     {printable(report['hub_name'])}")
        print(f"  release: {printable(report['release'])}")
        if not report["variants"]:
            print("  (no compatible variant)" if args.only_compatible else "  (no build variants)")
        width = max((len(printable(r["variant"])) for r in report["variants"]), default=0)
        for row in report["variants"]:
            verdict = ("preferred" if row["preferred"] else "compatible") if row["compatible"] \
                else f"rejected: {row['reason']}"
            print(f"  {'*' if row['preferred'] else ' '} {printable(row['variant']):<{width}}  "
                  f"{printable(verdict)}")
