"""The route table is the protocol's one declaration: docs/serve.md carries it as
generated, and every route's parameters have a check."""

from __future__ import annotations

import re
from pathlib import Path

DOCS = Path(__file__).parents[2] / "docs" / "serve.md"


def test_the_documented_route_table_is_the_declared_one() -> None:
    from kernelhub_serve.routes import table_markdown

    text = DOCS.read_text()
    found = re.search(r"<!-- route table: begin -->\n(.*?)<!-- route table: end -->", text,
                      re.S)
    assert found, "docs/serve.md lost its route table markers"
    assert found.group(1) == table_markdown(), (
        "docs/serve.md's route table differs from kernelhub_serve.routes.TABLE: paste "
        "table_markdown()'s output between the markers")


def test_every_route_parameter_has_a_check() -> None:
    from kernelhub_serve.routes import _CHECKS, TABLE

    for row in TABLE:
        for name in re.findall(r"\{(\w+)\*?\}", row.pattern):
            assert name in _CHECKS, f"{row.pattern}: no check for {{{name}}} in names.py"
