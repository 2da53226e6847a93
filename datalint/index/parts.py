"""The index read in parts (consecutive ranges of positions) and by position, for a population
pass that judges a large index part by part (`datalint.scan.summary_findings`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from datalint.index.summaries import MARKED

_ROWS = f"SELECT idx, {', '.join(MARKED)} FROM samples WHERE idx BETWEEN ? AND ? ORDER BY idx"


def bounds(db: Any) -> tuple[int | None, int | None]:
    """The least and the greatest position a sample has (None, None: no sample)."""
    first, last = db.execute("SELECT min(idx), max(idx) FROM samples").fetchone()
    return first, last


def rows_between(db: Any, first: int, last: int) -> Iterable[tuple[Any, ...]]:
    """(idx, *MARKED) of every row at positions `first`..`last`, by position."""
    return db.execute(_ROWS, (first, last))


def rows_at(db: Any, columns: str, positions: Sequence[int]) -> Iterable[tuple[Any, ...]]:
    """(idx, *columns) of the rows at `positions` (a few hundred: one `idx IN (...)`)."""
    query = f"SELECT idx, {columns} FROM samples WHERE idx IN ({', '.join('?' for _ in positions)})"
    return db.execute(query, positions)
