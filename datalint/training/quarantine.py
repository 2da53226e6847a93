"""The quarantine list as training reads it: `quarantine.json` or a scan index, validated and frozen.

The format is the `datalint-quarantine/1` contract of `datalint docs index`. Every problem with the file is a
`QuarantineFormatError` naming the file and the field, never a KeyError from deep inside a sampler.
"""

from __future__ import annotations

import itertools
import os
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from datalint.errors import DatalintError
from datalint.files import UnreadableDocument, is_regular, load_json_document
from datalint.index import binary_list, quarantine, read, store

IndexArray = npt.NDArray[np.int64]


class QuarantineFormatError(DatalintError):
    """A quarantine list or index that cannot be read as the documented format."""


@dataclass(frozen=True, eq=False)
class Quarantine:
    """The samples training must never see, as loaded from one list or index.

    `indices` is sorted, unique and read-only; `keys`, `kinds` and `details` are aligned with it.
    `length` and `fingerprint` describe the dataset the list was made for (None when unknown).
    """

    indices: IndexArray
    keys: Sequence[str | None]
    kinds: Sequence[tuple[str, ...]]
    details: Sequence[str | None] = ()
    length: int | None = None
    fingerprint: str | None = None
    dataset: str | None = None
    source: str = "<in memory>"
    _key_set: frozenset[str] = field(default=frozenset(), repr=False)

    def __post_init__(self) -> None:
        # A private copy nobody else can write to; a read-only map (a binary list) is shared as it is,
        # and so is the array from_indices built (read-only, owning its memory, handed to no one else).
        indices = self.indices if _shared_as_it_is(self.indices) else np.array(self.indices, dtype=np.int64)
        indices.setflags(write=False)
        object.__setattr__(self, "indices", indices)
        if not self.details:
            object.__setattr__(self, "details", binary_list.Repeated(None, len(indices)))
        if not len(self.keys) == len(self.kinds) == len(self.details) == len(indices):
            raise ValueError("Quarantine: indices, keys, kinds and details must have the same length")
        if len(indices) and int(indices.min()) < 0:  # numpy reads -1 as "the last sample"
            raise ValueError(f"Quarantine: negative index {int(indices.min())}")
        keyless = isinstance(self.keys, binary_list.Repeated) and self.keys.value is None
        object.__setattr__(
            self, "_key_set", frozenset() if keyless else frozenset(k for k in self.keys if k is not None)
        )

    @classmethod
    def from_indices(
        cls,
        indices: Iterable[int],
        *,
        length: int | None,
        keys: Sequence[str | None] | None = None,
        kind: str = "manual",
    ) -> Quarantine:
        """A list built in code (for instance from your own checks), for the samplers and the guard.

        Built from numpy arrays: 1e7 indices cost their 8 bytes each (twice, while sorting), and
        without `keys` no Python object per entry.
        """
        array = _index_array(indices)
        key_list = None if keys is None else _listed(keys)
        if key_list is not None and len(key_list) != len(array):
            raise ValueError(f"Quarantine.from_indices: {len(array)} indices but {len(key_list)} keys")
        if key_list is None:
            array.sort()
        else:
            order = np.argsort(array, kind="stable")
            array, key_list = array[order], _in_order(key_list, order)
        _check_unique_array(array, "<in memory>")
        array.setflags(write=False)
        return cls(
            indices=array,
            keys=binary_list.Repeated(None, len(array)) if key_list is None else key_list,
            kinds=binary_list.Repeated((kind,), len(array)),
            length=length,
        )

    @property
    def has_keys(self) -> bool:
        """True when every entry names its sample, so the list can be matched by key."""
        return len(self._key_set) == len(self.keys)

    def index_set(self) -> frozenset[int]:
        """The quarantined indices as a set, for filters that test one index at a time."""
        return frozenset(self.indices.tolist())

    def restricted_to(self, positions: npt.NDArray[np.bool_]) -> Quarantine:
        """The entries where `positions` is True (used to drop entries that do not apply)."""
        indices = self.indices[positions]  # a new array: shared as it is once read-only
        indices.setflags(write=False)
        return replace(
            self,
            indices=indices,
            keys=_picked(self.keys, positions, len(indices)),
            kinds=_picked(self.kinds, positions, len(indices)),
            details=_picked(self.details, positions, len(indices)),
        )

    def __contains__(self, item: object) -> bool:
        if isinstance(item, str):
            return item in self._key_set
        if isinstance(item, int | np.integer) and not isinstance(item, bool):
            at = int(np.searchsorted(self.indices, int(item)))
            return at < len(self.indices) and int(self.indices[at]) == int(item)
        return False

    def __len__(self) -> int:
        return len(self.indices)

    def __iter__(self) -> Iterator[int]:
        return iter(self.indices.tolist())

    def __repr__(self) -> str:
        of = f" of {self.length}" if self.length is not None else ""
        return f"Quarantine({len(self)} samples{of}, from {self.source})"


def _shared_as_it_is(indices: Any) -> bool:
    if not isinstance(indices, np.ndarray) or indices.flags.writeable or indices.dtype != np.int64:
        return False
    return isinstance(indices, np.memmap) or indices.base is None


def _index_array(indices: Iterable[int]) -> IndexArray:
    """A fresh int64 array of the indices, whatever iterable they come in (as `int(i)` reads each)."""
    if isinstance(indices, np.ndarray) and indices.ndim == 1 and indices.dtype.kind in "iub":
        return np.array(indices, dtype=np.int64)
    if isinstance(indices, range):
        return np.arange(indices.start, indices.stop, indices.step, dtype=np.int64)
    return np.fromiter((int(i) for i in indices), dtype=np.int64)


def _listed(keys: Sequence[str | None]) -> Sequence[str | None]:
    return keys if isinstance(keys, list | tuple | binary_list.Repeated) else list(keys)


def _in_order(keys: Sequence[str | None], order: npt.NDArray[np.intp]) -> Sequence[str | None]:
    if isinstance(keys, binary_list.Repeated):
        return keys
    return tuple(keys[i] for i in order.tolist())


def _picked(column: Sequence[Any], positions: npt.NDArray[np.bool_], count: int) -> Sequence[Any]:
    """The entries of one column where `positions` holds; a repeated value stays one value."""
    if isinstance(column, binary_list.Repeated):
        return binary_list.Repeated(column.value, count)
    return tuple(column[p] for p in np.flatnonzero(positions).tolist())


def _check_unique_array(sorted_indices: IndexArray, source: str) -> None:
    repeated = np.flatnonzero(sorted_indices[1:] == sorted_indices[:-1])
    if len(repeated):
        raise QuarantineFormatError(
            f"{source}: samples: index {int(sorted_indices[repeated[0] + 1])} is listed twice"
        )


def load_quarantine(
    path: str | os.PathLike[str], *, token: str | None = None, deadline: float | None = None
) -> Quarantine:
    """Read `quarantine.json` (format `datalint-quarantine/1`) or a scan index (`.db`), validated.

    `path` may also be a `datalint serve` URL (`http://host:8765/v1/datasets/NAME`): the list is fetched
    with `token` (or `DATALINT_TOKEN`) within `deadline` seconds (or `DATALINT_LIST_DEADLINE`, default
    30) and, once validated, cached locally (datalint.training.remote).
    """
    from datalint.training import remote

    if remote.is_url(path):
        loaded: Quarantine = remote.load_remote_quarantine(str(path), token=token, deadline=deadline)
        return loaded
    source = Path(path)
    if not source.exists():
        raise QuarantineFormatError(
            f"{source}: no such quarantine list; run `datalint scan` (or `datalint quarantine`) to make one"
        )
    if _looks_like_sqlite(source):
        return _load_index(source)
    if binary_list.is_binary_list(source):
        return _load_binary(source)
    return _load_json(source)


def _load_binary(path: Path) -> Quarantine:
    """A binary list, memory-mapped: no per-sample memory, shared by every process through the page cache."""
    try:
        header, indices = binary_list.map_binary_indices(path)
    except (binary_list.BinaryListError, OSError) as exc:
        raise QuarantineFormatError(f"{path}: {exc}") from None
    count = len(indices)
    policy = header.get("policy")
    kinds = tuple(str(kind) for kind in policy) if isinstance(policy, list) else ()
    return Quarantine(
        indices=indices,
        keys=binary_list.Repeated(None, count),
        kinds=binary_list.Repeated(kinds, count),
        length=header.get("length") if _is_int(header.get("length")) else None,
        fingerprint=header.get("fingerprint") if isinstance(header.get("fingerprint"), str) else None,
        dataset=header.get("dataset") if isinstance(header.get("dataset"), str) else None,
        source=str(path),
    )


def _looks_like_sqlite(path: Path) -> bool:
    if not is_regular(path):
        return False  # a FIFO would block the read; the JSON reader names what it is
    try:
        with path.open("rb") as handle:
            return handle.read(16) == b"SQLite format 3\x00"
    except OSError:
        return False


# ---- quarantine.json -------------------------------------------------------------------------------


def _load_json(path: Path) -> Quarantine:
    try:
        document = load_json_document(path)
    except UnreadableDocument as exc:
        raise QuarantineFormatError(f"{path}: not a quarantine list: {exc.problem}") from None
    return parse_quarantine(document, source=str(path))


def parse_quarantine(document: Any, *, source: str) -> Quarantine:
    """Validate a decoded `quarantine.json` document; errors name `source` and the field."""
    if not isinstance(document, dict):
        raise QuarantineFormatError(f"{source}: expected a JSON object, got {_json_type(document)}")
    if document.get("format") != quarantine.FORMAT:
        raise QuarantineFormatError(
            f"{source}: format: expected {quarantine.FORMAT!r}, got {document.get('format')!r}"
            " (is this a datalint quarantine list?)"
        )
    length = _optional(document, "length", int, source)
    if length is not None and length < 0:
        raise QuarantineFormatError(f"{source}: length: expected a non-negative integer, got {length}")
    samples = document.get("samples")
    if not isinstance(samples, list):
        raise QuarantineFormatError(f"{source}: samples: expected a list, got {_json_type(samples)}")
    entries = sorted((_parse_entry(entry, n, source) for n, entry in enumerate(samples)), key=lambda e: e[0])
    _check_unique([e[0] for e in entries], source)
    if length is not None and entries and entries[-1][0] >= length:
        raise QuarantineFormatError(
            f"{source}: samples: index {entries[-1][0]} is past the end of a dataset of length {length}"
        )
    return Quarantine(
        indices=np.array([e[0] for e in entries], dtype=np.int64),
        keys=tuple(e[1] for e in entries),
        kinds=tuple(e[2] for e in entries),
        details=tuple(e[3] for e in entries),
        length=length,
        fingerprint=_optional(document, "fingerprint", str, source),
        dataset=_optional(document, "dataset", str, source),
        source=source,
    )


Entry = tuple[int, str | None, tuple[str, ...], str | None]


def _parse_entry(entry: Any, n: int, source: str) -> Entry:
    where = f"{source}: samples[{n}]"
    if not isinstance(entry, dict):
        raise QuarantineFormatError(f"{where}: expected an object, got {_json_type(entry)}")
    index = entry.get("index")
    if not isinstance(index, int) or isinstance(index, bool) or index < 0:
        raise QuarantineFormatError(f"{where}.index: expected a non-negative integer, got {index!r}")
    kinds = entry.get("kinds", [])
    if not isinstance(kinds, list) or not all(isinstance(k, str) for k in kinds):
        raise QuarantineFormatError(f"{where}.kinds: expected a list of strings, got {kinds!r}")
    key: str | None = _optional(entry, "key", str, where, separator=".")
    detail: str | None = _optional(entry, "detail", str, where, separator=".")
    return index, key, tuple(kinds), detail


def _optional(container: dict[str, Any], name: str, kind: type, where: str, separator: str = ": ") -> Any:
    value = container.get(name)
    if value is None:
        return None
    wrong = not _is_int(value) if kind is int else not isinstance(value, kind)
    if wrong:
        expected = "an integer" if kind is int else "a string"
        raise QuarantineFormatError(f"{where}{separator}{name}: expected {expected} or null, got {value!r}")
    return value


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_unique(sorted_indices: Sequence[int], source: str) -> None:
    for before, after in itertools.pairwise(sorted_indices):
        if before == after:
            raise QuarantineFormatError(f"{source}: samples: index {after} is listed twice")


def _json_type(value: object) -> str:
    names = {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}
    return names.get(type(value), "a number")


# ---- scan index (.db) ------------------------------------------------------------------------------

def _load_index(path: Path) -> Quarantine:
    # Read-only, so pointing the sampler at an index never creates or changes it.
    try:
        with store.reading_index(path), read.reading(path) as connection:
            read.check_index(connection, path)
            rows = list(quarantine.entries(connection))
            latest = store.latest_run(connection)  # the dataset as scanned; guard runs only add failures
            return Quarantine(
                indices=np.array([row.index for row in rows], dtype=np.int64),
                keys=tuple(row.key for row in rows),
                kinds=tuple(row.kinds for row in rows),
                details=tuple(row.detail for row in rows),
                length=latest.length if latest is not None else None,
                fingerprint=latest.fingerprint if latest is not None else None,
                dataset=latest.spec if latest is not None else None,
                source=str(path),
            )
    except sqlite3.DatabaseError as exc:
        raise QuarantineFormatError(f"{path}: cannot read the scan index: {exc}") from None
    except store.IndexFileError as exc:
        raise QuarantineFormatError(str(exc)) from None
