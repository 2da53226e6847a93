"""`datalint.records.record`: the frozen value semantics of `@dataclass(frozen=True)`, without it."""

from __future__ import annotations

import pickle

import pytest

from datalint.records import FrozenInstanceError, field, fields, record, replace


@record(order=True)
class Place:
    path: str
    line: int
    note: str = field(default="", compare=False)
    tags: tuple[str, ...] = field(default_factory=tuple, compare=False, repr=False)


@record
class Box:
    items: list[int] = field(default_factory=list)
    label: str = "box"


def test_positional_keyword_and_defaults() -> None:
    assert Place("a.py", 3) == Place(path="a.py", line=3, note="other")
    assert Place("a.py", 3).note == "" and Place("a.py", 3).tags == ()
    assert Box().items is not Box().items and Box().label == "box"
    with pytest.raises(TypeError):
        Place("a.py")  # type: ignore[call-arg]


def test_frozen() -> None:
    place = Place("a.py", 3)
    with pytest.raises(FrozenInstanceError):
        place.line = 4  # type: ignore[misc]
    with pytest.raises(AttributeError):
        del place.path  # type: ignore[misc]


def test_equality_hash_and_order_use_the_compared_fields_only() -> None:
    assert hash(Place("a.py", 3, "x")) == hash(Place("a.py", 3, "y"))
    assert sorted([Place("b.py", 1), Place("a.py", 9), Place("a.py", 2)]) == [
        Place("a.py", 2),
        Place("a.py", 9),
        Place("b.py", 1),
    ]
    assert Place("a.py", 1) != ("a.py", 1)
    with pytest.raises(TypeError):
        _ = Box() < Box()  # type: ignore[operator]


def test_replace_repr_fields_and_pickle() -> None:
    place = Place("a.py", 3, "n", ("t",))
    assert replace(place, line=4) == Place("a.py", 4) and replace(place, line=4).tags == ("t",)
    assert repr(place) == "Place(path='a.py', line=3, note='n')"
    assert fields(place) == ("path", "line", "note", "tags")
    assert pickle.loads(pickle.dumps(place)) == place
    with pytest.raises(TypeError):
        replace(place, column=1)
