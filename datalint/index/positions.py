"""Where each sample of the index stands in the dataset now: keys are identity, positions are derived.

A row of `samples` is identified by its `idx`, which never changes while the row lives. A full scan
gives each row its position as its `idx`. An incremental scan keeps the rows it finds again as they
are, however far files inserted or removed before them moved them: it does not rewrite a row, or
its findings, to follow a move. When positions then differ from the rows' `idx`, the scan stores
the current order once, as one array (`sample_order`: the `idx` of the sample at each position), and
every reader derives a position from it: the list, the report, `open_index` and the service.

In SQL, `position_of(idx)` gives the position (NULL for a row the current order does not hold);
`register` puts it on a connection, and every connection the index package opens has it. With no
order stored (the index as a full scan left it), `position_of(idx)` is `idx`.
"""

from __future__ import annotations

import array
import sqlite3
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

ORDER_TABLE = "sample_order"
_READ = f"SELECT ids FROM {ORDER_TABLE} WHERE id = 0"
_ID_BYTES = 8  # each row id of the stored order: a little-endian signed 64-bit integer


@dataclass(frozen=True)
class Positions:
    """The current order of the samples: `ids[p]` is the `idx` of the sample at position `p`; None
    when every sample's position is its `idx`."""

    ids: array.array[int] | None = None
    # idx -> position, built at the first lookup (most readers ask only `id_at`, or nothing).
    _index: dict[int, int] = field(default_factory=dict, repr=False, compare=False)

    @property
    def identity(self) -> bool:
        return self.ids is None

    def position(self, idx: int) -> int | None:
        """The position of the row `idx`, None when the current order does not hold it."""
        if self.ids is None:
            return idx
        if not self._index and len(self.ids):
            self._index.update(zip(self.ids, range(len(self.ids)), strict=True))
        return self._index.get(idx)

    def shown(self, idx: int) -> int:
        """The position a list or a report shows for `idx` (the row's own `idx` when the order does
        not hold it: a row the training guard added for a sample no scan has seen)."""
        found = self.position(idx)
        return idx if found is None else found

    def id_at(self, position: int) -> int | None:
        """The `idx` of the sample at `position`, None past the end of the order."""
        if self.ids is None:
            return position
        return self.ids[position] if 0 <= position < len(self.ids) else None


IDENTITY = Positions()  # no order stored: each sample's position is its row's idx


def sql(column: str = "idx") -> str:
    """SQL for the position of the row `column` names, as a list or a report shows it (the row's own
    idx where the order does not hold it, as `Positions.shown`)."""
    return f"coalesce(position_of({column}), {column})"


def from_ids(ids: Iterable[int]) -> Positions:
    """The order these row ids (by position) give; the identity when each is its position."""
    order = array.array("q", ids)
    if all(idx == position for position, idx in enumerate(order)):
        return IDENTITY
    return Positions(order)


def read(connection: Any) -> Positions:
    """The order stored in the index (a `sqlite3.Connection` or a sqlite-utils Database); the
    identity when none is stored, or the index predates stored orders."""
    try:
        row = connection.execute(_READ).fetchone()
    except sqlite3.OperationalError:  # no such table: an index from before schema version 5
        return IDENTITY
    if row is None or row[0] is None:
        return IDENTITY
    stored = row[0]
    if not isinstance(stored, bytes) or len(stored) % _ID_BYTES:
        from datalint.index.store import IndexFileError  # it builds on this module

        raise IndexFileError(
            f"{_path(connection)}: its sample order (table {ORDER_TABLE}) is damaged: not whole 64-bit "
            "row ids (edited by hand?); restore the file, or scan again with --rescan"
        )
    order = array.array("q")
    order.frombytes(stored)
    if sys.byteorder != "little":
        order.byteswap()
    return Positions(order)


def write(db: Any, positions: Positions) -> None:
    """Store `positions` as the index's current order (inside the caller's write transaction), and
    give the writer's own connection the new `position_of`."""
    if positions.ids is None:
        db.execute(f"DELETE FROM {ORDER_TABLE}")
    else:
        order = array.array("q", positions.ids)
        if sys.byteorder != "little":
            order.byteswap()
        db.execute(f"INSERT OR REPLACE INTO {ORDER_TABLE} (id, ids) VALUES (0, ?)", [order.tobytes()])
    register(_connection(db), positions)


def register(connection: sqlite3.Connection, positions: Positions | None = None) -> None:
    """Give `connection` the SQL functions `position_of(idx)` and its inverse `row_at(position)`:
    from `positions` (the order this connection just wrote), or from the order the index holds, read
    at the first call. A connection kept open while another process stores a new order (a notebook's
    reader during a scan) reads it again: `PRAGMA data_version` says so, asked at most every
    `_RECHECK_S` (a statement reads one snapshot, so no call within it can see another order)."""
    cache = None if positions is None else _Cached(positions, _data_version(connection), time.monotonic())

    def order() -> Positions:
        nonlocal cache
        now = time.monotonic()
        if cache is not None and now - cache.checked < _RECHECK_S:
            return cache.positions
        version = _data_version(connection)
        if cache is None or version != cache.version:
            cache = _Cached(read(connection), version, now)
        else:
            cache = _Cached(cache.positions, version, now)
        return cache.positions

    def position_of(idx: Any) -> int | None:
        return None if idx is None else order().position(int(idx))

    def row_at(position: Any) -> int | None:
        return None if position is None else order().id_at(int(position))

    connection.create_function("position_of", 1, position_of, deterministic=True)
    connection.create_function("row_at", 1, row_at, deterministic=True)


_RECHECK_S = 0.5


@dataclass(frozen=True)
class _Cached:
    positions: Positions
    version: int  # PRAGMA data_version when read: other connections' commits change it
    checked: float  # time.monotonic() of the last look


def _data_version(connection: sqlite3.Connection) -> int:
    return int(connection.execute("PRAGMA data_version").fetchone()[0])


def _path(connection: Any) -> str:
    row = connection.execute("PRAGMA database_list").fetchone()
    return str(row[2]) if row and row[2] else "the index"


def _connection(db: Any) -> sqlite3.Connection:
    return db if isinstance(db, sqlite3.Connection) else db.conn
