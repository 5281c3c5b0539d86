"""Record behaves as the dataclass it replaces: the same fields, order, defaults and
comparisons as ``@dataclass`` for every declaration form the loader uses."""

from __future__ import annotations

import copy
import dataclasses
import inspect
import pickle
from typing import ClassVar

import pytest
from kernelhub.value_types import Record, asdict, field, fields, replace


class Base(Record, frozen=True):
    KIND: ClassVar[str] = "base"
    a: int
    b: list[int] = field(default_factory=list)
    c: int = field(default=3, kw_only=True)
    d: str = field(default="shown", kw_only=True, compare=False)


class Child(Base, frozen=True):
    e: int = 5


class Mixin(Record, frozen=True):
    t: str = field(default="", kw_only=True)


class Both(Mixin, Child, frozen=True):
    pass


@dataclasses.dataclass(frozen=True)
class DBase:
    KIND: ClassVar[str] = "base"
    a: int
    b: list[int] = dataclasses.field(default_factory=list)
    c: int = dataclasses.field(default=3, kw_only=True)
    d: str = dataclasses.field(default="shown", kw_only=True, compare=False)


@dataclasses.dataclass(frozen=True)
class DChild(DBase):
    e: int = 5


@dataclasses.dataclass(frozen=True)
class DMixin:
    t: str = dataclasses.field(default="", kw_only=True)


@dataclasses.dataclass(frozen=True)
class DBoth(DMixin, DChild):
    pass


def test_fields_in_dataclass_order_with_keyword_only_last() -> None:
    assert fields(Both) == tuple(f.name for f in dataclasses.fields(DBoth))
    assert Both.__match_args__ == DBoth.__match_args__ == ("a", "b", "e")
    made, dmade = Both(1, [2], 9, c=4, d="x", t="q"), DBoth(1, [2], 9, c=4, d="x", t="q")
    assert asdict(made) == dataclasses.asdict(dmade)
    assert repr(made) == repr(dmade).replace("DBoth", "Both")


def test_defaults_per_instance_and_class_attributes() -> None:
    one, two = Child(1), Child(2)
    assert one.b == [] and one.b is not two.b and (one.c, one.d, one.e) == (3, "shown", 5)
    assert Base.c == DBase.c == 3 and Base.KIND == "base"
    assert hasattr(Base, "b") == hasattr(DBase, "b")


def test_compare_false_fields_are_left_out_of_equality_and_hash() -> None:
    assert Both(1, (2,), c=4, d="x") == Both(1, (2,), c=4, d="y")  # type: ignore[arg-type]
    assert hash(Both(1, (2,), d="x")) == hash(Both(1, (2,), d="y"))  # type: ignore[arg-type]
    assert Both(1, c=4) != Both(1, c=5)
    assert Child(1) != Base(1)  # another class is never equal, as for dataclasses


def test_frozen_refuses_assignment_and_errors_match_dataclasses() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        Child(1).a = 2  # type: ignore[misc]
    with pytest.raises(TypeError, match="positional"):
        Both(1, [], 3, 4)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="missing required argument 'a'"):
        Child()  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="unexpected keyword argument 'zz'"):
        Child(1, zz=1)  # type: ignore[call-arg]


def test_replace_mutable_and_ordered_records() -> None:
    assert replace(Both(1, t="q"), e=0) == Both(1, e=0, t="q")

    class Mutable(Record):
        x: int

    class Ordered(Record, frozen=True, order=True):
        x: int

    item = Mutable(1)
    item.x = 2
    assert item == Mutable(2) and Mutable.__hash__ is None
    assert sorted([Ordered(3), Ordered(1)]) == [Ordered(1), Ordered(3)]

    class Other(Record, frozen=True, order=True):  # the same order methods, another class
        x: int

    assert Other(1) < Other(2) and not Other(2) <= Other(1)
    with pytest.raises(TypeError):
        assert Ordered(1) < Other(2)


class Checked(Record, frozen=True):
    name: str
    size: int = 1

    def __post_init__(self, *_args: object, **_kwargs: object) -> None:
        if self.size < 0:
            raise ValueError(f"size {self.size} is negative")
        object.__setattr__(self, "name", self.name.lower())


def test_post_init_checks_and_normalises_every_construction() -> None:
    assert Checked("A") == Checked(name="a", size=1)
    with pytest.raises(ValueError, match="negative"):
        Checked("a", -1)
    with pytest.raises(ValueError, match="negative"):
        replace(Checked("a"), size=-2)
    with pytest.raises(TypeError, match="missing required argument 'name'"):
        Checked()  # type: ignore[call-arg]


def test_copies_and_pickles_keep_the_fields() -> None:
    for original in (Checked("B", 2), Both(1, [2], c=4, d="x", t="q")):
        for made in (copy.copy(original), copy.deepcopy(original),
                     pickle.loads(pickle.dumps(original))):
            assert made == original and type(made) is type(original)
            assert asdict(made) == asdict(original)


def test_signature_reads_as_the_dataclass_one() -> None:
    def shown(cls: type) -> list[tuple[str, object, object]]:
        return [(p.name, p.kind, p.default) for p in inspect.signature(cls).parameters.values()]

    assert shown(Both) == shown(DBoth)  # a factory default shows as <factory>


def test_a_post_init_that_cannot_take_the_arguments_is_refused_at_definition() -> None:
    with pytest.raises(TypeError, match=r"Bad.__post_init__ runs as __init__: declare it"):
        class Bad(Record, frozen=True):
            x: int

            def __post_init__(self) -> None:
                pass
