"""Value types for the load path, declared like dataclasses but free to define.

``@dataclass`` writes ``__init__``, ``__eq__``, ``__repr__`` (and more) as source text and
``exec``-s it for every class, at import: for the dozen value types a warm load imports
that was a third of ``import kernelhub.api`` (~5 ms of a 20 ms budget), plus the garbage
collections the generated functions trigger. :class:`Record` gives the same behaviour from
one shared implementation instead:

* fields are the class's annotations, in order; a class attribute is the field's default,
  :func:`field` (``default_factory=``) a default made per instance;
* ``__init__`` takes them positionally or by keyword, then calls ``__post_init__`` if the
  class has one; ``__eq__`` compares the fields of two instances of the same class;
  ``__repr__`` is ``Name(field=value, ...)``;
* ``frozen=True`` refuses assignment (``dataclasses.FrozenInstanceError``, an
  AttributeError) and hashes by the fields; ``order=True`` compares the field tuples;
* :func:`replace` is ``dataclasses.replace``.

Type checkers read the classes as dataclasses (``dataclass_transform``), so constructor
calls and frozen fields are checked as before.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import FrozenInstanceError
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

if TYPE_CHECKING:  # typing has it from Python 3.11; at run time it only marks the class
    from typing_extensions import dataclass_transform
else:
    def dataclass_transform(**_: Any) -> Callable[[type], type]:
        return lambda cls: cls

R = TypeVar("R", bound="Record")

_MISSING: Any = object()


class _Factory:
    """A field default made per instance (a fresh dict or list for each)."""

    __slots__ = ("make",)

    def __init__(self, make: Callable[[], Any]) -> None:
        self.make = make


def field(*, default_factory: Callable[[], Any]) -> Any:
    """A field whose default is ``default_factory()``, called for each instance."""
    return _Factory(default_factory)


@dataclass_transform(field_specifiers=(field,))
class Record:
    """Base of the loader's value types (see the module docstring)."""

    __slots__ = ()
    _fields: ClassVar[tuple[str, ...]] = ()
    _defaults: ClassVar[dict[str, Any]] = {}

    def __init_subclass__(cls, *, frozen: bool = False, order: bool = False) -> None:
        super().__init_subclass__()
        own = [name for name, kind in inspect.get_annotations(cls).items()
               if not str(kind).startswith(("ClassVar", "typing.ClassVar"))]
        cls._fields = (*cls._fields, *own)
        cls._defaults = {**cls._defaults, **{n: cls.__dict__[n] for n in own if n in cls.__dict__}}
        methods: dict[str, Any] = {"__match_args__": cls._fields}
        if frozen:
            methods.update(__setattr__=_refuse_assignment, __delattr__=_refuse_assignment,
                           __hash__=_hash_fields)
        else:
            methods["__hash__"] = None  # mutable and compared by value: unhashable
        if order:
            methods.update({name: _ordered(compare) for name, compare in _ORDER.items()})
        for name, value in methods.items():
            setattr(cls, name, value)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        fields, name = self._fields, type(self).__name__
        if len(args) > len(fields):
            raise TypeError(f"{name}() takes {len(fields)} arguments but {len(args)} were given")
        values = dict(zip(fields, args, strict=False))
        for key, value in kwargs.items():
            if key not in fields:
                raise TypeError(f"{name}() got an unexpected keyword argument {key!r}")
            if key in values:
                raise TypeError(f"{name}() got multiple values for argument {key!r}")
            values[key] = value
        for key in fields:
            if key in values:
                value = values[key]
            elif (default := self._defaults.get(key, _MISSING)) is _MISSING:
                raise TypeError(f"{name}() missing required argument {key!r}")
            else:
                value = default.make() if isinstance(default, _Factory) else default
            object.__setattr__(self, key, value)
        if (post_init := getattr(self, "__post_init__", None)) is not None:
            post_init()

    def _values(self) -> tuple[Any, ...]:
        return tuple(getattr(self, key) for key in self._fields)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        assert isinstance(other, Record)
        return self._values() == other._values()

    def __repr__(self) -> str:
        shown = ", ".join(f"{key}={getattr(self, key)!r}" for key in self._fields)
        return f"{type(self).__qualname__}({shown})"


def replace(record: R, **changes: Any) -> R:
    """A copy of ``record`` with ``changes`` (field → value), as ``dataclasses.replace``."""
    values = {key: getattr(record, key) for key in record._fields}
    for key in changes:
        if key not in values:
            raise TypeError(f"{type(record).__name__} has no field {key!r}")
    return type(record)(**{**values, **changes})


_ORDER: dict[str, Callable[[tuple[Any, ...], tuple[Any, ...]], bool]] = {
    "__lt__": tuple.__lt__, "__le__": tuple.__le__, "__gt__": tuple.__gt__, "__ge__": tuple.__ge__,
}


def _refuse_assignment(self: Record, name: str, *value: Any) -> None:
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
