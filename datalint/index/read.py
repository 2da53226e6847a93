"""The one read-only open of an index (and of any SQLite file datalint reads without writing).

A path is handed to SQLite as a `file:` URI built by `Path.as_uri()`, which percent-encodes it: a
name holding `#`, `?`, `%`, spaces or bytes that are not UTF-8 opens that file, where `f"file:{path}"`
would cut the name at `#` or `?`, open (or create) another file, and report "no such table".
`mode=ro` never creates or changes the file.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from datalint.index import positions
from datalint.index.store import SCHEMA_VERSION, IndexFileError, RunRecord, latest_run, read_key

REQUIRED_TABLES = ("runs", "samples", "findings")


def uri(path: str | os.PathLike[str]) -> str:
    """The read-only URI of the file at `path`, whatever its name holds."""
    return f"{Path(path).resolve().as_uri()}?mode=ro"


def connect(path: str | os.PathLike[str], *, timeout: float = 10.0) -> sqlite3.Connection:
    """A connection that can only read the SQLite file at `path` (never creates or changes it); its
    `position_of(idx)` gives a sample's current position (`datalint.index.positions`)."""
    connection = sqlite3.connect(uri(path), uri=True, timeout=timeout)
    positions.register(connection)
    return connection


@contextlib.contextmanager
def reading(path: str | os.PathLike[str], *, timeout: float = 10.0) -> Iterator[sqlite3.Connection]:
    """`connect(path)` for one piece of work, closed after it."""
    connection = connect(path, timeout=timeout)
    try:
        yield connection
    finally:
        connection.close()


def open_index(
    path: str | os.PathLike[str], *, timeout: float = 10.0, required: tuple[str, ...] = REQUIRED_TABLES
) -> sqlite3.Connection:
    """A datalint index opened read-only, or an IndexFileError saying why the file is not one: missing,
    a folder, not SQLite, an SQLite file datalint did not write, or written by a newer datalint."""
    where = Path(path)
    if not where.exists():
        raise IndexFileError(f"{where}: no such index; run `datalint scan ... --db {where}` first")
    if where.is_dir():
        raise IndexFileError(f"{where}: is a directory; pass the index file (e.g. .datalint/scan.db)")
    connection = connect(where, timeout=timeout)
    try:
        check_index(connection, where, required)
    except BaseException:
        connection.close()
        raise
    return connection


def has_tables(connection: sqlite3.Connection, required: tuple[str, ...] = REQUIRED_TABLES) -> bool:
    """Whether the index holds its tables yet: a file its first writer has created but not filled
    holds none for a moment, and a reader then has nothing to read, not an error."""
    tables = {row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    return set(required) <= tables


def check_index(
    connection: sqlite3.Connection, path: Path, required: tuple[str, ...] = REQUIRED_TABLES
) -> None:
    """Raise IndexFileError unless the open file is a datalint index this version reads, with the
    `required` tables (a report reads a scan killed before its findings were written)."""
    try:
        version = connection.execute("PRAGMA user_version").fetchone()[0]
        tables = {row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    except sqlite3.DatabaseError as exc:
        raise IndexFileError(f"{path}: not a datalint index ({exc})") from None
    missing = [name for name in required if name not in tables]
    if missing:
        raise IndexFileError(
            f"{path}: not a datalint index (no table {', '.join(missing)}); "
            "pass the .db file written by `datalint scan`"
        )
    if version > SCHEMA_VERSION:
        raise IndexFileError(
            f"{path}: index schema version {version} is newer than this datalint understands "
            f"({SCHEMA_VERSION}); upgrade datalint"
        )
    positions.read(connection)  # a damaged order is named here, not mid-query by SQLite


# ---- what the service asks of an index it serves ---------------------------------------------------

_SCANNED = "run_id IN (SELECT id FROM runs WHERE kind != 'guard')"  # rows a scan (not the guard) wrote


@dataclass(frozen=True)
class Totals:
    """An index at a glance: its samples, those listed, the training failures kept, the last scan."""

    samples: int
    quarantined: int
    failures: int
    last_scan: RunRecord | None


def totals(connection: sqlite3.Connection) -> Totals:
    from datalint.index import failures  # it builds on this package's store

    if not has_tables(connection):  # a scan, a watcher or the first failures are creating it now
        return Totals(0, 0, 0, None)
    samples = connection.execute("SELECT count(*) FROM samples").fetchone()[0]
    listed = connection.execute("SELECT count(DISTINCT idx) FROM findings WHERE quarantine = 1").fetchone()[0]
    return Totals(int(samples), int(listed), len(failures.active(connection)), latest_run(connection))


@dataclass(frozen=True)
class Measured:
    """How far a scan has got: samples measured, of how many, and how many are not ok."""

    done: int
    total: int | None
    not_ok: int


def last_scan_id(connection: sqlite3.Connection) -> int | None:
    """The id of the index's last scan run (None: no scan in it yet)."""
    (found,) = connection.execute("SELECT max(id) FROM runs WHERE kind != 'guard'").fetchone()
    return int(found) if found is not None else None


def measured(connection: sqlite3.Connection, after_run: int | None = None) -> Measured:
    """What the scans measured so far; nothing while the last scan run is still `after_run` (a scan
    asked for has not begun its own run: the rows are the last scan's)."""
    run = connection.execute(
        "SELECT length, id FROM runs WHERE kind != 'guard' ORDER BY id DESC LIMIT 1"
    ).fetchone()
    if after_run is not None and (run is None or run[1] <= after_run):
        return Measured(0, None, 0)
    done = connection.execute(f"SELECT count(*) FROM samples WHERE {_SCANNED}").fetchone()[0]
    bad = connection.execute(f"SELECT count(*) FROM samples WHERE {_SCANNED} AND status != 'ok'")
    bad = bad.fetchone()[0]
    return Measured(int(done), run[0] if run else None, int(bad))


def scanned_keys(connection: sqlite3.Connection, indexes: Sequence[int]) -> dict[int, str]:
    """The key a scan found at each of these positions (where it found one)."""
    order = positions.read(connection)
    rows_at = {row: index for index in indexes if (row := order.id_at(index)) is not None}
    wanted = sorted(rows_at)
    found: dict[int, str] = {}
    for start in range(0, len(wanted), 500):
        part = wanted[start : start + 500]
        marks = ", ".join("?" for _ in part)
        rows = connection.execute(
            f"SELECT idx, key FROM samples WHERE idx IN ({marks}) AND key IS NOT NULL AND {_SCANNED}", part
        )
        found.update((rows_at[row], key) for row, key in ((i, read_key(k)) for i, k in rows) if key)
    return found


@dataclass(frozen=True)
class FailedSample:
    """A sample that did not measure ok, as its row says: position, exception type and message."""

    index: int
    error_type: str | None
    message: str | None


def failed_samples(connection: sqlite3.Connection) -> list[FailedSample]:
    """Every sample whose status is not `ok` (a scan's or the guard's), by position."""
    if not has_tables(connection, ("samples",)):
        return []
    rows = connection.execute(
        "SELECT coalesce(position_of(idx), idx) AS position, error_type, error_message FROM samples"
        " WHERE status != 'ok' ORDER BY position"
    )
    return [FailedSample(int(index), kind, message) for index, kind, message in rows]


def measured_sizes(connection: sqlite3.Connection) -> tuple[list[int], int]:
    """The bytes of every sample measured ok (`nbytes`), and how many samples were not ok."""
    sizes = [int(n) for (n,) in connection.execute(
        "SELECT nbytes FROM samples WHERE status = 'ok' AND nbytes IS NOT NULL"
    )]
    (failed,) = connection.execute("SELECT count(*) FROM samples WHERE status != 'ok'").fetchone()
    return sizes, int(failed)


def keys_at(connection: Any, indexes: Sequence[int]) -> dict[int, str | None]:
    """The key of each of these rows (by idx; None where it has none), whoever wrote it."""
    found: dict[int, str | None] = {}
    ordered = sorted(indexes)
    for start in range(0, len(ordered), 500):
        part = ordered[start : start + 500]
        marks = ", ".join("?" for _ in part)
        for index, key in connection.execute(f"SELECT idx, key FROM samples WHERE idx IN ({marks})", part):
            found[index] = read_key(key)
    return found
