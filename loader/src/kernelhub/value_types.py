"""The loader's one way to declare a value type: subclass :class:`Record`.

Why not ``@dataclass``: it writes ``__init__``, ``__eq__``, ``__repr__`` (and more) as
source text and ``exec``-s it for every class, at import. Measured with
``benchmarks/value_types.py`` (fresh processes, frozen classes of five fields, on the
shared 2-core machine): a dataclass costs ~0.65 ms to define, ``slots=True`` as much
(it builds the class twice), a Record ~0.06 ms. The load path alone declares about
twenty value types, against a budget of 20 ms for ``import kernelhub`` plus a warm load.
:class:`Record` gives dataclass behaviour from one shared implementation instead:

* fields are the annotations of the class and its Record bases, in definition order
  (bases first, as dataclasses collect them); a class attribute is the field's default;
  :func:`field` gives a ``default_factory``, ``kw_only`` fields (keyword-only in
  ``__init__``, after the positional ones), ``compare=False`` fields (left out of
  equality, hashing and ordering, as a dataclass field with ``compare=False``) and
  ``repr=False`` fields (left out of ``__repr__``);
* the constructor takes the positional fields positionally or by keyword; ``__eq__``
  compares the compared fields of two instances of the same class; ``__repr__`` is
  ``Name(field=value, ...)``;
* a class that checks or normalises its values defines ``__post_init__``, as a
  dataclass does. It runs after ``Record.__new__`` has set the fields: Python calls it as
  the instance's ``__init__``, so it is handed the constructor's arguments too and
  ignores them (``def __post_init__(self, *_args: object, **_kwargs: object)``). So
  constructing a checked value goes from the caller into the class's own module and
  back, never through this module into the class again (``benchmarks/module_path.py``
  counts such returns). Copies and pickles are rebuilt through ``__new__`` from the
  field values, without running the check again;
* ``frozen=True`` refuses assignment (``dataclasses.FrozenInstanceError``, an
  AttributeError) and hashes by the compared fields; ``order=True`` compares them as
  tuples;
* :func:`replace`, :func:`fields` and :func:`asdict` are ``dataclasses``' functions of
  those names (``asdict`` is shallow: the value types hold plain data).

Type checkers read the classes as dataclasses (``dataclass_transform``), so constructor
calls and frozen fields are checked as before.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from dataclasses import FrozenInstanceError
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

if TYPE_CHECKING:  # typing has it from Python 3.11; at run time it only marks the class
    from typing_extensions import dataclass_transform
else:
    def dataclass_transform(**_: object) -> Callable[[type], type]:
        return lambda cls: cls

R = TypeVar("R", bound="Record")

_MISSING: Any = object()


class _Field:
    """What :func:`field` declares: how a field is defaulted, passed and compared."""

    __slots__ = ("compare", "default", "factory", "kw_only", "shown")

    def __init__(self, default: object, factory: Callable[[], object] | None,
                 kw_only: bool, compare: bool, shown: bool = True) -> None:
        self.default = default
        self.factory = factory
        self.kw_only = kw_only
        self.compare = compare
        self.shown = shown


def field(*, default: Any = _MISSING, default_factory: Callable[[], Any] | None = None,
          kw_only: bool = False, compare: bool = True, repr: bool = True) -> Any:
    """A field with a per-instance default (``default_factory()``), passed by keyword
    only (``kw_only``), left out of comparisons (``compare=False``) or of the repr
    (``repr=False``: a value that is noise there, such as a found lock entry)."""
    return _Field(default, default_factory, kw_only, compare, repr)


_FACTORY: object = getattr(dataclasses, "_HAS_DEFAULT_FACTORY", "<factory>")
"""What a dataclass's signature shows as the default of a field with a factory."""


class _Signature:
    """``inspect.signature`` of a Record class: its fields as ``__init__`` takes them, as a
    dataclass shows them (``help()``, IDEs and the ecosystem-API comparison read it).
    Computed when asked for, so defining a class stays cheap."""

    def __get__(self, instance: object, owner: type[Record]) -> inspect.Signature:
        P = inspect.Parameter
        params = [
            P(name, P.POSITIONAL_OR_KEYWORD if name in owner._positional else P.KEYWORD_ONLY,
              default=(P.empty if (d := owner._defaults.get(name, _MISSING)) is _MISSING
                       else _FACTORY if isinstance(d, _Field) else d))
            for name in owner._fields
        ]
        positional = [p for p in params if p.kind is P.POSITIONAL_OR_KEYWORD]
        keyword = [p for p in params if p.kind is P.KEYWORD_ONLY]
        return inspect.Signature(positional + keyword)


def _is_class_var(annotation: object) -> bool:
    return str(annotation).startswith(("ClassVar", "typing.ClassVar"))


@dataclass_transform(field_specifiers=(field,))
class Record:
    """Base of the loader's value types (see the module docstring)."""

    __slots__ = ()
    _fields: ClassVar[tuple[str, ...]] = ()
    """Every field, in declaration order."""
    _positional: ClassVar[tuple[str, ...]] = ()
    """The fields ``__init__`` takes by position (the others are keyword-only)."""
    _compared: ClassVar[tuple[str, ...]] = ()
    """The fields equality, hashing and ordering look at."""
    _shown: ClassVar[tuple[str, ...]] = ()
    """The fields ``__repr__`` shows."""
    _defaults: ClassVar[dict[str, object]] = {}
    """Field → default value, or the :class:`_Field` whose factory makes one."""
    _own: ClassVar[dict[str, _Field]] = {}
    """The fields this class itself declares (its annotations)."""
    __signature__: ClassVar[inspect.Signature] = _Signature()  # type: ignore[assignment]

    def __init_subclass__(cls, *, frozen: bool = False, order: bool = False) -> None:
        super().__init_subclass__()
        namespace = cls.__dict__
        # One pass each over the annotations and the fields: about twenty Records are
        # defined on every warm load's import path (see the module docstring).
        annotations = namespace.get("__annotations__")
        if type(annotations) is not dict:  # none declared, or Python 3.14's lazy ones
            annotations = inspect.get_annotations(cls)
        own: dict[str, _Field] = {}
        for name, kind in annotations.items():
            if _is_class_var(kind):
                continue
            value = namespace.get(name, _MISSING)
            if isinstance(value, _Field):  # the class attribute becomes the plain default
                own[name] = value
                if value.factory is None and value.default is not _MISSING:
                    setattr(cls, name, value.default)
                else:
                    delattr(cls, name)
            else:
                own[name] = _Field(value, None, False, True)
        cls._own = own
        specs: dict[str, _Field] = {}
        for base in reversed(cls.__mro__):  # bases first, as dataclasses collect fields
            for name, spec in base.__dict__.get("_own", {}).items():
                specs.pop(name, None)
                specs[name] = spec
        positional: list[str] = []
        compared: list[str] = []
        shown: list[str] = []
        defaults: dict[str, object] = {}
        for name, spec in specs.items():
            if not spec.kw_only:
                positional.append(name)
            if spec.compare:
                compared.append(name)
            if spec.shown:
                shown.append(name)
            if spec.factory is not None:
                defaults[name] = spec
            elif spec.default is not _MISSING:
                defaults[name] = spec.default
        cls._fields = tuple(specs)
        cls._positional = tuple(positional)
        cls._compared = tuple(compared)
        cls._shown = tuple(shown)
        cls._defaults = defaults
        methods: dict[str, object] = {"__match_args__": cls._positional}
        if frozen:
            methods.update(__setattr__=_refuse_assignment, __delattr__=_refuse_assignment,
                           __hash__=_hash_fields)
        else:
            methods["__hash__"] = None  # mutable and compared by value: unhashable
        if order:
            methods.update(_ORDER_METHODS)
        if (check := cls.__dict__.get("__post_init__")) is not None:
            methods["__init__"] = _runs_as_init(cls, check)
        for name, value in methods.items():
            setattr(cls, name, value)

    def __new__(cls: type[R], *args: object, **kwargs: object) -> R:
        self = object.__new__(cls)
        positional, name = cls._positional, cls.__name__
        if len(args) > len(positional):
            raise TypeError(
                f"{name}() takes {len(positional)} positional arguments but {len(args)} "
                "were given")
        values = dict(zip(positional, args, strict=False))
        for key, value in kwargs.items():
            if key not in self._fields:
                raise TypeError(f"{name}() got an unexpected keyword argument {key!r}")
            if key in values:
                raise TypeError(f"{name}() got multiple values for argument {key!r}")
            values[key] = value
        for key in self._fields:
            if key in values:
                value = values[key]
            elif (default := self._defaults.get(key, _MISSING)) is _MISSING:
                raise TypeError(f"{name}() missing required argument {key!r}")
            elif isinstance(default, _Field) and default.factory is not None:
                value = default.factory()
            else:
                value = default
            object.__setattr__(self, key, value)
        return self

    def __getnewargs_ex__(self) -> tuple[tuple[()], dict[str, object]]:
        """What copies and pickles pass to ``__new__``: the fields, by name."""
        return (), {key: getattr(self, key) for key in self._fields}

    def _values(self) -> tuple[Any, ...]:
        return tuple(getattr(self, key) for key in self._compared)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        assert isinstance(other, Record)
        return self._values() == other._values()

    def __repr__(self) -> str:
        shown = ", ".join(f"{key}={getattr(self, key)!r}" for key in self._shown)
        return f"{type(self).__qualname__}({shown})"


def replace(record: R, **changes: object) -> R:
    """A copy of ``record`` with ``changes`` (field → value), as ``dataclasses.replace``."""
    values = {key: getattr(record, key) for key in record._fields}
    for key in changes:
        if key not in values:
            raise TypeError(f"{type(record).__name__} has no field {key!r}")
    return type(record)(**{**values, **changes})


def fields(record: Record | type[Record]) -> tuple[str, ...]:
    """The field names of a Record class or instance, in order."""
    return record._fields


def asdict(record: Record) -> dict[str, object]:
    """Field → value of ``record`` (shallow: values are not copied)."""
    return {key: getattr(record, key) for key in record._fields}


_ORDER: dict[str, Callable[[tuple[Any, ...], tuple[Any, ...]], bool]] = {
    "__lt__": tuple.__lt__, "__le__": tuple.__le__, "__gt__": tuple.__gt__, "__ge__": tuple.__ge__,
}


def _runs_as_init(cls: type, check: Callable[..., None]) -> Callable[..., None]:
    """``check``, which Python will call as ``__init__`` with the constructor's arguments;
    refused at class definition when it cannot take them."""
    code = getattr(check, "__code__", None)
    if code is None or code.co_flags & _TAKES_ANY != _TAKES_ANY:
        raise TypeError(f"{cls.__qualname__}.__post_init__ runs as __init__: declare it "
                        "(self, *_args: object, **_kwargs: object) (see kernelhub.value_types)")
    return check


_TAKES_ANY = inspect.CO_VARARGS | inspect.CO_VARKEYWORDS


def _refuse_assignment(self: Record, name: str, *value: object) -> None:
    raise FrozenInstanceError(f"cannot assign to field {name!r}")


def _hash_fields(self: Record) -> int:
    return hash(self._values())


def _ordered(compare: Callable[[tuple[Any, ...], tuple[Any, ...]], bool]
             ) -> Callable[[Record, object], bool]:
    def method(self: Record, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        assert isinstance(other, Record)
        return compare(self._values(), other._values())

    return method


_ORDER_METHODS: dict[str, Callable[[Record, object], bool]] = {
    name: _ordered(compare) for name, compare in _ORDER.items()}
"""What ``order=True`` adds; one set for every class (the methods read the class of
their arguments, nothing of their own)."""
