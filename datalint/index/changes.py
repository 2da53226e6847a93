"""What an incremental scan, and `datalint watch`, ask of the index to find what changed since it.

The current source is loaded into a temporary table (`current_samples`: key, position, and for
files the stat and optionally a content hash) and SQLite joins it with the index, so a million
samples cost one pass and no Python set of a million keys. `datalint.scan.changes` decides what
the answers mean (added, changed, removed, moved, re-measured); the statements live here.
"""

from __future__ import annotations

from typing import Any

from datalint.index import store

_LAST_LISTING = "SELECT length FROM runs WHERE kind != 'guard' ORDER BY id DESC LIMIT 1"


def last_listing(connection: Any) -> tuple[int | None, list[str | None]]:
    """The length the last scan run recorded (None: none recorded) and every sample's key, read as
    a listing gives it (a name that is not UTF-8 is stored as its bytes)."""
    length = connection.execute(_LAST_LISTING).fetchone()
    keys = [store.read_key(row[0]) for row in connection.execute("SELECT key FROM samples")]
    return (None if length is None else length[0]), keys
