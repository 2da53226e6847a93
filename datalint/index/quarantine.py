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
    """One compact JSON object per quarantined sample (`index`, `key`, `kinds`, `detail`), by index:
    SQLite assembles a million of them in seconds. `where` narrows the findings (`AND idx IN (...)`)."""
    return f"""
        SELECT f.idx, json_object('index', f.idx, 'key', s.key, 'kinds', json_group_array(f.kind),
                                  'detail', group_concat(f.detail, '{DETAIL_SEPARATOR}')) AS entry
        FROM ({_grouped(where)}) AS f
        LEFT JOIN samples s ON s.idx = f.idx
        GROUP BY f.idx ORDER BY f.idx
    """


@dataclass(frozen=True)
class Entry:
    """One sample of the list."""

    index: int
    key: str | None
    kinds: tuple[str, ...]
    detail: str


def entries(connection: sqlite3.Connection) -> Iterator[Entry]:
    """The list's entries as values, by index (the training path's reading of an index)."""
    query = f"""
        SELECT f.idx, s.key, group_concat(f.kind, char(31)), group_concat(f.detail, '{DETAIL_SEPARATOR}')
        FROM ({_grouped('')}) AS f
        LEFT JOIN samples s ON s.idx = f.idx
        GROUP BY f.idx ORDER BY f.idx
    """
    for index, key, kinds, detail in connection.execute(query):
        yield Entry(index, read_key(key), tuple(dict.fromkeys(kinds.split("\x1f"))), detail or "")


def entries_of(connection: sqlite3.Connection, indexes: Sequence[int]) -> list[tuple[int, str]]:
    """(index, the entry's JSON) of these samples where they are listed: cheap for a batch of failures."""
    found: list[tuple[int, str]] = []
    for start in range(0, len(indexes), 500):
        part = sorted(set(indexes[start : start + 500]))
        marks = ", ".join("?" for _ in part)
        found += connection.execute(entries_json_sql(f"AND idx IN ({marks})"), part).fetchall()
    return found
