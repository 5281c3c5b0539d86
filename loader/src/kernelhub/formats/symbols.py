"""symbols.json: a variant's public functions and layers, readable without importing it.

The kernel ecosystem's builder writes ``symbols.json`` next to ``metadata.json`` (covered
by the digest like every other file) and its ``kernels describe-api`` reads it; so do we,
in the same shape (schema 1)::

    {"schema_version": 1, "module": "<the variant's id>",
     "functions": [{"name": "silu_and_mul", "doc": "...",
                    "signature": {"parameters": [{"name": "out", "kind": "POSITIONAL_OR_KEYWORD",
                                                  "annotation": "torch.Tensor"}, ...],
                                  "return_annotation": "torch.Tensor"}}, ...],
     "layers": [{"name": "SiluAndMul", "doc": "...",
                 "attributes": {"has_backward": false, "can_torch_compile": true}}, ...]}

The ecosystem's reader needs ``schema_version`` 1, ``functions`` and ``layers`` as lists
of objects with a string ``name``, and layer ``attributes`` that are booleans or null
(null: the layer does not say). Everything else is description and may grow.

:func:`symbols_of` is the one definition of what a kernel exports, used by the builder
to write the file: the names in the package's ``__all__`` (else its public names) that
are functions, and the classes of its ``layers`` submodule (its ``__all__``, else the
classes it defines). It reads them as objects — nothing is called or instantiated.
"""

from __future__ import annotations

import base64
import hashlib
import inspect
import json
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

from ..errors import KernelHubError
from ..value_types import Record

SYMBOLS_FILE = "symbols.json"
SCHEMA_VERSION = 1
LAYER_ATTRIBUTES: tuple[str, ...] = ("has_backward", "can_torch_compile")
"""The class attributes kernelize reads from a layer, recorded as they are written."""


class SymbolsError(KernelHubError, ValueError):
    """A variant's symbols.json is missing, malformed or does not match its digest."""


class FunctionSymbol(Record, frozen=True):
    name: str
    signature: dict[str, object] | None = None
    doc: str | None = None

    def to_json(self) -> dict[str, object]:
        return {"name": self.name, "signature": self.signature, "doc": self.doc}


class LayerSymbol(Record, frozen=True):
    name: str
    attributes: tuple[tuple[str, bool | None], ...] = ()
    """(attribute, value) pairs in :data:`LAYER_ATTRIBUTES` order; None: not said."""
    doc: str | None = None

    def attribute(self, name: str) -> bool | None:
        return dict(self.attributes).get(name)

    def to_json(self) -> dict[str, object]:
        return {"name": self.name, "attributes": dict(self.attributes), "doc": self.doc}


class Symbols(Record, frozen=True):
    """What one variant exports."""

    module: str
    functions: tuple[FunctionSymbol, ...] = ()
    layers: tuple[LayerSymbol, ...] = ()

    def to_json(self) -> dict[str, object]:
        return {"schema_version": SCHEMA_VERSION, "module": self.module,
                "functions": [f.to_json() for f in self.functions],
                "layers": [layer.to_json() for layer in self.layers]}

    def dumps(self) -> str:
        """The file's text: stable (sorted members, two-space indent, final newline), so
        two builds of the same sources write the same bytes."""
        return json.dumps(self.to_json(), indent=2, ensure_ascii=False) + "\n"


# -- reading -------------------------------------------------------------------------


def parse_symbols(raw: bytes, where: str = SYMBOLS_FILE) -> Symbols:
    """Parse symbols.json; SymbolsError (one line) for anything the ecosystem's reader
    would refuse too."""
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise SymbolsError(f"{where} is not JSON ({e}); rebuild the variant") from None
    if not isinstance(data, dict) or data.get("schema_version") != SCHEMA_VERSION:
        raise SymbolsError(
            f"{where}: unsupported schema (schema_version must be {SCHEMA_VERSION}); "
            "a newer kernelhub may read it"
        )
    for group in ("functions", "layers"):
        items = data.get(group)
        if not isinstance(items, list) or not all(
                isinstance(item, dict) and isinstance(item.get("name"), str) for item in items):
            raise SymbolsError(f"{where}: {group} must be a list of objects with a string name")
    functions = tuple(FunctionSymbol(f["name"], _object_or_none(f.get("signature")),
                                     _str_or_none(f.get("doc"))) for f in data["functions"])
    layers = []
    for layer in data["layers"]:
        attributes = layer.get("attributes")
        if not isinstance(attributes, dict) or not all(
                value is None or isinstance(value, bool) for value in attributes.values()):
            raise SymbolsError(
                f"{where}: layer {layer['name']!r}: attributes must be booleans or null")
        layers.append(LayerSymbol(layer["name"], tuple(attributes.items()),
                                  _str_or_none(layer.get("doc"))))
    module = data.get("module")
    return Symbols(module if isinstance(module, str) else "", functions, tuple(layers))


def read_variant_symbols(variant_dir: Path, digest_files: dict[str, str]) -> Symbols:
    """The symbols of a built variant, checked against its metadata digest first: the file
    is data, but a description that does not belong to the build would mislead."""
    path = variant_dir / SYMBOLS_FILE
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise SymbolsError(
            f"{variant_dir.name} has no {SYMBOLS_FILE}; it was built before builders wrote "
            "one (rebuild it with `builder build`, or import it and use dir())"
        ) from None
    except OSError as e:
        raise SymbolsError(f"cannot read {path}: {e.strerror or e}") from None
    expected = digest_files.get(SYMBOLS_FILE)
    if expected is not None:
        got = base64.b64encode(hashlib.sha256(raw).digest()).decode()
        if got != expected:
            raise SymbolsError(f"{path} does not match the digest in metadata.json; "
                               "the file was changed after the build")
    return parse_symbols(raw, str(path))


def _object_or_none(value: object) -> dict[str, object] | None:
    return value if isinstance(value, dict) else None


def _str_or_none(value: object) -> str | None:
    return value if isinstance(value, str) else None


# -- writing (the builder) ------------------------------------------------------------


def symbols_of(module: ModuleType, module_id: str | None = None) -> Symbols:
    """What ``module`` (an imported variant) exports; nothing is called or instantiated."""
    functions = []
    for name in _exported(module):
        value = getattr(module, name, None)
        if inspect.isfunction(value) or inspect.isbuiltin(value):
            functions.append(FunctionSymbol(name, _signature(value), inspect.getdoc(value)))
    layers = []
    layer_module = getattr(module, "layers", None)
    if isinstance(layer_module, ModuleType):
        for name in _exported(layer_module, classes_only=True):
            cls = getattr(layer_module, name, None)
            if inspect.isclass(cls):
                attributes = tuple((a, _bool_or_none(getattr(cls, a, None)))
                                   for a in LAYER_ATTRIBUTES)
                layers.append(LayerSymbol(name, attributes, inspect.getdoc(cls)))
    return Symbols(module_id or module.__name__, tuple(sorted(functions, key=lambda f: f.name)),
                   tuple(sorted(layers, key=lambda layer: layer.name)))


def _exported(module: ModuleType, classes_only: bool = False) -> list[str]:
    names = getattr(module, "__all__", None)
    if isinstance(names, (list, tuple)) and all(isinstance(n, str) for n in names):
        return sorted(set(names))
    public = [n for n in vars(module) if not n.startswith("_")]
    if classes_only:  # without __all__: the classes the module itself defines
        return sorted(n for n in public if inspect.isclass(vars(module)[n])
                      and vars(module)[n].__module__ == module.__name__)
    return sorted(public)


def _bool_or_none(value: object) -> bool | None:
    return value if isinstance(value, bool) else None


def _annotation(value: object) -> str | None:
    if value is inspect.Parameter.empty:
        return None
    return value if isinstance(value, str) else inspect.formatannotation(value)


def _signature(function: Callable[..., object]) -> dict[str, object] | None:
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):  # some builtins have none
        return None
    parameters = []
    for p in signature.parameters.values():
        entry: dict[str, object] = {"name": p.name, "kind": p.kind.name,
                                 "annotation": _annotation(p.annotation)}
        if p.default is not inspect.Parameter.empty:
            entry["default"] = repr(p.default)
        parameters.append(entry)
    return {"parameters": parameters,
            "return_annotation": _annotation(signature.return_annotation)}
