"""The one registry of matchers: rule files name a matcher here in their `[check]` table.

A matcher is `def m(module: Module, *, param=default, ...) -> Iterator[Match]`: a plain
function of one parsed file and the keyword-only parameters its rule file sets. Each
family module exposes `MATCHERS: dict[str, matcher]`; they are merged here explicitly,
and a name defined twice stops the import, so two families can never shadow each other.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

from datalint.lint.matchers import (
    contract,
    directives,
    handles,
    loader,
    loader_usage,
    memory,
    pickling,
    randomness,
)

Matcher = Callable[..., Iterator[Any]]

FAMILIES: tuple[ModuleType, ...] = (
    loader,
    loader_usage,
    pickling,
    handles,
    memory,
    randomness,
    contract,
    directives,
)


def _merge(families: tuple[ModuleType, ...]) -> dict[str, Matcher]:
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


MATCHERS: dict[str, Matcher] = _merge(FAMILIES)
