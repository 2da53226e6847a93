"""What a population summary reads from an index or shard file, and where the file keeps it.

`datalint.scan.summaries` counts, merges and judges summaries; the statements live here: the
columns a summary counts (all rows, the rows a clause selects, the rows at some positions), the
marks that say which rows it covers, the ok values of a column grouped for the exact quantiles,
and the `population_summary` table a file keeps its summary in (as JSON text).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from typing import Any

SUMMARY_TABLE = "population_summary"
MARKED = ("key", "status", "signature", "nbytes", "duration", "info")  # what a row's mark hashes
ROOT_TYPE = "json_extract(signature, '$.type')"  # what the policy groups sizes by

_COUNTED = "SELECT status, signature, nbytes, duration, info, key FROM samples"


def marked_rows(connection: Any) -> Iterable[tuple[Any, ...]]:
    """The MARKED columns of every row."""
    return connection.execute(f"SELECT {', '.join(MARKED)} FROM samples")


def counted_rows(
    connection: Any, where: str = "", parameters: Sequence[Any] = ()
) -> Iterable[tuple[Any, ...]]:
    """(status, signature, nbytes, duration, info, key) of the rows `where` selects (all: none)."""
    return connection.execute(f"{_COUNTED} {where}", parameters)


def counted_rows_at(connection: Any, positions: Sequence[int]) -> Iterable[tuple[Any, ...]]:
    """(status, signature, nbytes, duration, info, key) of the rows at `positions` (a few hundred)."""
    query = f"{_COUNTED} WHERE idx IN ({', '.join('?' for _ in positions)})"
    return connection.execute(query, positions)


def no_samples(connection: sqlite3.Connection) -> bool:
    """True when the file holds no sample (or no samples table yet: a new index)."""
    try:
        return connection.execute("SELECT 1 FROM samples LIMIT 1").fetchone() is None
    except sqlite3.OperationalError:
        return True


def grouped_ok_values(
    db: Any, column: str, tests: Sequence[str], parameters: Sequence[Any]
) -> Iterable[tuple[Any, Any, int]]:
    """(value, root type, count) of the ok rows whose `column` passes one of `tests` (SQL with `?`
    for `parameters`), one row per distinct value and root type, in the order of the values."""
    query = (
        f"SELECT {column}, {ROOT_TYPE}, count(*) FROM samples WHERE status = 'ok' AND ({' OR '.join(tests)})"
        " GROUP BY 1, 2 ORDER BY 1"
    )
    return db.execute(query, parameters)


def store_summary(
    connection: sqlite3.Connection, version: int, samples: int, coverage: str, body: str
) -> None:
    """Keep a summary (its JSON `body`) in the file, inside the caller's transaction; its version and
    the rows it covers are columns beside it, for whoever looks at the file."""
    connection.execute(f"DROP TABLE IF EXISTS {SUMMARY_TABLE}")  # one of an older layout too
    connection.execute(
        f"CREATE TABLE {SUMMARY_TABLE} (version INTEGER NOT NULL, samples INTEGER NOT NULL, "
        "coverage TEXT NOT NULL, body TEXT NOT NULL)"
    )
    connection.execute(
        f"INSERT INTO {SUMMARY_TABLE} (version, samples, coverage, body) VALUES (?, ?, ?, ?)",
        (version, samples, coverage, body),
    )


def summary_body(connection: sqlite3.Connection) -> str | None:
    """The JSON body of the summary the file keeps; None when it keeps none (a file written before
    summaries existed has no table)."""
    try:
        row = connection.execute(f"SELECT body FROM {SUMMARY_TABLE}").fetchone()
    except sqlite3.OperationalError:  # no such table
        return None
    return None if row is None else str(row[0])


def drop_summary(connection: sqlite3.Connection) -> None:
    """Forget the kept summary, inside the caller's transaction."""
    connection.execute(f"DROP TABLE IF EXISTS {SUMMARY_TABLE}")
