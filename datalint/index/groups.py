"""The near-duplicate groups a scan keeps in the index (`hash_groups`: key, perceptual hash, group
label; `hash_group_radius`: the radius they hold for), read and written as plain values.

Derived state: `datalint.scan.hash_groups` decides what the groups are and which rows changed; this
module only stores and reads them. Only a scan writes them.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from datalint.index import store

_CREATE = (
    "CREATE TABLE IF NOT EXISTS hash_groups (key PRIMARY KEY, phash TEXT NOT NULL, grp INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS hash_group_radius (radius INTEGER NOT NULL)",
)

Row = tuple[Any, str, int]  # (the key as stored, phash hex, group label)


def any_unkeyed(db: Any) -> bool:
    """True when some sample has no key (the groups are stored by key, so they cannot be kept)."""
    return db.execute("SELECT 1 FROM samples WHERE key IS NULL LIMIT 1").fetchone() is not None


def stored(db: Any, radius: int) -> dict[str, tuple[str, int]] | None:
    """key -> (phash, group label) as the last scan stored them for this radius, or None."""
    tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if not {"hash_groups", "hash_group_radius"} <= tables:
        return None
    stored_radius = db.execute("SELECT radius FROM hash_group_radius").fetchone()
    if stored_radius is None or stored_radius[0] != radius:
        return None
    rows = db.execute("SELECT key, phash, grp FROM hash_groups")
    return {key if type(key) is str else str(store.read_key(key)): (phash, grp) for key, phash, grp in rows}


def store_all(db: Any, rows: Iterable[Row], radius: int) -> None:
    """Replace every stored group, and the radius they hold for, in one transaction."""
    with store.transaction(db):
        for statement in _CREATE:
            db.conn.execute(statement)
        db.conn.execute("DELETE FROM hash_groups")
        db.conn.execute("DELETE FROM hash_group_radius")
        db.conn.execute("INSERT INTO hash_group_radius VALUES (?)", [radius])
        db.conn.executemany("INSERT INTO hash_groups VALUES (?, ?, ?)", rows)


def store_changes(db: Any, gone: list[tuple[Any]], rows: list[Row]) -> None:
    """Remove the rows of the keys `gone` and write `rows` (new or re-labelled), in one transaction."""
    with store.transaction(db):
        db.conn.executemany("DELETE FROM hash_groups WHERE key = ?", gone)
        db.conn.executemany("INSERT OR REPLACE INTO hash_groups VALUES (?, ?, ?)", rows)
