"""The samples a scan of the dataset saw kill its worker the way a training's process died.

When a DataLoader worker dies and no in-flight record names what it was reading (the training does
not wrap its dataset in `GuardedDataset`), the scan's index still knows which samples crashed an
isolated scan worker, and by which signal (`samples.status = 'crash'`, `error_type` the signal's
name). A worker of the training killed by SIGSEGV most likely met one of the samples that segfaulted
the scan; one killed by SIGKILL, one that the scan saw killed, or run out of memory. These are
suspects, not a record: the diagnosis says so.

The standard library's sqlite3, read-only (`datalint.index.crashes` asks the index): the recorder
imports this module.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path

from datalint.errors import UsageError
from datalint.index import crashes, read

SHOWN = 3  # suspects named in the diagnosis; the rest counted
# error_type values of the scan that match a death by this signal, beyond the signal's own name
ALSO_MATCHING = {"SIGKILL": ("MemoryError",)}


@dataclass(frozen=True)
class Suspect:
    index: int
    key: str | None
    error_type: str  # 'SIGSEGV', 'MemoryError'


@dataclass(frozen=True)
class ScanEvidence:
    """What the index says about a death by `signal_name`."""

    path: str
    scanned: int  # samples the index holds a row for
    signal_name: str | None  # None: any (the death's signal was not seen)
    suspects: tuple[Suspect, ...]  # the first SHOWN, by index
    count: int  # all that match


def check_index(path: Path) -> None:
    """Refuse, with what to do, a file that is not a scan's index (before the training starts)."""
    if not path.is_file():
        raise UsageError(f"--index {path}: no such file (the index `datalint scan` wrote, e.g. "
                         ".datalint/<dataset>.db)")
    try:
        _connect(path).close()
    except sqlite3.DatabaseError as exc:
        raise UsageError(f"--index {path}: not a scan index ({exc}); give the file `datalint scan` "
                         "wrote with --db") from None


def _connect(path: Path) -> sqlite3.Connection:
    db = read.connect(path)
    try:
        crashes.check_samples(db)
    except sqlite3.DatabaseError:
        db.close()
        raise
    return db


def evidence(path: str, signal_name: str | None) -> ScanEvidence | None:
    """The scanned samples that crashed a worker by `signal_name` (None: by any signal, for a death
    whose signal was not seen); None where the index cannot be read now (moved, rewritten since)."""
    names = None if signal_name is None else (signal_name, *ALSO_MATCHING.get(signal_name, ()))
    try:
        db = _connect(Path(path))
    except sqlite3.DatabaseError:
        return None
    try:
        found = crashes.crashed(db, names, SHOWN)
    except sqlite3.DatabaseError:
        return None
    finally:
        db.close()
    suspects = tuple(Suspect(idx, _key(key), kind) for idx, key, kind in found.first)
    return ScanEvidence(path, found.scanned, signal_name, suspects, found.count)


def _key(value: object) -> str | None:
    """A `samples.key` as text: a key that is not UTF-8 is stored as bytes."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "backslashreplace")
    return None if value is None else str(value)


def describe(found: ScanEvidence) -> str:
    """One line for the diagnosis."""
    how = f" with {found.signal_name}" if found.signal_name else ""
    if not found.suspects:
        return (f"the scan's index ({found.path}, {found.scanned} samples) saw no sample crash a "
                f"worker{how}: the sample is not named")
    named = ", ".join(f"sample {s.index}{f' (key {s.key})' if s.key else ''}"
                      f"{f' [{s.error_type}]' if s.error_type != found.signal_name else ''}"
                      for s in found.suspects)
    more = f" and {found.count - len(found.suspects)} more" if found.count > len(found.suspects) else ""
    if found.signal_name is None:
        return (f"no worker's death was seen (one that dies within its first second is not, unless "
                f"GuardedDataset announces it); the scan's index ({found.path}) saw {named}{more} "
                "crash a worker")
    which = "most likely the one it was reading" if found.count == 1 else "most likely one of them"
    return (f"not named by an in-flight record; the scan's index ({found.path}) saw {named}{more} crash "
            f"a worker{how}: {which}")
