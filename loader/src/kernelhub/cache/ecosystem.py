"""The ecosystem's download cache as a source of bytes, so a machine that ran ``kernels``
does not download a variant again.

huggingface_hub keeps what the ecosystem's loader fetched at
``<HF_HUB_CACHE>/<type>s--<org>--<name>/snapshots/<commit>/<path>``. Nothing there is
trusted: a variant is taken from it only when every file the hub lists for the variant at
that commit is there and matches the listed content hash, and it is then checked like any
download (its metadata digests) before kernelhub's cache keeps it. Anything missing or
different, and the variant is downloaded as usual.
"""

from __future__ import annotations

__lazy_modules__ = {"kernelhub.hub.base", "kernelhub.hub.hashes"}  # PEP 810: imported when first used

import os
from pathlib import Path

from ..hub.base import BUILD_DIR, Hub, TypedReposHub
from ..hub.hashes import HubHashes, matches_hash


def hf_hub_cache() -> Path:
    """huggingface_hub's cache: ``$HF_HUB_CACHE``, else ``$HF_HOME/hub``, else
    ``$XDG_CACHE_HOME/huggingface/hub`` or ``~/.cache/huggingface/hub`` — read at each
    call (huggingface_hub reads it once, at import)."""
    if value := os.environ.get("HF_HUB_CACHE"):
        return Path(value).expanduser()
    home = os.environ.get("HF_HOME") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join("~", ".cache"), "huggingface")
    return Path(home).expanduser() / "hub"


def copy_variant(hub: Hub, repo_id: str, commit: str, variant: str, dest: Path,
                 listed: HubHashes | None) -> bool:
    """Fill the empty dir ``dest`` with ``variant`` from the ecosystem's cache when it holds
    every file ``listed`` (the hub's content hashes at ``commit``) with those hashes;
    False (``dest`` untouched) otherwise, or for a hub that is not a Hub-API server."""
    if not listed or not isinstance(hub, TypedReposHub):
        return False
    try:
        repo_type = hub.type_of(repo_id)
    except Exception:  # the type only says where to look: no answer, no reuse
        return False
    snapshot = (hf_hub_cache() / f"{repo_type}s--{repo_id.replace('/', '--')}" / "snapshots"
                / commit / BUILD_DIR / variant)
    found: dict[str, bytes] = {}
    for rel, expected in listed.items():
        try:
            data = (snapshot / rel).read_bytes()
        except OSError:
            return False
        if not matches_hash(data, expected):
            return False
        found[rel] = data
    for rel, data in found.items():
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        (dest / rel).write_bytes(data)
    return True
