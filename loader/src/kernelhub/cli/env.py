"""``kernelhub env``: the effective hubs, cache, trust and offline state, and where each
came from (:mod:`kernelhub.effective`)."""

from __future__ import annotations

import argparse
import json

from ..effective import effective
from ..printable import printable


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    env = sub.add_parser("env", help="the hubs searched, the cache, trust and offline state")
    env.add_argument("--json", action="store_true", help="one JSON document (stable keys)")
    env.set_defaults(func=_env)


def _env(args: argparse.Namespace) -> None:
    now = effective()
    if args.json:
        print(json.dumps({
            "hubs": list(now.hubs), "hubs_from": now.hubs_from, "cache": str(now.cache),
            "ecosystem_cache": str(now.ecosystem_cache), "trusted_orgs": list(now.trusted_orgs),
            "hub_trusted_orgs": {hub: list(orgs) for hub, orgs in now.hub_trusted_orgs},
            "offline": now.offline, "offline_from": now.offline_from, "token": now.token,
        }, indent=2))
        return
    print(f"hubs (searched in order; from {now.hubs_from}):")
    for i, hub in enumerate(now.hubs, 1):
        print(printable(f"  {i}. {hub}"))
    print(printable(f"cache:            {now.cache}"))
    print(printable(f"ecosystem cache:  {now.ecosystem_cache}"))
    print(f"trusted orgs:     {', '.join(now.trusted_orgs)}")
    for hub, orgs in now.hub_trusted_orgs:
        print(printable(f"  and on {hub}:  {', '.join(orgs)}"))
    print(f"offline:          {'yes' if now.offline else 'no'} ({now.offline_from})")
    print(printable(f"token:            {now.token}"))
