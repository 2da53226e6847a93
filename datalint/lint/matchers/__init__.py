"""The one registry of matchers: rule files name a matcher here in their `[check]` table.

A matcher is `def m(module: Module, *, param=default, ...) -> Iterator[Match]`: a plain
function of one parsed file and the keyword-only parameters its rule file sets. Each
family module exposes `MATCHERS: dict[str, matcher]`; they are merged here explicitly,
and a name defined twice stops the merge, so two families can never shadow each other.

A family is imported only when a selected rule runs one of its matchers (`matcher`). Loading
the catalog needs no family: which family defines each matcher, and each matcher's keyword
parameters with their defaults, are kept in a marshal cache (`index`) while the families'
source files are unchanged; a changed or missing cache imports every family once to rebuild it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

from datalint import marshal_cache

Matcher = Callable[..., Iterator[Any]]

# The families, in the order their matchers are merged.
FAMILIES: tuple[str, ...] = tuple(
    f"datalint.lint.matchers.{name}"
    for name in (
        "loader",
        "loader_usage",
        "pickling",
        "handles",
        "memory",
        "randomness",
        "contract",
        "directives",
    )
)

REQUIRED: Any = ...  # a keyword-only parameter without a default (a singleton marshal keeps)
_CO_VARARGS, _CO_VARKEYWORDS = 0x04, 0x08  # as in inspect, which is slow to import

# matcher name -> (family module, {parameter: default or REQUIRED}, or None where the function is
# not `def m(module, *, ...)`)
Index = dict[str, tuple[str, dict[str, Any] | None]]


def __getattr__(name: str) -> Any:
    """`MATCHERS`: every family imported and merged, on first use (tests, `datalint rule`)."""
    if name != "MATCHERS":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    merged = globals()["MATCHERS"] = _merge([_family(family) for family in FAMILIES])
    return merged


def _family(name: str) -> ModuleType:
    # __import__, not importlib.import_module: `python -X importtime` lists only the former.
    module: ModuleType = __import__(name, fromlist=["MATCHERS"])
    return module


def _merge(families: list[ModuleType]) -> dict[str, Matcher]:
    merged: dict[str, Matcher] = {}
    owner: dict[str, str] = {}
    for family in families:
        for name, matcher in family.MATCHERS.items():
            if name in merged:
                raise RuntimeError(
                    f"matcher {name!r} is defined twice: in {owner[name]} and in {family.__name__}"
                )
            merged[name] = matcher
            owner[name] = family.__name__
    return merged


def _loaded() -> dict[str, Matcher] | None:
    """The merged registry if something already asked for it (it may hold a test's matcher)."""
    merged: dict[str, Matcher] | None = globals().get("MATCHERS")
    return merged


def matcher(name: str) -> Matcher:
    """The matcher called `name`, importing only the family that defines it."""
    merged = _loaded()
    if merged is not None:
        return merged[name]
    family = index()[name][0]
    function: Matcher = _family(family).MATCHERS[name]
    return function


def known() -> list[str]:
    """Every matcher name, without importing a family when the index is cached."""
    merged = _loaded()
    return list(merged) if merged is not None else list(index())


def keyword_parameters(name: str) -> dict[str, Any] | None:
    """{parameter: default, or REQUIRED} of the matcher's keyword-only parameters; None when it is
    not `def m(module, *, ...)`. KeyError for an unknown matcher."""
    merged = _loaded()
    if merged is not None:
        return _parameters(merged[name])
    return index()[name][1]


def _parameters(function: Matcher) -> dict[str, Any] | None:
    """Read from the code object: `inspect.signature` gives the same at several times the cost."""
    code = getattr(function, "__code__", None)
    if code is None or code.co_argcount != 1 or code.co_flags & (_CO_VARARGS | _CO_VARKEYWORDS):
        return None
    names = code.co_varnames[1 : 1 + code.co_kwonlyargcount]
    given = function.__kwdefaults__ or {}
    return {name: given.get(name, REQUIRED) for name in names}


@cache
def index() -> Index:
    """Which family defines each matcher, and its parameters: cached while the families are unchanged."""
    folder = Path(__file__).parent
    stamp = {}
    for name in sorted(os.listdir(folder)):
        if name.endswith(".py"):
            status = os.stat(folder / name)
            stamp[name] = [status.st_mtime_ns, status.st_size]
    cache_file = marshal_cache.cache_path("matchers", folder)
    cached = marshal_cache.read(cache_file, stamp)
    if cached is not None:
        return {name: (family, parameters) for name, (family, parameters) in cached.items()}
    built: Index = {}
    merged = _merge([_family(family) for family in FAMILIES])  # a name defined twice stops here
    for family in FAMILIES:
        for name in _family(family).MATCHERS:
            built[name] = (family, _parameters(merged[name]))
    marshal_cache.write(cache_file, stamp, built)  # a default marshal cannot hold: no cache, still right
    return built
