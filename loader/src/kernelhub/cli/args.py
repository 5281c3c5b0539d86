"""The arguments several ``kernelhub`` subcommands share, written once: which hub, which
version of the repository, which backend, whether to trust an org outside the trusted
ones."""

from __future__ import annotations

import argparse

from ..system import ALL_BACKENDS


def add_target_args(parser: argparse.ArgumentParser, *, spec: bool = True,
                    trust: bool = False) -> None:
    """``--hub`` and ``--backend``; with ``spec`` ``--version``/``--revision`` (one of
    them), with ``trust`` ``--trust-remote-code``."""
    parser.add_argument("--hub", help="hub path, URL or 'hf', or several separated by commas, "
                        "searched in order (default: see `kernelhub env`)")
    if spec:
        group = parser.add_mutually_exclusive_group()
        group.add_argument("--version", help="int major, tag, branch, specifier or commit")
        group.add_argument("--revision", help="branch, tag or commit")
    parser.add_argument("--backend", choices=ALL_BACKENDS,
                        help="select for this backend instead of the detected one")
    if trust:
        parser.add_argument("--trust-remote-code", action="store_true",
                            help="allow a repository outside the trusted orgs")
