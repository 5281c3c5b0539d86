"""Typed access to TOML tables with errors that name the file, the dotted key and the fix.

The manifest loaders (:mod:`.project` for kernels.toml, :mod:`.build_toml` for
build.toml) read every value through :class:`Table`, so every error reads the same way,
after :func:`check_tables` has held every table of the file to the keys the model
declares (:mod:`.keys`).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from kernelhub.tomlfile import TomlError, parse_toml
from kernelhub.user_files import read_bounded

from ..errors import ManifestError
from .keys import CURRENT_EDITION, EDITIONS, Edition, all_paths, renames, table_keys

_MAJOR_MINOR_RE = re.compile(r"(\d+)\.(\d+)(?:\.\d+)?")


def read_toml(file: Path) -> dict[str, Any]:
    try:
        raw = read_bounded(file)
    except FileNotFoundError:
        raise ManifestError(file, None, "file not found") from None
    except OSError as e:
        raise ManifestError(file, None, f"cannot read: {e.strerror or e}") from None
    try:
        return parse_toml(raw)
    except TomlError as e:
        detail = str(e)
        if m := re.search(r"line (\d+)", detail):
            lines = raw.decode("utf-8", errors="replace").splitlines()
            lineno = int(m[1])
            if 0 < lineno <= len(lines):
                detail += f": {lines[lineno - 1].strip()[:200]!r}"
        raise ManifestError(file, None, detail) from None


class Table:
    """One TOML table plus where it came from, so every complaint can name its key."""

    def __init__(self, data: dict[str, Any], file: Path, prefix: str = "") -> None:
        self.data = data
        self.file = file
        self.prefix = prefix

    def key(self, name: str) -> str:
        return f"{self.prefix}.{name}" if self.prefix else name

    def error(self, name: str | None, problem: str) -> ManifestError:
        return ManifestError(self.file, self.key(name) if name else self.prefix or None, problem)

    def __contains__(self, name: str) -> bool:
        return name in self.data

    def check_keys(self, allowed: Iterable[str], hint: str = "") -> None:
        allowed = list(allowed)
        for name in self.data:
            if name in allowed:
                continue
            close = difflib.get_close_matches(name, allowed, n=1)
            guess = f"did you mean {close[0]!r}? " if close else ""
            where = f"[{self.prefix}]" if self.prefix else "the top level"
            raise self.error(
                name, f"unknown key; {guess}allowed in {where}: {', '.join(allowed)}{hint}"
            )

    def check_model_keys(self, model: type, edition: Edition, kind: str | None = None,
                         path: str | None = None) -> None:
        """Only the keys ``model`` declares for this table (at ``path``, default its
        prefix) in ``edition``; a key another edition has says which, and how to move."""
        path = self.prefix if path is None else path
        allowed = table_keys(model, path, edition, kind)
        for name in self.data:
            if name not in allowed:
                where = f"{path}.{name}" if path else name
                raise self.error(name, _edition_hint(model, where, name, edition, kind)
                                 or _unknown(name, allowed, path))

    def check_tables(self, model: type, edition: Edition) -> None:
        """Every table of this document holds only the keys ``model`` declares.

        Tables whose path a field declares as a whole (``kernel``, ``[torch.stable-abi]``,
        ``[releases]``) are values, checked by the loader that reads them.
        """
        self.check_model_keys(model, edition)
        leaves = all_paths(model)
        for name, value in self.data.items():
            path = self.key(name)
            if isinstance(value, dict) and path not in leaves:
                Table(value, self.file, path).check_tables(model, edition)

    def _get(self, name: str, kind: type | tuple[type, ...], what: str, required: bool) -> Any:
        if name not in self.data:
            if required:
                raise self.error(name, f"missing; it is required ({what})")
            return None
        value = self.data[name]
        if isinstance(value, bool) and kind is not bool:  # bool is an int subclass
            raise self.error(name, f"expected {what}, got a boolean ({value!r})")
        if not isinstance(value, kind):
            raise self.error(name, f"expected {what}, got {type(value).__name__} {value!r}")
        return value

    def get_str(self, name: str, required: bool = False) -> str | None:
        value = self._get(name, str, "a string", required)
        if value is not None and not value.strip():
            raise self.error(name, "must not be empty")
        return value

    def get_int(self, name: str, required: bool = False) -> int | None:
        value = self._get(name, int, "an integer", required)
        if value is not None and value < 0:
            raise self.error(name, f"must be 0 or more, got {value}")
        return value

    def get_bool(self, name: str) -> bool:
        return bool(self._get(name, bool, "true or false", False))

    def get_strs(self, name: str, required: bool = False) -> tuple[str, ...]:
        value = self._get(name, list, "a list of strings", required)
        if value is None:
            return ()
        for item in value:
            if not isinstance(item, str) or not item.strip():
                raise self.error(name, f"expected a list of non-empty strings, found {item!r}")
        return tuple(value)

    def get_table(self, name: str) -> Table | None:
        value = self._get(name, dict, "a table", False)
        return None if value is None else Table(value, self.file, self.key(name))


def _unknown(name: str, allowed: tuple[str, ...], path: str) -> str:
    close = difflib.get_close_matches(name, allowed, n=1)
    guess = f"did you mean {close[0]!r}? " if close else ""
    where = f"[{path}]" if path else "the top level"
    return f"unknown key; {guess}allowed in {where}: {', '.join(allowed) or 'none'}"


def _edition_hint(model: type, where: str, name: str, edition: Edition,
                  kind: str | None) -> str | None:
    """What to do about a key that is valid in another edition, or None."""
    renamed = dict(renames(model))
    if edition == CURRENT_EDITION and where in renamed:
        return (f"edition {CURRENT_EDITION} spells this {renamed[where]!r}; "
                "builder migrate renames it")
    table = where.rsplit(".", 1)[0] if "." in where else ""
    for other in sorted(EDITIONS - {edition}, key=lambda e: e or 0):
        if name not in table_keys(model, table, other, kind):
            continue
        if other == CURRENT_EDITION:
            return (f"an edition-{CURRENT_EDITION} key; set general.edition = "
                    f"{CURRENT_EDITION} (builder migrate rewrites the file for it)")
        if edition == CURRENT_EDITION:
            return f"not part of edition {CURRENT_EDITION}; remove it"
    return None


def major_minor(table: Table, name: str, value: str | None, what: str) -> str | None:
    """Normalise "2.13" / "2.13.0" to "2.13" so every comparison is on major.minor."""
    if value is None:
        return None
    if not (m := _MAJOR_MINOR_RE.fullmatch(value)):
        raise table.error(name, f"{value!r} is not a {what} version such as '2.13'")
    return f"{int(m[1])}.{int(m[2])}"


def version_key(version: str) -> tuple[int, int]:
    """Sort key of a normalised major.minor string."""
    major, minor = version.split(".")[:2]
    return int(major), int(minor)


# --------------------------------------------------------------------------- kernels.toml


def relative_path(table: Table, key: str, root: Path, entry: str) -> Path:
    path = Path(entry)
    resolved = (root / path).resolve()
    if path.is_absolute() or not resolved.is_relative_to(root):
        raise table.error(key, f"{entry!r} must be a path inside the kernel directory {root}")
    return resolved


def existing_files(table: Table, key: str, root: Path, required: bool = False) -> tuple[str, ...]:
    entries = table.get_strs(key, required=required)
    for entry in entries:
        if not relative_path(table, key, root, entry).is_file():
            raise table.error(key, f"source file {entry!r} does not exist (looked in {root})")
    return entries


def existing_dirs(table: Table, key: str, root: Path) -> tuple[str, ...]:
    entries = table.get_strs(key)
    for entry in entries:
        if not relative_path(table, key, root, entry).is_dir():
            raise table.error(key, f"include directory {entry!r} does not exist (looked in {root})")
    return entries
