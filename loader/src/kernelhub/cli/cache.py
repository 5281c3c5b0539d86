"""``kernelhub cache``: list, locate or clear the kernel cache."""

from __future__ import annotations

import argparse
import json
import time

from ..cache import KernelCache
from ..cache import listing as cache_listing
from ..printable import printable


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    cache = sub.add_parser("cache", help="list, locate or clear the kernel cache")
    cache.add_argument("action", choices=["ls", "path", "clear"])
    cache.add_argument("--json", action="store_true", help="ls: one JSON document")
    cache.set_defaults(func=_cache)


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
