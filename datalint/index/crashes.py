"""The samples a scan saw crash an isolated worker, and how (`samples.status = 'crash'`, `error_type`
the signal's name, or the error a killed worker is taken for): what the flight recorder names as the
suspects of a training worker's death.

Light to import (sqlite3 and the store's helpers): the recorder imports it while a training runs.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass

from datalint.index.store import count_samples


@dataclass(frozen=True)
class Crashes:
    """What an index holds about the samples that crashed a worker in one way."""

    scanned: int  # samples the index holds a row for
    count: int  # those that match
    first: tuple[tuple[int, object, str], ...]  # (index, the stored key, error_type) of the first, by index


def check_samples(connection: sqlite3.Connection) -> None:
    """Raise sqlite3.DatabaseError unless the file holds the samples a scan writes (a crash is one)."""
    connection.execute("SELECT idx, key, status, error_type FROM samples LIMIT 1").fetchall()


def crashed(connection: sqlite3.Connection, error_types: Sequence[str] | None, shown: int) -> Crashes:
    """The samples whose error is one of `error_types` (None: every sample that crashed a worker,
    whatever the signal), and the first `shown` of them."""
    names: tuple[str, ...] = () if error_types is None else tuple(error_types)
    where = "status = 'crash'" if error_types is None else f"error_type IN ({', '.join('?' * len(names))})"
    scanned = count_samples(connection)
    count = connection.execute(f"SELECT count(*) FROM samples WHERE {where}", names).fetchone()[0]
    rows = connection.execute(
        f"SELECT coalesce(position_of(idx), idx) AS position, key, error_type FROM samples WHERE {where}"
        " ORDER BY position LIMIT ?",
        (*names, shown),
    ).fetchall()
    first = tuple((int(idx), key, str(kind)) for idx, key, kind in rows)
    return Crashes(int(scanned), int(count), first)
