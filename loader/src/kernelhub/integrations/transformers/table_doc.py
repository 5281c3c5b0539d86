"""docs/transformers.md's table of every mapped name, written from :data:`.table.DEFAULT_MAPPING`
so the page cannot drift from the table (a test compares them).

The page holds the table between two marker lines; :func:`update` rewrites only what lies
between them.
"""

from __future__ import annotations

from pathlib import Path

from ...layer.mapping import Mode
from .table import DEFAULT_MAPPING, FUNCTION_NAMES, KernelRef

BEGIN = "<!-- mapped-names:begin (generated from table.py; see table_doc.py) -->"
END = "<!-- mapped-names:end -->"
DEVICES = ("cpu", "cuda", "rocm", "xpu")


def _modes(ref: KernelRef) -> str:
    modes = [m for m in ref.modes if m is not None]
    served = {name for name, flag in (("training", Mode.TRAINING), ("inference", Mode.INFERENCE))
              if any(flag in m for m in modes)}
    if not served or served == {"training", "inference"}:  # every mode
        return ""
    return f" ({', '.join(sorted(served))})"


def _cell(refs: list[KernelRef]) -> str:
    """One device's entries: ``repo:name vN`` (or ``@revision``), capability range, modes."""
    parts = []
    for ref in refs:
        pin = (f" v{ref.version}" if ref.version is not None
               else f" @{ref.revision[:7]}" if ref.revision else "")
        where = ""
        if ref.capability:
            low, high = (f"{c // 10}.{c % 10}" for c in ref.capability)
            where = f", capability {low}" + ("" if low == high else f" to {high}")
        parts.append(f"`{ref.repo_id}:{ref.name}`{pin}{where}{_modes(ref)}")
    return "<br>".join(dict.fromkeys(parts)) or "—"


def render() -> str:
    """The markdown table: one row per mapped name, one column per device."""
    lines = ["| name | kind | " + " | ".join(DEVICES) + " |",
             "|---|---|" + "---|" * len(DEVICES)]
    for name in sorted(DEFAULT_MAPPING, key=str.lower):
        devices = DEFAULT_MAPPING[name]
        kind = "function" if name in FUNCTION_NAMES else "layer"
        cells = [_cell(devices.get(d, [])) for d in DEVICES]
        lines.append(f"| `{name}` | {kind} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def section(text: str) -> str:
    """What ``text`` (the page) holds between the markers."""
    start, end = text.index(BEGIN) + len(BEGIN), text.index(END)
    return text[start:end].strip("\n")


def update(path: Path) -> bool:
    """Rewrite the table in the page at ``path``; whether it changed."""
    text = path.read_text()
    start, end = text.index(BEGIN) + len(BEGIN), text.index(END)
    new = text[:start] + "\n" + render() + "\n" + text[end:]
    if new != text:
        path.write_text(new)
    return new != text
