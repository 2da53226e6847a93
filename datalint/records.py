"""Frozen value classes built without `dataclasses`, so that `datalint check` starts fast.

`@dataclass` imports `inspect` (with `dis`, `linecache`, `tokenize`) and compiles six or more
functions per class: on a one-file `datalint check` that was a third of the start-up. `@record`
gives the same frozen value semantics (keyword or positional `__init__`, `==` and `hash` over the
compared fields, `order=True` comparisons, `repr`, `replace`) with one small compiled `__init__`
per class and C-level attribute getters for the rest. mypy reads it through `dataclass_transform`.
"""

from __future__ import annotations

from collections.abc import Callable
from operator import attrgetter
from typing import Any, TypeVar, dataclass_transform

T = TypeVar("T")

_MISSING: Any = object()


class FrozenInstanceError(AttributeError):
    """Assigning to a field of a record (as `dataclasses.FrozenInstanceError`)."""


class Field:
    __slots__ = ("compare", "default", "default_factory", "repr")

    def __init__(self, default: Any, default_factory: Any, compare: bool, repr: bool) -> None:
        self.default, self.default_factory, self.compare, self.repr = default, default_factory, compare, repr


def field(
    *,
    default: Any = _MISSING,
    default_factory: Callable[[], Any] = _MISSING,
    compare: bool = True,
    repr: bool = True,
) -> Any:
    """A field's default, factory, and whether it takes part in `==`, ordering and `repr`."""
    return Field(default, default_factory, compare, repr)


@dataclass_transform(frozen_default=True, field_specifiers=(field,))
def record(cls: type[T] | None = None, /, *, order: bool = False) -> Any:
    """Make `cls` a frozen value class from its annotated fields (`@record` or `@record(order=True)`)."""
    if cls is None:
        return lambda c: _build(c, order)
    return _build(cls, order)


def replace(value: T, **changes: Any) -> T:
    """A copy of the record `value` with some fields changed (as `dataclasses.replace`)."""
    names: tuple[str, ...] = type(value).__record_fields__  # type: ignore[attr-defined]
    return type(value)(**{name: changes.pop(name, getattr(value, name)) for name in names}, **changes)


def fields(value: Any) -> tuple[str, ...]:
    """The field names of a record (class or instance), in order."""
    names: tuple[str, ...] = value.__record_fields__
    return names


def _build(cls: Any, order: bool) -> Any:
    specs: dict[str, Field] = {}
    for base in reversed(cls.__mro__[1:]):
        specs.update(getattr(base, "__record_specs__", {}))
    for name in cls.__dict__.get("__annotations__", {}):  # noqa: RUF063 (own fields only, unevaluated)
        given = cls.__dict__.get(name, _MISSING)
        spec = given if isinstance(given, Field) else Field(given, _MISSING, True, True)
        if isinstance(given, Field):
            if given.default is _MISSING:
                delattr(cls, name)
            else:
                setattr(cls, name, given.default)
        specs[name] = spec
    names = tuple(specs)
    cls.__record_specs__ = specs
    cls.__record_fields__ = names
    cls.__match_args__ = names  # type: ignore[misc]
    cls.__init__ = _init(cls, specs)
    compared = tuple(name for name, spec in specs.items() if spec.compare)
    key: Callable[[Any], Any] = attrgetter(*compared) if compared else (lambda _: ())
    cls.__eq__ = _compare(key, lambda a, b: a == b)
    cls.__hash__ = lambda self: hash(key(self))
    cls.__repr__ = _repr([name for name, spec in specs.items() if spec.repr])
    cls.__setattr__ = _frozen
    cls.__delattr__ = _frozen
    if order:
        cls.__lt__ = _compare(key, lambda a, b: a < b)
        cls.__le__ = _compare(key, lambda a, b: a <= b)
        cls.__gt__ = _compare(key, lambda a, b: a > b)
        cls.__ge__ = _compare(key, lambda a, b: a >= b)
    return cls


def _init(cls: Any, specs: dict[str, Field]) -> Callable[..., None]:
    """`__init__`, compiled once for the class: positional or keyword arguments, defaults, factories."""
    scope: dict[str, Any] = {"_FACTORY": _MISSING}
    parameters, body = [], []
    for number, (name, spec) in enumerate(specs.items()):
        if spec.default_factory is not _MISSING:
            scope[f"_f{number}"] = spec.default_factory
            parameters.append(f"{name}=_FACTORY")
            body.append(f"    _values_[{name!r}] = _f{number}() if {name} is _FACTORY else {name}")
            continue
        if spec.default is not _MISSING:
            scope[f"_d{number}"] = spec.default
            parameters.append(f"{name}=_d{number}")
        else:
            parameters.append(name)
        body.append(f"    _values_[{name!r}] = {name}")
    source = f"def __init__(self, {', '.join(parameters)}):\n    _values_ = self.__dict__\n" + "\n".join(
        body or ["    pass"]
    )
    exec(source, scope)
    function: Callable[..., None] = scope["__init__"]
    function.__qualname__ = f"{cls.__qualname__}.__init__"
    return function


def _repr(names: list[str]) -> Callable[[Any], str]:
    def __repr__(self: Any) -> str:
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in names)
        return f"{type(self).__qualname__}({shown})"

    return __repr__


def _compare(key: Callable[[Any], Any], test: Callable[[Any, Any], bool]) -> Callable[[Any, Any], Any]:
    def compare(self: Any, other: Any) -> Any:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return test(key(self), key(other))

    return compare


def _frozen(self: Any, name: str, *_: Any) -> None:
    raise FrozenInstanceError(f"cannot assign to field {name!r}")
