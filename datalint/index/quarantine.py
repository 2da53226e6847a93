"""The quarantine list as the index holds it: the format's name, and the one reading of the list from an
index (every finding marked for quarantine, one entry per sample, its kinds by severity and their details
joined as the scan writes them), for the service's published lists and the training path alike.

The list written from findings in memory (`datalint scan`, `datalint quarantine` under another policy)
is `scan.policy.quarantine_document`; both give entries in the same order with the same words.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from datalint.index import positions
from datalint.index.kinds import severity_sql
from datalint.index.store import read_key

FORMAT = "datalint-quarantine/1"
DETAIL_SEPARATOR = "; "  # between the details of one sample's kinds


def _grouped(where: str) -> str:
    """The quarantined findings by sample, each sample's kinds in severity order."""
    return f"""
        SELECT idx, kind, detail FROM findings WHERE quarantine = 1 {where}
        ORDER BY idx, {severity_sql()}, kind
    """


def entries_json_sql(where: str = "") -> str:
    """(position, one compact JSON object) per quarantined sample (`index`: its position, `key`,
    `kinds`, `detail`), by position: SQLite assembles a million of them in seconds. `where` narrows
    the findings by row (`AND idx IN (...)`). Needs `position_of` (every index connection has it)."""
    return f"""
        SELECT position, json_object('index', position, 'key', key, 'kinds', json(kinds),
                                     'detail', detail) AS entry
        FROM (
            SELECT coalesce(position_of(f.idx), f.idx) AS position, s.key AS key,
                   json_group_array(f.kind) AS kinds, group_concat(f.detail, '{DETAIL_SEPARATOR}') AS detail
            FROM ({_grouped(where)}) AS f
            LEFT JOIN samples s ON s.idx = f.idx
            GROUP BY f.idx
        )
        ORDER BY position
    """


@dataclass(frozen=True)
class Entry:
    """One sample of the list."""

    index: int
    key: str | None
    kinds: tuple[str, ...]
    detail: str


def entries(connection: sqlite3.Connection) -> Iterator[Entry]:
    """The list's entries as values, by position (the training path's reading of an index)."""
    query = f"""
        SELECT coalesce(position_of(f.idx), f.idx) AS position, s.key, group_concat(f.kind, char(31)),
               group_concat(f.detail, '{DETAIL_SEPARATOR}')
        FROM ({_grouped('')}) AS f
        LEFT JOIN samples s ON s.idx = f.idx
        GROUP BY f.idx ORDER BY position
    """
    for index, key, kinds, detail in connection.execute(query):
        yield Entry(index, read_key(key), tuple(dict.fromkeys(kinds.split("\x1f"))), detail or "")


def entries_of(connection: sqlite3.Connection, indexes: Sequence[int]) -> list[tuple[int, str]]:
    """(position, the entry's JSON) of the samples at these positions where they are listed: cheap
    for a batch of failures."""
    order = positions.read(connection)
    rows = sorted({row for row in map(order.id_at, indexes) if row is not None})
    found: list[tuple[int, str]] = []
    for start in range(0, len(rows), 500):
        part = rows[start : start + 500]
        marks = ", ".join("?" for _ in part)
        found += connection.execute(entries_json_sql(f"AND idx IN ({marks})"), part).fetchall()
    return sorted(found)
