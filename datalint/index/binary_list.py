"""The binary quarantine list: a sorted uint64 array behind a small JSON header, memory-mapped.

`quarantine.json` costs ~100 bytes and a few Python objects per sample: fine for thousands of
samples, not for 1e7. This form costs 8 bytes per sample on disk and nothing per rank in memory:
`load_binary_quarantine` maps the array read-only, so every rank of a node shares one copy through
the page cache. Layout (all little-endian):

    bytes 0-7    magic b"DLQBIN1\\n"
    bytes 8-15   header length H (uint64), a multiple of 8 so the array is aligned
    next H bytes the header: UTF-8 JSON padded with spaces, {"format": "datalint-quarantine-bin/1",
                 "count", "length", "fingerprint", "dataset", "policy"}
    the rest     `count` quarantined indices, uint64, sorted ascending, unique

Keys, kinds and details are not stored (at that size they live in the scan index); the list is
matched to its dataset by length and fingerprint.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, overload

import numpy as np
import numpy.typing as npt

from datalint.files import write_atomically

MAGIC = b"DLQBIN1\n"
FORMAT = "datalint-quarantine-bin/1"
SUFFIX = ".bin"

# From this many samples on a list is written in the binary form unless asked otherwise
# (a JSON list of this size is ~100 MB and takes seconds to parse on every rank).
BINARY_FROM = 1_000_000

_CHECK_CHUNK = 1 << 20


def is_binary_list(path: str | os.PathLike[str]) -> bool:
    """True for a file that starts with the binary list's magic. Opened without blocking: a FIFO
    (or anything but a regular file) is not one, and is left to the JSON reader to refuse."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return False
        return os.read(fd, len(MAGIC)) == MAGIC
    finally:
        os.close(fd)


def write_binary_quarantine(
    path: str | os.PathLike[str],
    indices: npt.ArrayLike,
    *,
    length: int | None,
    fingerprint: str | None = None,
    dataset: str | None = None,
    policy: Any = None,
) -> Path:
    """Write the list atomically (temporary file, fsync, rename): readers never see half of one.

    `indices` may come in any order; they are sorted here. Duplicates or negative indices are refused.
    """
    target = Path(path)
    array = np.sort(np.asarray(indices, dtype=np.int64))
    if array.size and int(array[0]) < 0:
        raise ValueError(f"negative index {int(array[0])} in a quarantine list")
    if array.size > 1 and not bool((array[1:] > array[:-1]).all()):
        raise ValueError("an index is listed twice in the quarantine list")
    if length is not None and array.size and int(array[-1]) >= length:
        raise ValueError(f"index {int(array[-1])} is past the end of a dataset of length {length}")
    header = {
        "format": FORMAT,
        "count": int(array.size),
        "length": length,
        "fingerprint": fingerprint,
        "dataset": dataset,
        "policy": policy,
    }
    encoded = json.dumps(header, sort_keys=True).encode("utf-8")
    encoded += b" " * (-len(encoded) % 8)
    target.parent.mkdir(parents=True, exist_ok=True)
    # in parts: the indices are never copied into one buffer with the header
    body = array.astype("<u8").tobytes()
    write_atomically(target, (MAGIC, len(encoded).to_bytes(8, "little"), encoded, body))
    return target


class BinaryListError(ValueError):
    """A file that starts like a binary quarantine list but is not a valid one."""


def read_binary_header(path: Path) -> tuple[dict[str, Any], int]:
    """The header and the byte offset of the array."""
    with path.open("rb") as handle:
        start = handle.read(16)
        if len(start) < 16 or start[:8] != MAGIC:
            raise BinaryListError("not a binary quarantine list (bad magic)")
        size = int.from_bytes(start[8:16], "little")
        if size % 8 or size > 1 << 20:
            raise BinaryListError(f"header length {size} is not a multiple of 8 under 1 MiB")
        raw = handle.read(size)
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BinaryListError(f"header is not JSON: {exc}") from None
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise BinaryListError(f"header format: expected {FORMAT!r}")
    count = header.get("count")
    if not isinstance(count, int) or isinstance(count, bool) or count < 0:
        raise BinaryListError(f"header count: expected a non-negative integer, got {count!r}")
    return header, 16 + size


def map_binary_indices(path: Path) -> tuple[dict[str, Any], npt.NDArray[np.int64]]:
    """The header and the indices, memory-mapped read-only and checked sorted, unique, in range."""
    header, offset = read_binary_header(path)
    count: int = header["count"]
    expected = offset + 8 * count
    actual = path.stat().st_size
    if actual != expected:
        raise BinaryListError(f"{count} indices need {expected} bytes, the file has {actual} (truncated?)")
    if count == 0:
        empty = np.empty(0, dtype=np.int64)
        empty.setflags(write=False)
        return header, empty
    # uint64 on disk; every valid index is below 2**63, so the same bytes read as int64 are equal.
    indices: npt.NDArray[np.int64] = np.memmap(path, dtype="<i8", mode="r", offset=offset, shape=(count,))
    _check_sorted(indices, header.get("length"))
    return header, indices


def _check_sorted(indices: npt.NDArray[np.int64], length: Any) -> None:
    previous = -1
    for start in range(0, len(indices), _CHECK_CHUNK):
        part = np.asarray(indices[start : start + _CHECK_CHUNK])
        if int(part[0]) <= previous or not bool((part[1:] > part[:-1]).all()):
            raise BinaryListError("indices are not sorted and unique (or an index is past 2**63)")
        previous = int(part[-1])
    if isinstance(length, int) and previous >= length:
        raise BinaryListError(f"index {previous} is past the end of a dataset of length {length}")


class Repeated(Sequence[Any]):
    """`count` copies of one value, without holding `count` references (the missing keys and kinds)."""

    def __init__(self, value: Any, count: int) -> None:
        self.value = value
        self.size = count

    def __len__(self) -> int:
        return self.size

    @overload
    def __getitem__(self, index: int) -> Any: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[Any]: ...

    def __getitem__(self, index: int | slice) -> Any:
        if isinstance(index, slice):
            return Repeated(self.value, len(range(*index.indices(self.size))))
        if not -self.size <= index < self.size:
            raise IndexError(index)
        return self.value

    def __iter__(self) -> Iterator[Any]:
        for _ in range(self.size):
            yield self.value

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Repeated):
            return self.value == other.value and self.size == other.size
        return isinstance(other, Sequence) and len(other) == self.size and all(v == self.value for v in other)

    __hash__ = None  # type: ignore[assignment]


def write_from_document(path: str | os.PathLike[str], document: dict[str, Any]) -> Path:
    """The binary form of a `quarantine.json` document (its indices, length, fingerprint, dataset, policy)."""
    return write_binary_quarantine(
        path,
        np.fromiter((int(sample["index"]) for sample in document["samples"]), dtype=np.int64),
        length=document.get("length"),
        fingerprint=document.get("fingerprint"),
        dataset=document.get("dataset"),
        policy=document.get("policy"),
    )


def binary_path_beside(json_path: Path) -> Path:
    """Where the scan puts the binary list next to `quarantine.json`: the same name, `.bin` for `.json`."""
    return json_path.with_suffix(SUFFIX)


def is_large(document: dict[str, Any]) -> bool:
    """Whether a list is past the size from which every rank should map, not parse, it."""
    return len(document["samples"]) >= BINARY_FROM


def write_beside_if_large(json_path: Path, document: dict[str, Any]) -> Path | None:
    """Beside a written `quarantine.json`, its binary form when the list is large (returns its path);
    a binary list left there by an earlier, larger list is removed, as it no longer matches."""
    beside = binary_path_beside(json_path)
    if is_large(document):
        return write_from_document(beside, document)
    if beside.is_file() and is_binary_list(beside):
        beside.unlink()
    return None
