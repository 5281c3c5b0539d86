"""A kernel page shows a variant's provenance as a table (part, field, value), not as the
raw mapping it is stored as."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
from kh_doubles import make_variant


def test_provenance_is_a_table_of_parts_and_fields(server: str, hub: Path,
                                                    tmp_path: Path) -> None:
    from kernelhub_builder.ship import LocalPublisher

    variant = tmp_path / "torch-universal"
    make_variant(variant, name="act")
    LocalPublisher(hub).publish("acme/act", "v1", {"torch-universal": variant}, tag="v1.0.0",
                                message="release 1.0.0")
    page = httpx.get(f"{server}/kernels/acme/act").text
    table = re.search(r'<table class="provenance">.*?</table>', page, re.S)
    assert table, "no provenance table on the kernel page"
    rows = re.findall(r"<tr><td><code>(.*?)</code></td><td>(.*?)</td><td><code>(.*?)</code>",
                      table.group(0))
    assert ("kernel-builder", "version", "test") in rows
    assert "{&#39;" not in page and "{'" not in page  # no Python dict printed anywhere
