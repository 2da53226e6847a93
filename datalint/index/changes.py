"""What an incremental scan, and `datalint watch`, ask of the index to find what changed since it.

The current source is loaded into a temporary table (`current_samples`: key, position, and for
files the stat: size, mtime_ns, inode, ctime_ns, and optionally a content hash) and SQLite joins
it with the index, so a million samples cost one pass and no Python set of a million keys.
`datalint.scan.changes` decides what the answers mean (added, changed, removed, moved,
re-measured) and which options' changes select which samples; the statements live here.
"""

from __future__ import annotations

import itertools
import re
import sqlite3
from collections.abc import Callable, Iterable
from typing import Any

from datalint.index import positions, store

_TABLE_NAME = "current_samples"
_TABLE = f"temp.{_TABLE_NAME}"
_REMOVED = "temp.removed_rows"

_SCANNED = "s.run_id IN (SELECT id FROM runs WHERE kind != 'guard')"

Forget = Callable[[sqlite3.Connection, str], None]

_LAST_LISTING = "SELECT length FROM runs WHERE kind != 'guard' ORDER BY id DESC LIMIT 1"


def last_listing(connection: Any) -> tuple[int | None, list[str | None]]:
    """The length the last scan run recorded (None: none recorded) and every sample's key, read as
    a listing gives it (a name that is not UTF-8 is stored as its bytes)."""
    length = connection.execute(_LAST_LISTING).fetchone()
    keys = [store.read_key(row[0]) for row in connection.execute("SELECT key FROM samples")]
    return (None if length is None else length[0]), keys


# ----------------------------------------------------------------------------------------------
# The table of current samples


def take_recorded_states(db: Any) -> list[Any]:
    """Give the unstated current samples the state recorded when they were measured; returns the
    keys of those with no recorded state (to be stat'ed now, `set_states`)."""
    with store.transaction(db):
        db.conn.execute(
            f"UPDATE {_TABLE} SET size = f.size, mtime_ns = f.mtime_ns, inode = f.inode,"
            " ctime_ns = f.ctime_ns, content = f.content,"
            f" stated = 1 FROM sample_files f WHERE f.key = {_TABLE_NAME}.key AND {_TABLE_NAME}.stated = 0"
        )
    return [row[0] for row in db.execute(f"SELECT key FROM {_TABLE} WHERE stated = 0")]


def set_states(db: Any, batch: list[tuple[Any, ...]]) -> None:
    """(size, mtime_ns, inode, ctime_ns, content, key) per current sample, in one transaction."""
    with store.transaction(db):
        db.conn.executemany(
            f"UPDATE {_TABLE} SET size = ?, mtime_ns = ?, inode = ?, ctime_ns = ?, content = ?,"
            " stated = 1 WHERE key = ?",
            batch,
        )


def create_current(db: Any) -> None:
    """An empty table of current samples (created when absent)."""
    with store.transaction(db):
        db.conn.execute(
            f"CREATE TABLE IF NOT EXISTS {_TABLE} (key TEXT PRIMARY KEY, pos INTEGER NOT NULL, size INTEGER,"
            " mtime_ns INTEGER, inode INTEGER, ctime_ns INTEGER, content TEXT,"
            " stated INTEGER NOT NULL DEFAULT 1)"
        )
        db.conn.execute(f"DELETE FROM {_TABLE}")


# A current sample's rowid is its position + 1, so the few an incremental scan measures are found
# by rowid, not by a pass over every current sample.
_INSERT_CURRENT = (
    f"INSERT OR IGNORE INTO {_TABLE} (rowid, key, pos, size, mtime_ns, inode, ctime_ns, content, stated) "
    "VALUES (?2 + 1, ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)"
)


def add_current(db: Any, batch: list[tuple[Any, ...]]) -> None:
    """(key, position, size, mtime_ns, inode, ctime_ns, content, stated) rows, in one transaction; a
    key already there keeps its first row."""
    with store.transaction(db):
        db.conn.executemany(_INSERT_CURRENT, batch)


def count_current(db: Any) -> int:
    return int(db.execute(f"SELECT COUNT(*) FROM {_TABLE}").fetchone()[0])


def duplicated_key(db: Any) -> Any:
    """A key several samples a scan measured share (as stored), or None."""
    duplicated = db.execute(
        f"SELECT s.key FROM samples s WHERE {_SCANNED} GROUP BY s.key HAVING COUNT(*) > 1 LIMIT 1"
    ).fetchone()
    return None if duplicated is None else duplicated[0]


def any_unkeyed(db: Any) -> bool:
    """True when a scan measured some sample without a key."""
    unkeyed = db.execute(f"SELECT 1 FROM samples s WHERE s.key IS NULL AND {_SCANNED} LIMIT 1").fetchone()
    return unkeyed is not None


def drop_current(db: Any) -> None:
    with store.transaction(db):
        db.conn.execute(f"DROP TABLE IF EXISTS {_TABLE}")


# ----------------------------------------------------------------------------------------------
# Comparing it with the index (nothing is written)


_ADDED = f"""
SELECT c.pos FROM {_TABLE} c
WHERE NOT EXISTS (SELECT 1 FROM samples s WHERE s.key = c.key AND {_SCANNED})
"""
# A file whose recorded state is missing (an index from before states were kept) counts as
# changed: measuring it again is the only way to know. A ctime recorded before it was kept (NULL)
# is unknown and not compared; one recorded is, as a write in place can keep size, inode and mtime
# (and `utime` sets the mtime back) but always sets the ctime. A recorded content hash (or, for an
# undamaged image, the scan's own sha256) is compared only when this walk computed one.
_CHANGED = f"""
SELECT c.pos FROM {_TABLE} c
JOIN samples s ON s.key = c.key AND {_SCANNED}
LEFT JOIN sample_files f ON f.key = c.key
WHERE f.key IS NULL OR f.size IS NOT c.size OR f.mtime_ns IS NOT c.mtime_ns OR f.inode IS NOT c.inode
   OR (f.ctime_ns IS NOT NULL AND f.ctime_ns IS NOT c.ctime_ns)
   OR (c.content IS NOT NULL AND c.content IS NOT coalesce(f.content, json_extract(s.info, '$.sha256')))
"""
_REMOVED_WHERE = f"(key IS NULL OR key NOT IN (SELECT key FROM {_TABLE}))"
_MOVED = f"SELECT COUNT(*) FROM samples s JOIN {_TABLE} c ON c.key = s.key WHERE {{}} IS NOT c.pos"


def added(db: Any) -> list[int]:
    """The positions of current samples no scan has measured (this also resumes an interrupted scan)."""
    return [row[0] for row in db.execute(_ADDED)]


def changed(db: Any) -> list[int]:
    """The positions of files whose state differs from the one recorded when they were measured."""
    return [row[0] for row in db.execute(_CHANGED)]


def removed_count(db: Any) -> int:
    """How many samples of the index the source no longer has."""
    return int(db.execute(f"SELECT COUNT(*) FROM samples WHERE {_REMOVED_WHERE}").fetchone()[0])


def moved_count(db: Any) -> int:
    """How many kept samples are now at another position than the index's order gives them."""
    # Where no order is stored, each row's idx is its position: SQL alone compares them, with no
    # call into Python per row.
    was = "s.idx" if positions.read(db).identity else "position_of(s.idx)"
    return int(db.execute(_MOVED.format(was)).fetchone()[0])


def selected(db: Any, where: str, params: list[Any]) -> Iterable[int]:
    """The positions of the samples a scan measured that `where` (on `s`, the samples) selects."""
    query = f"SELECT c.pos FROM samples s JOIN {_TABLE} c ON c.key = s.key WHERE {_SCANNED} AND ({where})"
    return (row[0] for row in db.execute(query, params))


def written_after(db: Any, written: str, cutoff: int) -> set[int]:
    """The positions of current samples whose `written` time (SQL on the table) is past `cutoff`."""
    return {row[0] for row in db.execute(f"SELECT pos FROM {_TABLE} WHERE {written} > ?", [cutoff])}


_MEASURED_RUNS = (
    "SELECT id, options FROM runs WHERE id IN (SELECT DISTINCT run_id FROM samples) AND kind != 'guard'"
)


def measured_runs(db: Any) -> list[Any]:
    """(id, options JSON) of each scan run some row of the index was measured by."""
    return list(db.execute(_MEASURED_RUNS).fetchall())


# ----------------------------------------------------------------------------------------------
# Applying them to the index


def apply(db: Any, run_id: int, forget: Forget) -> positions.Positions:
    """In one transaction: removed samples go to `sample_history`, and the current order is stored
    (`datalint.index.positions`); returns it.

    Kept rows and their findings are not touched, however far they moved: a sample's row is known
    by its key, and its position is derived from the order. A current sample with no row yet (added)
    is given its row id here, so the order covers it from now on and the rows measured for it take
    that id (`Positions.id_at`): the index stays consistent if the scan stops at any point.
    `forget` takes the removed rows out of what the scan keeps about them (its population summary),
    given the connection and the WHERE clause naming them, before they are deleted.
    """
    with store.transaction(db):
        # The removed rows found by one pass over the index; the statements below then touch only
        # their rows, by primary key, instead of each testing every row against the source.
        db.conn.execute(f"CREATE TABLE IF NOT EXISTS {_REMOVED} (idx INTEGER PRIMARY KEY)")
        db.conn.execute(f"DELETE FROM {_REMOVED}")
        db.conn.execute(f"INSERT INTO {_REMOVED} SELECT idx FROM samples WHERE {_REMOVED_WHERE}")
        db.conn.execute(
            "INSERT INTO sample_history (key, idx, status, kinds, measured_run, left_run, left_at, reason) "
            "SELECT s.key, position_of(s.idx), s.status, (SELECT group_concat(f.kind, ',') FROM findings f "
            f"WHERE f.idx = s.idx), s.run_id, ?, ?, 'removed' "
            f"FROM {_REMOVED} r JOIN samples s ON s.idx = r.idx",
            [run_id, store.utc_now("milliseconds")],
        )
        db.conn.execute(f"DELETE FROM findings WHERE idx IN (SELECT idx FROM {_REMOVED})")
        # The population summary the index keeps (a large scan's) loses the removed rows with them.
        forget(db.conn, f"WHERE idx IN (SELECT idx FROM {_REMOVED})")
        db.conn.execute(f"DELETE FROM samples WHERE idx IN (SELECT idx FROM {_REMOVED})")
        db.conn.execute(f"DELETE FROM {_REMOVED}")
        db.conn.execute(f"DELETE FROM sample_files WHERE key NOT IN (SELECT key FROM {_TABLE})")
        order = current_order(db)
        positions.write(db.conn, order)
    return order


# Each current sample's row (none: added), by position; a key the guard also wrote a row for comes
# twice, its scanned row first.
_ROWS_BY_POSITION = f"""
SELECT c.rowid, s.idx FROM {_TABLE} c LEFT JOIN samples s ON s.key = c.key
ORDER BY c.rowid, {_SCANNED} DESC
"""


def current_order(db: Any) -> positions.Positions:
    """The order of the current samples: each one's row, and for those with none yet a new row id:
    its position where no row holds that id (a scan resumed after a kill, samples appended at the
    end: the order stays the identity), else the next id past every one in use."""
    rows: list[int | None] = []
    previous = None
    for position, idx in db.execute(_ROWS_BY_POSITION):
        if position != previous:
            rows.append(idx)
            previous = position
    if None not in rows:  # every sample has its row
        return positions.from_ids(idx for idx in rows if idx is not None)
    taken = {idx for idx in rows if idx is not None}
    for position, idx in enumerate(rows):
        if idx is None and position not in taken:
            rows[position] = position
            taken.add(position)
    highest = db.execute("SELECT max(idx) FROM samples").fetchone()[0]
    fresh = itertools.count(max(taken | {-1 if highest is None else highest}) + 1)
    return positions.from_ids(next(fresh) if idx is None else idx for idx in rows)


def compact(db: Any) -> None:
    """Give every row its position as its idx (with its findings and failures), and store the
    identity order: for the paths that address rows by position (a resumed scan by position,
    rows merged from shard files). A row the order does not hold goes after the last position.

    One pass: the table is copied in the new order, as a full scan would have written it."""
    order = positions.read(db.conn)
    if order.identity:
        return
    with store.transaction(db):
        db.conn.execute("DROP TABLE IF EXISTS temp.compacted")
        db.conn.execute("CREATE TEMP TABLE compacted (old INTEGER PRIMARY KEY, new INTEGER NOT NULL)")
        assert order.ids is not None
        held = [(idx, position) for position, idx in enumerate(order.ids) if idx >= 0]
        db.conn.executemany("INSERT OR IGNORE INTO temp.compacted (old, new) VALUES (?, ?)", held)
        unheld = "SELECT idx FROM samples WHERE idx NOT IN (SELECT old FROM temp.compacted) ORDER BY idx"
        rest = [row[0] for row in db.execute(unheld)]
        db.conn.executemany(
            "INSERT INTO temp.compacted (old, new) VALUES (?, ?)",
            ((idx, len(order.ids) + number) for number, idx in enumerate(rest)),
        )
        _rewrite_ids(db, "temp.compacted")
        positions.write(db.conn, positions.Positions())


def _rewrite_ids(db: Any, mapping: str) -> None:
    """Give rows, findings and failures their new idx from `mapping` (old, new): findings and
    failures by one UPDATE each; samples by copying the table in the new order (one pass, no
    Python object per row, each row appended rather than moved in place)."""
    for table in ("findings", "failures"):
        db.conn.execute(f"UPDATE {table} SET idx = -1 - m.new FROM {mapping} m WHERE {table}.idx = m.old")
        db.conn.execute(f"UPDATE {table} SET idx = -1 - idx WHERE idx < 0")
    columns = [row[1] for row in db.execute("PRAGMA main.table_info(samples)")]
    table_sql = db.execute(
        "SELECT sql FROM main.sqlite_master WHERE type = 'table' AND name = 'samples'"
    ).fetchone()[0]
    indexes = [
        row[0]
        for row in db.execute(
            "SELECT sql FROM main.sqlite_master WHERE type = 'index' AND tbl_name = 'samples'"
            " AND sql IS NOT NULL"
        )
    ]
    db.conn.execute("DROP TABLE IF EXISTS main.samples_renumbered")
    db.conn.execute(re.sub(r"\bsamples\b", "samples_renumbered", table_sql, count=1))
    others = ", ".join(f"s.{name}" for name in columns[1:])
    names = ", ".join(columns)
    db.conn.execute(
        f"INSERT INTO samples_renumbered ({names}) SELECT m.new, {others} "
        f"FROM samples s JOIN {mapping} m ON m.old = s.idx ORDER BY m.new"
    )
    # The old table's rows are all in the new one: zeroing its pages as they are freed (builds
    # with secure_delete on, as Debian's, do by default) writes the whole table once more for
    # nothing kept secret.
    secure = db.execute("PRAGMA secure_delete").fetchone()[0]
    db.conn.execute("PRAGMA secure_delete = 0")
    try:
        db.conn.execute("DROP TABLE samples")
    finally:
        db.conn.execute(f"PRAGMA secure_delete = {int(secure)}")
    db.conn.execute("PRAGMA legacy_alter_table = ON")  # a user's view on `samples` is left as it is
    try:
        db.conn.execute("ALTER TABLE samples_renumbered RENAME TO samples")
    finally:
        db.conn.execute("PRAGMA legacy_alter_table = OFF")
    for statement in indexes:
        db.conn.execute(statement)


def record_added_files(db: Any, positions: Iterable[int] | None = None) -> None:
    """Record the state of files no scan has measured yet, before measuring them; `positions`:
    the only current samples that can be such (an incremental scan's `Changes.todo`).

    Safe because such a sample counts as added until a row of it is written, whatever its state;
    once measured (even if the scanner is then killed) its state is on record. A changed file's
    state is recorded only after it is measured again (`record_files`).
    """
    select = (
        "INSERT OR REPLACE INTO sample_files (key, size, mtime_ns, inode, ctime_ns, content) "
        f"SELECT c.key, c.size, c.mtime_ns, c.inode, c.ctime_ns, c.content FROM {_TABLE} c "
        f"WHERE NOT EXISTS (SELECT 1 FROM samples s WHERE s.key = c.key AND {_SCANNED})"
    )
    with store.transaction(db):
        if positions is None:
            db.conn.execute(select)
        else:
            db.conn.executemany(f"{select} AND c.rowid = ? + 1", ((position,) for position in positions))


def record_files(db: Any, run_id: int) -> None:
    """Remember the state of the files this run measured (as stat'ed before they were measured:
    a file that changed meanwhile differs next time and is measured again), and the content
    hash of unchanged ones when this walk computed it."""
    with store.transaction(db):
        db.conn.execute(
            "INSERT OR REPLACE INTO sample_files (key, size, mtime_ns, inode, ctime_ns, content) "
            f"SELECT c.key, c.size, c.mtime_ns, c.inode, c.ctime_ns, c.content FROM {_TABLE} c "
            "JOIN samples s ON s.key = c.key WHERE s.run_id = ?",
            [run_id],
        )
        # A state recorded before ctimes were kept (index schema 3) takes this walk's, same file.
        same_stat = (
            f"FROM {_TABLE} c WHERE c.key = sample_files.key AND c.ctime_ns IS NOT NULL "
            "AND c.size IS sample_files.size AND c.mtime_ns IS sample_files.mtime_ns "
            "AND c.inode IS sample_files.inode"
        )
        db.conn.execute(
            f"UPDATE sample_files SET ctime_ns = (SELECT c.ctime_ns {same_stat}) "
            f"WHERE ctime_ns IS NULL AND EXISTS (SELECT 1 {same_stat})"
        )
        if db.execute(f"SELECT 1 FROM {_TABLE} WHERE content IS NOT NULL LIMIT 1").fetchone() is None:
            return  # no content hashed by this walk (no --verify-content): nothing to add
        # The same file (by key, one primary-key lookup each) with a hash this walk computed.
        same_file = (
            f"FROM {_TABLE} c WHERE c.key = sample_files.key AND c.content IS NOT NULL "
            "AND c.size IS sample_files.size AND c.mtime_ns IS sample_files.mtime_ns "
            "AND c.inode IS sample_files.inode"
        )
        db.conn.execute(
            f"UPDATE sample_files SET content = (SELECT c.content {same_file}) "
            f"WHERE content IS NULL AND EXISTS (SELECT 1 {same_file})"
        )
