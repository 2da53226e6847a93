"""How a dataset names its samples: the one rule the scan, the index, the list and the training path
read keys by, the fingerprint over them, and the files behind them.

A key is what identifies a sample across scans and training runs: `datalint_key(i)` where the dataset
defines it, else the path of entry `i` of ImageFolder-style `samples` / `imgs`. Positions change when
files come and go; keys do not.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Sequence
from typing import Any

KeyReader = Callable[[int], Any]


def key_function(dataset: Any) -> Callable[[int], Any] | None:
    """How the dataset names sample `i`: its `datalint_key(i)` method, or the path of entry `i` of
    ImageFolder-style `samples` / `imgs` (a list or tuple, or a numpy array of paths or of
    (path, label) rows); None when it names none. The index, the quarantine
    list and the training path's staleness check all read keys through this one rule."""
    method = getattr(dataset, "datalint_key", None)
    if callable(method):
        return method
    return path_reader(dataset)


def _is_text_array(value: Any) -> bool:
    """A numpy array of paths (1-D) or of (path, label) rows (2-D), told apart without importing
    numpy: a string, bytes or object dtype, one or two dimensions."""
    kind = getattr(getattr(value, "dtype", None), "kind", None)
    return kind in ("U", "S", "O") and getattr(value, "ndim", None) in (1, 2)


class EntryPaths:
    """Keys read from a list of (path, class) entries, as ImageFolder keeps them."""

    def __init__(self, entries: Sequence[Any]) -> None:
        self.entries = entries

    def __len__(self) -> int:
        return len(self.entries)

    def __call__(self, index: int) -> str:
        return _path_of(self.entries[index])


def _is_path_entry(entry: Any) -> bool:
    head = _head(entry)
    return isinstance(head, (str, bytes)) or hasattr(head, "__fspath__")


def _path_of(entry: Any) -> str:
    head = _head(entry)
    return os.fsdecode(head) if isinstance(head, bytes) else str(head)


def _head(entry: Any) -> Any:
    """The path of an entry: the entry itself, or the first item of a (path, label) row."""
    if isinstance(entry, (list, tuple)) or getattr(entry, "ndim", 0) == 1:
        return entry[0] if len(entry) > 0 else None
    return entry


def path_reader(dataset: Any) -> EntryPaths | None:
    """The file behind sample `i` by the ImageFolder convention (`samples`, or the older `imgs`),
    whatever `datalint_key` the dataset also defines; None when it keeps no such list."""
    for attribute in ("samples", "imgs"):
        entries: Any = getattr(dataset, attribute, None)
        listed = isinstance(entries, (list, tuple)) or _is_text_array(entries)
        if listed and len(entries) > 0 and _is_path_entry(entries[0]):
            return EntryPaths(entries)
    return None


def fingerprint(length: int, key: KeyReader, on_key: Callable[[int], None] | None = None) -> str | None:
    """sha256 over `"<index>\t<key>\n"` for every sample when the dataset names its samples (None when
    it does not, or has none), so a list made for another dataset is caught.

    `on_key(i)` is called before key `i` is read."""
    if length == 0:
        return None
    if on_key is not None:
        on_key(0)
    if key(0) is None:
        return None
    digest = hashlib.sha256()
    if on_key is not None:
        for index in range(length):
            on_key(index)
            digest.update(f"{index}\t{key(index)}\n".encode("utf-8", "surrogatepass"))
        return digest.hexdigest()
    # The same bytes, hashed a block of keys at a time: an incremental scan of a large folder
    # pays this on every run, and one encode and update per key cost more than the hashing.
    for start in range(0, length, _FINGERPRINT_BLOCK):
        end = min(start + _FINGERPRINT_BLOCK, length)
        lines = "".join([f"{index}\t{key(index)}\n" for index in range(start, end)])
        digest.update(lines.encode("utf-8", "surrogatepass"))
    return digest.hexdigest()


_FINGERPRINT_BLOCK = 8192
