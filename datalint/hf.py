"""Keep quarantined rows out of a Hugging Face `datasets.Dataset`: `drop_quarantined(ds, list)`.

    from datalint.hf import drop_quarantined
    train = drop_quarantined(train, ".datalint/mypkg-data-train.quarantine.json")            # by row
    train = drop_quarantined(train, ".datalint/mypkg-data-train.quarantine.json", key_column="id")

The rows are taken out with one `ds.select(good_indices)`; the good indices are a numpy array and
the keys an Arrow column, so no Python code runs per row (10M rows in seconds:
`benchmarks/hf_select.py`). A list is a path (`quarantine.json`, a binary list, a scan index), a
`datalint serve` URL, or a loaded `Quarantine`.

Rows are named two ways, as `datalint scan --dataset SPEC` names them (`datalint docs training`):
- by the values of an id column (`key_column=`, the scan's `--key-column`): the list is matched
  to the column, so it survives rows added, removed or reordered;
- by position, tied to the dataset's `_fingerprint` (the scan's keys are `FINGERPRINT#ROW`): a
  position means nothing in another version of the dataset, so a list made for another fingerprint
  is refused with `StaleQuarantineError` rather than applied to the wrong rows.
"""

from __future__ import annotations

import hashlib
import shlex
from typing import Any

try:
    # Imported first, so that a missing part of the [hf] extra is named before anything else loads.
    import numpy as np
    import numpy.typing as npt
    import pyarrow  # noqa: F401
except ModuleNotFoundError:
    from datalint.extras import missing_extra_error

    _missing = missing_extra_error("hf", "`import datalint.hf`")
    if _missing is not None:
        raise _missing from None
    raise

from datalint.errors import DatalintError
from datalint.scan.dataset_readers import is_saved_dataset
from datalint.scan.hf_datasets import ROW_SEPARATOR, row_key
from datalint.training.fit import (
    StaleQuarantineError,
    rescan_command,
    warn_at_caller,  # warns at the user's line, however deep the call
)
from datalint.training.quarantine import Quarantine
from datalint.webdataset import ListSource, load_list

__all__ = ["drop_quarantined", "row_key", "rows_to_drop"]


def drop_quarantined(
    ds: Any, quarantine: ListSource, *, key_column: str | None = None, strict: bool = True
) -> Any:
    """`ds` without the rows the list quarantines, as one `ds.select(good_indices)`.

    Raises `StaleQuarantineError` when the list was made for another version of the dataset (another
    `_fingerprint` without `key_column`; none of its keys in the column with it). `strict=False`
    applies a keyless list by position anyway, with a `StaleQuarantineWarning`.
    """
    loaded = load_list(quarantine)
    drop = rows_to_drop(ds, loaded, key_column=key_column, strict=strict)
    if not len(drop):
        return ds
    keep = np.ones(len(ds), dtype=np.bool_)
    keep[drop] = False
    good = np.flatnonzero(keep)
    if not len(good):
        raise DatalintError(
            f"every one of the {len(ds)} rows is quarantined by {loaded.source}; nothing to train on"
        )
    return ds.select(good)


def rows_to_drop(
    ds: Any, quarantine: Quarantine, *, key_column: str | None = None, strict: bool = True
) -> npt.NDArray[np.int64]:
    """The positions in `ds` of the rows the list quarantines, sorted (see `drop_quarantined`)."""
    if key_column is not None:
        return _by_column(ds, quarantine, key_column)
    return _by_row(ds, quarantine, strict)


# ---- by position, tied to the fingerprint --------------------------------------------------------


def _by_row(ds: Any, quarantine: Quarantine, strict: bool) -> npt.NDArray[np.int64]:
    current = str(getattr(ds, "_fingerprint", "") or "")
    listed = _listed_fingerprints(quarantine)
    if not len(quarantine):
        return np.empty(0, dtype=np.int64)
    if listed == {current} or (not listed and quarantine.fingerprint == current):
        _check_rows(quarantine, len(ds))
        return np.asarray(quarantine.indices, dtype=np.int64)
    if listed and None in listed:
        raise StaleQuarantineError(_named_by_values(quarantine))
    message = _other_fingerprint(quarantine, listed, current)
    if strict:
        raise StaleQuarantineError(message)
    warn_at_caller(f"{message}; applying it by position anyway (strict=False)")
    return np.asarray(quarantine.indices[quarantine.indices < len(ds)], dtype=np.int64)


def _listed_fingerprints(quarantine: Quarantine) -> set[str | None]:
    """The fingerprints the list's keys name (None for a key that is not FINGERPRINT#ROW); empty for a
    list without keys."""
    if not quarantine.has_keys:
        return set()
    found: set[str | None] = set()
    for index, key in zip(quarantine, quarantine.keys, strict=True):
        fingerprint, separator, row = str(key).rpartition(ROW_SEPARATOR)
        found.add(fingerprint if separator and row == str(index) else None)
    return found


def _check_rows(quarantine: Quarantine, length: int) -> None:
    last = int(quarantine.indices[-1])
    if last >= length or (quarantine.length is not None and quarantine.length != length):
        raise StaleQuarantineError(
            f"{quarantine.source} was made for {quarantine.length} rows of this fingerprint and names row"
            f" {last}; the dataset has {length}. Write a fresh list with `{_rescan(quarantine)}`"
        )


def _other_fingerprint(quarantine: Quarantine, listed: set[str | None], current: str) -> str:
    made_for = ", ".join(sorted(str(f) for f in listed)) or quarantine.fingerprint or "none recorded"
    return (
        f"{quarantine.source} names rows by position in the dataset with fingerprint {made_for}; this"
        f" dataset's _fingerprint is {current or 'none'}, so its rows may be other rows (a map, filter,"
        f" shuffle or select since the scan, or another dataset). Write a fresh list with"
        f" `{_rescan(quarantine)}`, or pass key_column= to match rows by an id column"
    )


def _named_by_values(quarantine: Quarantine) -> str:
    example = next(str(key) for key in quarantine.keys if key is not None)
    return (
        f"{quarantine.source} names its rows by the values of an id column (keys such as {example!r}), not"
        " by position: pass key_column= (the scan's --key-column)"
    )


def _rescan(quarantine: Quarantine) -> str:
    made_for = quarantine.dataset
    if made_for and is_saved_dataset(made_for):  # a folder, but not of image files: `--dataset FOLDER`
        return f"datalint scan --dataset {shlex.quote(made_for)}"
    return rescan_command(made_for)


# ---- by the values of an id column ------------------------------------------------------------------


def _by_column(ds: Any, quarantine: Quarantine, key_column: str) -> npt.NDArray[np.int64]:
    """The rows whose `key_column` value the list names, matched in Arrow (no Python loop over rows).

    The rules are the training path's (datalint.training.fit): keys in place apply as listed; keys
    that moved are followed, with a warning; a key several rows share drops them all; a list none of
    whose keys is in the column is refused rather than dropping nothing."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if key_column not in ds.column_names:
        raise DatalintError(
            f"key_column={key_column!r}: the dataset has no such column"
            f" (its columns: {', '.join(ds.column_names)})"
        )
    if not len(quarantine):
        return np.empty(0, dtype=np.int64)
    if not quarantine.has_keys:
        raise StaleQuarantineError(
            f"{quarantine.source} names its rows by position only, so it cannot be matched by"
            f" {key_column!r}: write a list keyed by the column with `datalint scan --dataset SPEC"
            f" --key-column {key_column}`, or leave out key_column="
        )
    values = pc.cast(ds.with_format("arrow")[key_column], pa.string())
    listed = pa.array([str(key) for key in quarantine.keys], pa.string())
    drop = np.flatnonzero(pc.is_in(values, value_set=listed).to_numpy(zero_copy_only=False))
    first = pc.index_in(listed, value_set=values).to_numpy(zero_copy_only=False)
    _judge_match(quarantine, key_column, values, first, len(drop))
    return drop.astype(np.int64)


def _judge_match(
    quarantine: Quarantine, key_column: str, values: Any, first: npt.NDArray[Any], dropped: int
) -> None:
    found = ~np.isnan(first.astype(np.float64))  # index_in gives null (NaN here) for a key not in the column
    if not found.any():
        example = values[0].as_py() if len(values) else None
        raise StaleQuarantineError(
            f"none of the {len(quarantine)} keys of {quarantine.source} is a value of column {key_column!r}"
            f" (the list has keys such as {quarantine.keys[0]!r}, the column {example!r}): it was made for"
            f" another dataset or another key. Write a list for this one with `{_rescan(quarantine)}"
            f" --key-column {key_column}`"
        )
    positions = np.where(found, np.nan_to_num(first.astype(np.float64), nan=-1), -1).astype(np.int64)
    moved = int(np.count_nonzero(found & (positions != np.asarray(quarantine.indices))))
    missing = int(np.count_nonzero(~found))
    if moved or missing:
        warn_at_caller(
            f"{quarantine.source}: {moved} of {len(quarantine)} quarantined rows are no longer at the"
            f" position the list gives; matched them by {key_column!r}"
            + (f", {missing} keys are no longer in the dataset" if missing else "")
            + ". Rescan to check rows added since the list was made"
        )
    elif quarantine.fingerprint is not None and quarantine.fingerprint != column_fingerprint(values):
        warn_at_caller(
            f"{quarantine.source}: the dataset changed since the list was made (its keys' fingerprint"
            " differs); every quarantined row is still at its position, so the list applies."
            " Rescan to check the rows that changed"
        )
    shared = dropped - int(np.count_nonzero(found))
    if shared > 0:
        warn_at_caller(
            f"{quarantine.source}: {shared} more rows than listed share a quarantined {key_column!r}"
            " value, so the list cannot say which one it means: all of them are left out. Give each row"
            " its own key, then rescan"
        )


def column_fingerprint(values: Any) -> str | None:
    """The index's fingerprint (`datalint.index.keys.fingerprint`: sha256 over "<row>\\t<key>\\n") of
    an Arrow string column, computed in Arrow: the same bytes, one buffer, no Python string per row."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if not len(values):
        return None
    rows = pc.cast(pa.array(np.arange(len(values), dtype=np.int64)), pa.large_string())
    tab, newline, empty = (pa.scalar(text, pa.large_string()) for text in ("\t", "\n", ""))
    keyed = pc.binary_join_element_wise(rows, pc.cast(values, pa.large_string()), tab)
    lines = pc.binary_join_element_wise(keyed, empty, newline)
    whole = pa.concat_arrays(lines.chunks) if isinstance(lines, pa.ChunkedArray) else lines
    if whole.null_count:
        return None  # a row without a key: the scan names it otherwise, so nothing to compare
    offsets = np.frombuffer(whole.buffers()[1], dtype=np.int64)[whole.offset : whole.offset + len(whole) + 1]
    data = whole.buffers()[2]
    return hashlib.sha256(memoryview(data)[int(offsets[0]) : int(offsets[-1])]).hexdigest()
