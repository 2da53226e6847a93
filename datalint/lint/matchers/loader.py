"""Matchers for DataLoader arguments that torch rejects at construction or first iteration.

The conditions live in the rule files (`when` / `conflicts` tables naming an argument and
a predicate); this module holds the predicates. A predicate answers True, False or None
(unknown), and a matcher reports only when every condition it needs is certainly True.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from datalint.lint.module import LOADER_DEFAULTS, UNKNOWN, LoaderCall, Match, Module

Predicate = Callable[[Module, LoaderCall, str], "bool | None"]


def _not_none(module: Module, loader: LoaderCall, name: str) -> bool | None:
    value = loader.effective(name)
    if value is not UNKNOWN:
        return value is not None
    node = loader.arg(name).node
    if node is not None and module.definitely_not_none(node):
        return True
    return None


def _none(module: Module, loader: LoaderCall, name: str) -> bool | None:
    answer = _not_none(module, loader, name)
    return None if answer is None else not answer


def _truthy(module: Module, loader: LoaderCall, name: str) -> bool | None:
    value = loader.effective(name)
    return None if value is UNKNOWN else bool(value)


def _zero(module: Module, loader: LoaderCall, name: str) -> bool | None:
    value = loader.effective(name)
    if value is UNKNOWN:
        return None
    return isinstance(value, int | float) and value == 0


def _not_one(module: Module, loader: LoaderCall, name: str) -> bool | None:
    value = loader.effective(name)
    return None if value is UNKNOWN else value != 1


def _iterable_dataset(module: Module, loader: LoaderCall, name: str) -> bool | None:
    # Only an in-file class that derives from IterableDataset counts; anything else is unknown.
    dataset = module.loader_dataset_class(loader)
    return True if dataset is not None and module.is_iterable_dataset(dataset) else None


PREDICATES: dict[str, Predicate] = {
    "not-none": _not_none,
    "none": _none,
    "truthy": _truthy,
    "zero": _zero,
    "not-one": _not_one,
    "iterable-dataset": _iterable_dataset,
}


def describe(module: Module, loader: LoaderCall, name: str) -> str:
    """`num_workers=0`, or `num_workers=0 (the default)` when the argument is absent."""
    arg = loader.arg(name)
    if arg.node is not None:
        return f"{name}={module.segment(arg.node)}"
    if arg.is_absent and name in LOADER_DEFAULTS:
        return f"{name}={LOADER_DEFAULTS[name]!r} (the default)"
    return name


def _check_predicates(*tables: Mapping[str, str]) -> None:
    for table in tables:
        for argument, predicate in table.items():
            if predicate not in PREDICATES:
                known = ", ".join(PREDICATES)
                raise ValueError(f"unknown predicate {predicate!r} for {argument!r} (known: {known})")


def loader_argument_conflict(
    module: Module, *, when: Mapping[str, str], conflicts: Mapping[str, str]
) -> Iterator[Match]:
    """DataLoader calls where every `when` condition holds and at least one `conflicts` one does.

    Message fields: `trigger` (the `when` arguments as written), `conflicts` (the
    conflicting arguments as written, or with "(the default)"), `dataset` (the in-file
    dataset class name, or "the dataset"), `callee`.
    """
    _check_predicates(when, conflicts)
    for loader in module.loader_calls:
        if not all(PREDICATES[p](module, loader, arg) is True for arg, p in when.items()):
            continue
        hits = [arg for arg, p in conflicts.items() if PREDICATES[p](module, loader, arg) is True]
        if not hits:
            continue
        dataset = module.loader_dataset_class(loader)
        yield Match(
            loader.node,
            {
                "trigger": ", ".join(describe(module, loader, arg) for arg in when if arg != "dataset"),
                "conflicts": ", ".join(describe(module, loader, arg) for arg in hits),
                "dataset": dataset.name if dataset is not None else "the dataset",
                "callee": loader.callee,
            },
        )


def invalid_loader_argument(
    module: Module,
    *,
    start_methods: Sequence[str] = ("fork", "spawn", "forkserver"),
    non_negative: Sequence[str] = ("num_workers", "timeout", "prefetch_factor"),
    positive_with_workers: Sequence[str] = ("prefetch_factor",),
) -> Iterator[Match]:
    """Argument values DataLoader rejects: one match per call, all problems in `problems`."""
    for loader in module.loader_calls:
        problems = list(_invalid_values(module, loader, start_methods, non_negative, positive_with_workers))
        if problems:
            yield Match(loader.node, {"problems": "; ".join(problems), "callee": loader.callee})


def _invalid_values(
    module: Module,
    loader: LoaderCall,
    start_methods: Sequence[str],
    non_negative: Sequence[str],
    positive_with_workers: Sequence[str],
) -> Iterator[str]:
    # prefetch_factor is only checked when workers may run: with 0 workers DL001 already applies.
    workers_zero = loader.workers_known_zero
    for name in non_negative:
        value = _number(loader, name)
        if value is not None and value < 0 and not (workers_zero and name in positive_with_workers):
            yield f"{describe(module, loader, name)} is negative"
    for name in positive_with_workers:
        value = _number(loader, name)
        if value == 0 and not workers_zero:
            yield f"{describe(module, loader, name)} must be at least 1 (or None)"
    context = loader.arg("multiprocessing_context")
    written = describe(module, loader, "multiprocessing_context")
    if _not_none(module, loader, "multiprocessing_context") and workers_zero:
        yield f"{written} needs num_workers > 0"
    if isinstance(context.value, str) and context.value not in start_methods:
        yield f"{written} is not one of {', '.join(start_methods)}"


def _number(loader: LoaderCall, name: str) -> float | None:
    arg = loader.arg(name)
    value = arg.value if arg.is_literal else None
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return value


def unparsable_file(module: Module) -> Iterator[Match]:
    """DL000's matcher finds nothing: the engine reports files it cannot read or parse."""
    return iter(())


MATCHERS: dict[str, Any] = {
    "unparsable-file": unparsable_file,
    "loader-argument-conflict": loader_argument_conflict,
    "invalid-loader-argument": invalid_loader_argument,
}
