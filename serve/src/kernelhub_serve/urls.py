"""URL pieces for the pages' templates: a revision is one path segment (``/`` and all
quoted, as huggingface_hub sends it, so ``refs/pr/1`` stays one segment), a file path
keeps its slashes."""

from __future__ import annotations

from urllib.parse import quote


def segment(value: object) -> str:
    return quote(str(value), safe="")


def file_path(value: object) -> str:
    return quote(str(value), safe="/")


FILTERS = {"seg": segment, "fpath": file_path}
"""Registered on the pages' jinja2 environment."""
