"""``kernelhub check``: every variant of a published repository checked, nothing imported."""

from __future__ import annotations

import argparse

from .. import repo_check
from ..errors import KernelHubError
from ..printable import printable
from .args import add_target_args


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    check = sub.add_parser(
        "check", help="check every variant of a published repository (nothing is imported)"
    )
    check.add_argument("repo", help="org/name")
    add_target_args(check)
    check.set_defaults(func=_check)


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
