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
from collections.abc import Iterator
from pathlib import Path

from datalint.index.store import SCHEMA_VERSION, IndexFileError

REQUIRED_TABLES = ("runs", "samples", "findings")


def uri(path: str | os.PathLike[str]) -> str:
    """The read-only URI of the file at `path`, whatever its name holds."""
    return f"{Path(path).resolve().as_uri()}?mode=ro"


def connect(path: str | os.PathLike[str], *, timeout: float = 10.0) -> sqlite3.Connection:
    """A connection that can only read the SQLite file at `path` (never creates or changes it)."""
    return sqlite3.connect(uri(path), uri=True, timeout=timeout)


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
