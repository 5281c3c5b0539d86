"""Which keys each manifest table allows, derived from the fields of the models.

Every field of :mod:`.model` that is read from TOML says so once, with :func:`toml`: the
dotted path of its key from the top of the file, the editions of ``build.toml`` that have
it, the older spellings it replaces and, for a ``[kernel.<part>]`` field, the part kinds
that take it. The keys a table allows in an edition are computed from those declarations
(:func:`table_keys`), so adding a field to the model is adding its key to the schema, and
no list of keys is written anywhere else — as scikit-build-core derives its settings
schema from its settings dataclasses. :mod:`.migrate` reads the same declarations to
rename an older spelling to the current one.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import MISSING, Field, dataclass, field, fields
from typing import Any

Edition = int | None
"""A build.toml edition; None is the unversioned schema that predates ``general.edition``."""

EDITIONS: frozenset[Edition] = frozenset({None, 5, 6})
CURRENT_EDITION = 6
BEFORE_6: frozenset[Edition] = frozenset({None, 5})

_META = "kernelhub.toml"


@dataclass(frozen=True)
class TomlKey:
    """Where one model field is read from."""

    paths: tuple[str, ...]
    """Dotted paths from the top of the model's file (or its part table), current first."""
    editions: frozenset[Edition]
    old: tuple[str, ...]
    """Older spellings of the first path, read before edition 6 and renamed by migrate."""
    new: tuple[str, ...]
    """Paths only edition 6 has, beside ``paths``."""
    kinds: frozenset[str] | None
    """For part fields: the part kinds that take the key (None: every kind)."""
    nested: type | None
    """The model class the field holds, whose own declarations spell out more keys."""


def toml(
    *paths: str,
    editions: frozenset[Edition] = EDITIONS,
    old: tuple[str, ...] = (),
    new: tuple[str, ...] = (),
    kinds: frozenset[str] | None = None,
    nested: type | None = None,
    default: Any = MISSING,
    default_factory: Any = MISSING,
) -> Any:
    """A dataclass field read from the TOML key(s) ``paths``."""
    meta = {_META: TomlKey(paths, editions, old, new, kinds, nested)}
    if default_factory is not MISSING:
        return field(default_factory=default_factory, metadata=meta)
    return field(default=default, metadata=meta)


def all_paths(model: type) -> set[str]:
    """Every path any edition declares for ``model`` (nested models included)."""
    found: set[str] = set()
    for _, key in declared(model):
        if key.nested is not None:
            found |= all_paths(key.nested)
        found.update(key.paths, key.old, key.new)
    return found


def declared(model: type) -> Iterator[tuple[Field[Any], TomlKey]]:
    """The fields of ``model`` read from TOML, with their declarations."""
    for f in fields(model):
        if (key := f.metadata.get(_META)) is not None:
            yield f, key


def _paths(model: type, edition: Edition, kind: str | None) -> Iterator[str]:
    for _, key in declared(model):
        if key.kinds is not None and kind is not None and kind not in key.kinds:
            continue
        if key.nested is not None:
            yield from _paths(key.nested, edition, kind)
            continue
        if edition in key.editions:
            yield from key.paths
        if edition in BEFORE_6:
            yield from key.old
        elif edition == CURRENT_EDITION:
            yield from key.new


def table_keys(model: type, table: str, edition: Edition, kind: str | None = None) -> tuple[str, ...]:
    """The keys allowed directly in ``table`` (a dotted path, "" for the top level) of a
    file read into ``model``, in declaration order; sub-tables count as keys."""
    prefix = f"{table}." if table else ""
    keys: dict[str, None] = {}
    for path in _paths(model, edition, kind):
        if path.startswith(prefix):
            keys[path[len(prefix):].split(".", 1)[0]] = None
    return tuple(keys)


def renames(model: type) -> Iterator[tuple[str, str]]:
    """(older spelling, current path) for every key edition 6 renamed."""
    for _, key in declared(model):
        if key.nested is not None:
            yield from renames(key.nested)
        for path in key.old:
            yield path, key.paths[0]

