"""``kernelhub lock`` and ``kernelhub download``: pin a project's kernels, and fetch what
the pins name into the cache."""

from __future__ import annotations

import argparse
from pathlib import Path

from .. import api
from ..printable import printable
from ..user_files import cli_path


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
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


def _lock(args: argparse.Namespace) -> None:
    paths, entries = api.lock_project(args.project_dir, fmt=args.lock_format)
    for entry in entries:
        print(f"{printable(entry.repo_id)}: {printable(entry.sha)} "
              f"({len(entry.variant_hashes)} variants)")
    print(f"wrote {' and '.join(printable(str(p)) for p in paths)}")


def _download(args: argparse.Namespace) -> None:
    for path in api.download_locked(args.project_dir, all_variants=args.all_variants):
        print(printable(str(path)))
