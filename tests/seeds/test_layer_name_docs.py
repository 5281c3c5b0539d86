"""docs/transformers.md lists every name the Transformers table maps, with the kernel each
device gets, exactly as table.py says (the table there is generated from it)."""

from __future__ import annotations

from pathlib import Path

from kernelhub.integrations.transformers import table_doc
from kernelhub.integrations.transformers.table import DEFAULT_MAPPING

PAGE = Path(__file__).resolve().parents[2] / "docs" / "transformers.md"


def test_the_page_lists_the_table_as_it_is():
    assert table_doc.section(PAGE.read_text()) == table_doc.render(), (
        "docs/transformers.md's table differs from table.py: run "
        "python -c \"from pathlib import Path; from kernelhub.integrations.transformers."
        "table_doc import update; update(Path('docs/transformers.md'))\"")


def test_every_mapped_name_and_device_has_its_cell():
    rows = {line.split("|")[1].strip(" `"): line for line in table_doc.render().splitlines()[2:]}
    assert set(rows) == set(DEFAULT_MAPPING)
    for name, devices in DEFAULT_MAPPING.items():
        cells = [c.strip() for c in rows[name].split("|")[3:-1]]
        for device, cell in zip(table_doc.DEVICES, cells, strict=True):
            refs = devices.get(device, [])
            assert (cell == "—") == (not refs), (name, device, cell)
            for ref in refs:
                assert f"`{ref.repo_id}:{ref.name}`" in cell, (name, device, cell)


def test_update_rewrites_only_the_table(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(f"before\n{table_doc.BEGIN}\nstale\n{table_doc.END}\nafter\n")
    assert table_doc.update(page)
    text = page.read_text()
    assert text.startswith("before\n") and text.endswith(f"{table_doc.END}\nafter\n")
    assert table_doc.section(text) == table_doc.render()
    assert not table_doc.update(page)
