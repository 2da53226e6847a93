"""Staleness: make sure a quarantine list belongs to the dataset it is about to filter.

A list made for another dataset (or for this one before files were added, removed or reordered) must
never be applied silently. When both sides name their samples by key, the list is matched by key and
remapped, which is exact; otherwise a difference in length or fingerprint is an error, or a warning
under `strict=False`.
"""

from __future__ import annotations

import functools
import shlex
import sys
import warnings
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from datalint.errors import DatalintError
from datalint.index import keys
from datalint.index.keys import key_function
from datalint.scan.specs import SpecError, parse_spec
from datalint.training.quarantine import Quarantine

KeyReader = Callable[[int], str]


class StaleQuarantineError(DatalintError):
    """The quarantine list was made for a different dataset than the one being trained on."""


class StaleQuarantineWarning(UserWarning):
    """The quarantine list did not match the dataset exactly and was remapped or applied anyway."""


def key_reader(dataset: Any) -> KeyReader | None:
    """How to name sample `i` of `dataset`, by the scan's rules (`datalint_key(i)`, `samples`, `imgs`).

    A wrapper that keeps the indices of the dataset it wraps (the guard) names it as
    `datalint_wrapped`, and is read through.
    """
    wrapped = getattr(dataset, "datalint_wrapped", None)
    if wrapped is not None:
        return key_reader(wrapped)
    # The scan's own rule, so that keys read here are the keys the scan wrote.
    keys = key_function(dataset)
    return None if keys is None else functools.partial(_as_key, keys)


def _as_key(keys: Callable[[int], Any], index: int) -> str:
    return str(keys(index))


def dataset_fingerprint(length: int, reader: KeyReader) -> str | None:
    """The fingerprint the scan records for a dataset of `length` samples named by `reader`."""
    return keys.fingerprint(length, reader)


def fit_quarantine(quarantine: Quarantine, dataset: Any, *, strict: bool = True) -> Quarantine:
    """The quarantine list as it applies to `dataset`: unchanged, remapped by key, or refused.

    Raises `StaleQuarantineError` when the list does not fit and cannot be matched by key, unless
    `strict=False`, which warns and applies the indices that fall inside the dataset.
    """
    length = len(dataset)
    reader = key_reader(dataset)
    if reader is not None and len(quarantine) and quarantine.has_keys:
        reader = _agreeing_reader(quarantine, dataset, length, reader)
        return _fit_by_key(quarantine, length, reader)
    differences = _differences(quarantine, length, reader)
    if not differences:
        return quarantine
    message = _stale_message(quarantine, dataset, differences)
    if strict:
        raise StaleQuarantineError(
            f"{message}. Rescan this dataset{_scan_hint(quarantine)} to make a list for it, or pass"
            " strict=False to apply this one anyway (indices past the end are ignored)"
        )
    warn_at_caller(f"{message}; applying it anyway (strict=False)")
    return quarantine.restricted_to(quarantine.indices < length)


def _differences(quarantine: Quarantine, length: int, reader: KeyReader | None) -> list[str]:
    differences = []
    if quarantine.length is not None and quarantine.length != length:
        differences.append(f"length {quarantine.length} in the list, {length} in the dataset")
    elif len(quarantine) and int(quarantine.indices[-1]) >= length:
        last = int(quarantine.indices[-1])
        differences.append(f"index {last} is past the end of a dataset of length {length}")
    if quarantine.fingerprint is not None and reader is not None:
        current = dataset_fingerprint(length, reader)
        if current != quarantine.fingerprint:
            differences.append(
                f"fingerprint {quarantine.fingerprint[:12]}… in the list, {(current or 'none')[:12]}…"
                " for the dataset"
            )
    return differences


def _agreeing_reader(quarantine: Quarantine, dataset: Any, length: int, reader: KeyReader) -> KeyReader:
    """The reader whose keys are the list's: the dataset's own keys, or (when the list was written
    with the files' paths, `scan --files-from-dataset`, and the dataset names its samples otherwise)
    the paths it keeps. Keys of two schemes that nothing matches are refused: a list matched by the
    wrong scheme finds none of its samples and quarantines nothing."""
    listed = [key for key in quarantine.keys if key is not None]
    in_place = any(_holds(reader, i, key, length) for i, key in zip(quarantine, quarantine.keys, strict=True))
    if in_place or _any_found(listed, length, reader):
        return reader  # the common case costs a read per listed sample, not a pass over the dataset
    for name, other in _path_readers(dataset, length):
        if other is not reader and _any_found(listed, length, other):
            warn_at_caller(
                f"{quarantine.source}: its keys are the files' paths, and {type(dataset).__name__} names its"
                f" samples otherwise; matched the list by {name}"
            )
            return other
    if _same_scheme(listed[0], str(reader(0))) or length == 0:
        return reader  # the same kind of key: the samples left the dataset (said when matched)
    raise StaleQuarantineError(
        f"{quarantine.source} names its samples by another key than {type(dataset).__name__} does: the list"
        f" has keys such as {listed[0]!r}, the dataset {str(reader(0))!r} (from {_scheme(dataset)}), and"
        f" none of the list's {len(listed)} keys is a key or a file of the dataset. Write a list this dataset"
        f" can use with `{rescan_command(quarantine.dataset)}` (its keys are then the dataset's own)"
    )


def _any_found(listed: list[str], length: int, reader: KeyReader) -> bool:
    """Whether any of the list's keys names a sample of the dataset (one pass over its keys)."""
    wanted = set(listed)
    return any(reader(index) in wanted for index in range(length))


def _path_readers(dataset: Any, length: int) -> list[tuple[str, KeyReader]]:
    """Other ways the dataset names the file behind each sample: its ImageFolder-style `samples` /
    `imgs`, and any list of paths, one per sample, that its `datalint_key` reads."""
    found: list[tuple[str, KeyReader]] = []
    entries = keys.path_reader(dataset)
    if entries is not None and len(entries) == length:
        found.append(("the paths in its samples list", entries))
    method = getattr(type(dataset), "datalint_key", None)
    code = getattr(method, "__code__", None)
    for name in getattr(code, "co_names", ()):
        values = getattr(dataset, name, None)
        if isinstance(values, (list, tuple)) and len(values) == length and length and _path_like(values[0]):
            reading = functools.partial(_item, values)
            found.append((f"the paths in its `{name}` (read by datalint_key)", reading))
    return found


def _item(values: Any, index: int) -> str:
    return str(values[index])


def _path_like(value: Any) -> bool:
    return hasattr(value, "__fspath__") or (isinstance(value, str) and ("/" in value or "\\" in value))


def _same_scheme(one: str, other: str) -> bool:
    """Keys of one kind: both paths (a separator, or a file extension), or neither."""

    def pathish(key: str) -> bool:
        return "/" in key or "\\" in key or Path(key).suffix != ""

    return pathish(one) == pathish(other)


def _scheme(dataset: Any) -> str:
    if callable(getattr(dataset, "datalint_key", None)):
        return "its datalint_key()"
    return "the paths in its samples list"


def _fit_by_key(quarantine: Quarantine, length: int, reader: KeyReader) -> Quarantine:
    """Keys are stable where indices are not: find every quarantined key in the dataset."""
    pairs = zip(quarantine, quarantine.keys, strict=True)
    moved = sum(1 for index, key in pairs if not _holds(reader, index, key, length))
    if not moved:
        # Every quarantined sample is where the list says, so the list applies exactly; but samples
        # added or replaced since the scan were never checked, which the user should hear about.
        changes = _differences(quarantine, length, reader)
        if changes:
            warn_at_caller(
                f"{quarantine.source}: the dataset changed since the list was made ({'; '.join(changes)});"
                " every quarantined sample is still at its index, so the list applies."
                " Rescan to check the samples that changed"
            )
        return quarantine
    wanted: dict[str | None, int] = {key: position for position, key in enumerate(quarantine.keys)}
    found = [(index, wanted[key]) for index in range(length) if (key := reader(index)) in wanted]
    missing = len(wanted) - len({position for _, position in found})
    _warn_shared_keys(quarantine, found)
    warn_at_caller(
        f"{quarantine.source}: {moved} of {len(quarantine)} quarantined samples are no longer at the index"
        f" the list gives (dataset length {length}, list length {quarantine.length}); matched them by key"
        + (f", {missing} keys are no longer in the dataset" if missing else "")
        + ". Rescan to check samples added since the list was made"
    )
    return Quarantine(
        indices=np.array([index for index, _ in found], dtype=np.int64),
        keys=tuple(quarantine.keys[position] for _, position in found),
        kinds=tuple(quarantine.kinds[position] for _, position in found),
        details=tuple(quarantine.details[position] for _, position in found),
        length=length,
        dataset=quarantine.dataset,
        source=f"{quarantine.source} (matched by key)",
    )


def _warn_shared_keys(quarantine: Quarantine, found: list[tuple[int, int]]) -> None:
    """A key that names several samples of the dataset cannot say which one the list means: every one
    is left out. Say which key and how many samples (the scan reports it as `duplicate_key`)."""
    counts = Counter(position for _, position in found)
    shared = [(quarantine.keys[position], count) for position, count in counts.items() if count > 1]
    if not shared:
        return
    key, count = max(shared, key=lambda pair: pair[1])
    more = f" (and {len(shared) - 1} more keys)" if len(shared) > 1 else ""
    warn_at_caller(
        f"{quarantine.source}: the key {key!r} names {count} samples of the dataset{more}, so the list"
        f" cannot say which one it means: all {count} are left out. Give each sample its own key"
        " (datalint_key), then rescan"
    )


def _holds(reader: KeyReader, index: int, key: str | None, length: int) -> bool:
    return index < length and reader(index) == key


def _stale_message(quarantine: Quarantine, dataset: Any, differences: list[str]) -> str:
    made_for = f" (made for {quarantine.dataset})" if quarantine.dataset else ""
    return (
        f"{quarantine.source}{made_for} does not match the dataset {type(dataset).__name__}: "
        + "; ".join(differences)
    )


def _scan_hint(quarantine: Quarantine) -> str:
    return f" (`{rescan_command(quarantine.dataset)}`)"


def rescan_command(made_for: str | None) -> str:
    """The `datalint scan` command line, runnable as printed, that scans again what a list was made for.

    A list records only its source's spec: a dataset spec (mymod:train, path/to/file.py:make(...)),
    an image folder or a file list; a dataset passed as an object has no spec to repeat.
    """
    if not made_for or made_for.startswith("<"):
        return "datalint scan --dataset SPEC"
    try:
        parse_spec(made_for)
    except SpecError:  # no module:attribute form: the image folder, or the file list, scanned
        if Path(made_for).is_file():
            return f"datalint scan --files {shlex.quote(made_for)}"
        return f"datalint scan --images {shlex.quote(made_for)}"
    return f"datalint scan --dataset {shlex.quote(made_for)}"


def warn_at_caller(message: str, category: type[Warning] = StaleQuarantineWarning) -> None:
    """Warn at the user's line (the first caller outside datalint), however deep the call came from."""
    frame, level = sys._getframe(0), 1
    while frame.f_back is not None and frame.f_globals.get("__name__", "").startswith("datalint."):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level)
