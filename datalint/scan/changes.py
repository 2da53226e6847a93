"""What changed since the index: the samples an incremental scan, and `datalint watch`, measure.

A sample's identity is its key (a file path, `datalint_key(i)`, an ImageFolder `samples` path); its
position is an attribute that moves when files are inserted before it. The current source is
loaded into a temporary table (key, position, and for files the stat: size, mtime_ns, inode,
ctime_ns, and with `verify_content` a sha256), and SQLite joins it with the index, so a million
samples cost one pass and no Python set of a million keys:

- added: a key no scan has measured (this also resumes an interrupted scan);
- changed: a file whose stat (or content hash) differs from the one recorded when it was measured;
  the ctime is compared too, as no write, and no `utime`, leaves it as it was;
- removed: a key the source no longer has; its row moves to `sample_history`;
- moved: a kept sample at another position (its row is renumbered, not measured);
- re-measured: samples a changed option can judge differently (`option_effects`).

Population findings are re-derived over the whole index afterwards by the caller, as after any scan.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import os
import re
import stat
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from datalint.index import store
from datalint.scan import summaries

_TABLE_NAME = "current_samples"
_TABLE = f"temp.{_TABLE_NAME}"
_REMOVED = "temp.removed_positions"
_BATCH = 5000
_READ_PIECE = 1 << 20

_SCANNED = "s.run_id IN (SELECT id FROM runs WHERE kind != 'guard')"


@dataclass(frozen=True)
class FileState:
    """A file as the stat walk saw it; `content` only with `verify_content`."""

    size: int
    mtime_ns: int
    inode: int
    content: str | None = None
    ctime_ns: int | None = None


@dataclass(frozen=True)
class Changes:
    """What an incremental scan found different from its index, and which positions to measure."""

    added: int = 0
    changed: int = 0
    removed: int = 0
    moved: int = 0
    remeasured: int = 0
    todo: tuple[int, ...] = ()  # positions to measure, sorted
    deferred: int = 0  # changed files still being written (`settle`), left for a later scan
    reasons: tuple[str, ...] = ()  # why samples are re-measured for changed options

    @property
    def any(self) -> bool:
        return bool(self.todo or self.removed or self.moved or self.deferred)

    def ranges(self) -> list[range]:
        """`todo` as runs of consecutive positions, the shape the engine takes."""
        runs: list[range] = []
        start = previous = None
        for position in self.todo:
            if previous is not None and position == previous + 1:
                previous = position
                continue
            if start is not None and previous is not None:
                runs.append(range(start, previous + 1))
            start = previous = position
        if start is not None and previous is not None:
            runs.append(range(start, previous + 1))
        return runs

    def to_dict(self) -> dict[str, Any]:
        return {
            "added": self.added,
            "changed": self.changed,
            "removed": self.removed,
            "moved": self.moved,
            "remeasured": self.remeasured,
            "measured": len(self.todo),
            "deferred": self.deferred,
            "reasons": list(self.reasons),
        }

    def describe(self) -> str:
        """One line: `3 added, 1 changed, 2 removed, 40 moved; 4 measured`."""
        parts = [
            f"{count:,} {name}"
            for name, count in (
                ("added", self.added),
                ("changed", self.changed),
                ("removed", self.removed),
                ("moved", self.moved),
                ("re-measured for changed options", self.remeasured),
            )
            if count
        ]
        waiting = f", {self.deferred:,} still being written" if self.deferred else ""
        return f"{', '.join(parts) or 'nothing changed'}; {len(self.todo):,} measured{waiting}"


# ----------------------------------------------------------------------------------------------
# The stat walk


def file_state(path: Path, verify_content: bool = False) -> FileState | None:
    """The stat of the file a sample reads (symlinks followed), or None when it cannot be stat'ed."""
    try:
        info = os.stat(path)
    except (OSError, ValueError):  # ValueError: a NUL byte in a listed path
        return None
    content = content_hash(path) if verify_content and stat.S_ISREG(info.st_mode) else None
    return FileState(info.st_size, info.st_mtime_ns, info.st_ino, content, info.st_ctime_ns)


def content_hash(path: Path) -> str | None:
    """sha256 of the file's bytes, read in pieces (the scan's `info.sha256` is the same digest)."""
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as handle:
            while piece := handle.read(_READ_PIECE):
                digest.update(piece)
    except OSError:
        return None
    return digest.hexdigest()


def file_root(source: Any) -> Path | None:
    """The folder a source's keys are file paths in, or None when its keys are not files.

    Image sources name files relative to their root; a dataset keyed by ImageFolder-style
    `samples` / `imgs` names them as given (relative ones to the current directory).
    """
    if source.description.kind == "images":
        return Path(source.root)
    dataset = getattr(source, "dataset", None)
    if dataset is None or callable(getattr(dataset, "datalint_key", None)):
        return None
    from datalint.scan.images import dataset_file_paths

    return Path.cwd() if dataset_file_paths(dataset) is not None else None


def current_rows(
    keys: Iterable[str | None],
    root: Path | None,
    verify_content: bool = False,
    stat_only: frozenset[str] | None = None,
) -> Iterator[tuple[Any, ...]]:
    """(key, position, size, mtime_ns, inode, ctime_ns, content, stated) per sample, stat'ed when its key is
    a file.

    `stat_only`: the keys whose files are stat'ed (a watch update names the paths events touched);
    the others are left unstated (`stated` 0) and take the state recorded when they were measured
    (`take_recorded_states`). Plain strings and `os.stat`: this runs once per file of the dataset
    on every incremental scan. The key is as the index stores it (`store.stored_key`: a name that
    is not UTF-8 is its bytes).
    """
    if root is None:
        for position, key in enumerate(keys):
            yield store.stored_key(key), position, None, None, None, None, None, 1
        return
    base = os.fspath(root)
    if verify_content or stat_only is not None:
        for position, key in enumerate(keys):
            if key is None:
                yield key, position, None, None, None, None, None, 1
            elif stat_only is not None and key not in stat_only:
                yield store.stored_key(key), position, None, None, None, None, None, 0
            else:
                yield store.stored_key(key), position, *_stat_row(base, key, verify_content), 1
        return
    # The plain walk, the one every incremental scan of a folder makes: one string and one stat
    # per file, nothing else (a third of the time os.path.join and a helper per file cost).
    prefix, stat_file = os.path.join(base, ""), os.stat
    for position, key in enumerate(keys):
        if key is None:
            yield key, position, None, None, None, None, None, 1
            continue
        stored = key if key.isascii() else store.stored_key(key)
        try:
            info = stat_file(key if key.startswith(os.sep) else prefix + key)  # as os.path.join does
        except (OSError, ValueError):  # gone since the listing, a broken link, a NUL in a listed path
            yield stored, position, None, None, None, None, None, 1
            continue
        mtime = info.st_mtime_ns
        if mtime >= _INT64:  # past 2262: SQLite's integers end there
            mtime = as_int64(mtime)
        yield stored, position, info.st_size, mtime, info.st_ino, info.st_ctime_ns, None, 1


def _stat_row(base: str, key: str, verify_content: bool) -> tuple[Any, ...]:
    """(size, mtime_ns, inode, ctime_ns, content) of the file `key` names, all None when it cannot be
    stat'ed."""
    path = os.path.join(base, key)
    try:
        info = os.stat(path)
    except (OSError, ValueError):  # gone since the listing, a broken link, a NUL in a listed path
        return None, None, None, None, None
    content = content_hash(Path(path)) if verify_content and stat.S_ISREG(info.st_mode) else None
    return info.st_size, as_int64(info.st_mtime_ns), info.st_ino, info.st_ctime_ns, content


_INT64 = 1 << 63


def as_int64(nanoseconds: int) -> int:
    """A time in ns as a 64-bit integer SQLite can hold, wrapped: a file dated past 2262 (ext4 and
    XFS keep dates to 2446 and beyond) crashed the scan with an OverflowError. Only equality is
    compared, and two dates 584 years apart are the one case wrapping makes equal."""
    return nanoseconds if -_INT64 <= nanoseconds < _INT64 else (nanoseconds + _INT64) % (1 << 64) - _INT64


def take_recorded_states(db: Any, root: Path, verify_content: bool = False) -> int:
    """Give the unstated current samples the state recorded when they were measured, so only the
    stat'ed ones can differ; a file with no recorded state is stat'ed now. Returns how many were."""
    with store.transaction(db):
        db.conn.execute(
            f"UPDATE {_TABLE} SET size = f.size, mtime_ns = f.mtime_ns, inode = f.inode,"
            " ctime_ns = f.ctime_ns, content = f.content,"
            f" stated = 1 FROM sample_files f WHERE f.key = {_TABLE_NAME}.key AND {_TABLE_NAME}.stated = 0"
        )
    missing = [row[0] for row in db.execute(f"SELECT key FROM {_TABLE} WHERE stated = 0")]
    base = os.fspath(root)
    states = ((*_stat_row(base, str(store.read_key(key)), verify_content), key) for key in missing)
    for batch in _batches(states):
        with store.transaction(db):
            db.conn.executemany(
                f"UPDATE {_TABLE} SET size = ?, mtime_ns = ?, inode = ?, ctime_ns = ?, content = ?,"
                " stated = 1 WHERE key = ?",
                batch,
            )
    return len(missing)


# ----------------------------------------------------------------------------------------------
# Loading the current source and comparing it with the index


def load_current(db: Any, rows: Iterable[tuple[Any, ...]]) -> str | None:
    """Fill the temporary table of current samples; returns why the keys cannot be followed, or None."""
    with store.transaction(db):
        db.conn.execute(
            f"CREATE TABLE IF NOT EXISTS {_TABLE} (key TEXT PRIMARY KEY, pos INTEGER NOT NULL, size INTEGER,"
            " mtime_ns INTEGER, inode INTEGER, ctime_ns INTEGER, content TEXT,"
            " stated INTEGER NOT NULL DEFAULT 1)"
        )
        db.conn.execute(f"DELETE FROM {_TABLE}")
    total = 0
    for batch in _batches(rows):  # one transaction per batch: the stat walk never holds the lock long
        if any(row[0] is None for row in batch):
            return "some samples have no key"
        with store.transaction(db):
            db.conn.executemany(_INSERT_CURRENT, batch)
        total += len(batch)
    kept = db.execute(f"SELECT COUNT(*) FROM {_TABLE}").fetchone()[0]
    if kept != total:
        return f"{total - kept:,} key(s) name more than one sample"
    duplicated = db.execute(
        f"SELECT s.key FROM samples s WHERE {_SCANNED} GROUP BY s.key HAVING COUNT(*) > 1 LIMIT 1"
    ).fetchone()
    if duplicated is not None:
        return f"the index has several samples with key {duplicated[0]!r}"
    unkeyed = db.execute(f"SELECT 1 FROM samples s WHERE s.key IS NULL AND {_SCANNED} LIMIT 1").fetchone()
    if unkeyed is not None:
        return "the index holds samples measured without keys"
    return None


# A current sample's rowid is its position + 1, so the few an incremental scan measures are found
# by rowid, not by a pass over every current sample.
_INSERT_CURRENT = (
    f"INSERT OR IGNORE INTO {_TABLE} (rowid, key, pos, size, mtime_ns, inode, ctime_ns, content, stated) "
    "VALUES (?2 + 1, ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)"
)


def _batches(rows: Iterable[tuple[Any, ...]]) -> Iterator[list[tuple[Any, ...]]]:
    batch: list[tuple[Any, ...]] = []
    for row in rows:
        batch.append(row)
        if len(batch) >= _BATCH:
            yield batch
            batch = []
    if batch:
        yield batch


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
_MOVED = f"SELECT COUNT(*) FROM samples s JOIN {_TABLE} c ON c.key = s.key WHERE s.idx != c.pos"


def compare(db: Any, *, files: bool, option_clauses: Iterable[tuple[str, list[Any]]] = ()) -> Changes:
    """The changes between the loaded current samples and the index (nothing is written)."""
    added = [row[0] for row in db.execute(_ADDED)]
    changed = [row[0] for row in db.execute(_CHANGED)] if files else []
    removed = db.execute(f"SELECT COUNT(*) FROM samples WHERE {_REMOVED_WHERE}").fetchone()[0]
    moved = db.execute(_MOVED).fetchone()[0]
    already = set(added) | set(changed)
    options: set[int] = set()
    for where, params in option_clauses:
        query = f"SELECT c.pos FROM samples s JOIN {_TABLE} c ON c.key = s.key WHERE {_SCANNED} AND ({where})"
        options.update(row[0] for row in db.execute(query, params))
    options -= already
    return Changes(
        added=len(added),
        changed=len(changed),
        removed=int(removed),
        moved=int(moved),
        remeasured=len(options),
        todo=tuple(sorted(already | options)),
    )


def without_unsettled(db: Any, found: Changes, settle: float) -> Changes:
    """`found` without the files modified less than `settle` seconds ago: they are still being
    written, and wait for a later scan (an added one has no row meanwhile, a changed one keeps its
    old row and state, so the next scan measures it)."""
    cutoff = time.time_ns() - int(settle * 1e9)
    # By the ctime where known: the kernel's clock sets it, so a file whose mtime lies in the future
    # (a skewed clock, an archive's dates) is not held back for ever.
    written = "coalesce(ctime_ns, mtime_ns)"
    recent = {row[0] for row in db.execute(f"SELECT pos FROM {_TABLE} WHERE {written} > ?", [cutoff])}
    if not recent:
        return found
    todo = tuple(position for position in found.todo if position not in recent)
    return dataclasses.replace(found, todo=todo, deferred=len(found.todo) - len(todo))


# ----------------------------------------------------------------------------------------------
# Applying them to the index


def apply(db: Any, run_id: int, moved: int | None = None) -> None:
    """In one transaction: removed samples go to `sample_history`, kept ones to their new positions.

    Findings move with their samples, so the index stays consistent if the scan stops before its
    findings are derived again. `moved`: the count `compare` found, when nothing wrote since (the
    removed samples take no part in it, so it holds after they are gone).
    """
    with store.transaction(db):
        # The removed positions found by one pass over the index; the statements below then touch
        # only their rows, by primary key, instead of each testing every row against the source.
        db.conn.execute(f"CREATE TABLE IF NOT EXISTS {_REMOVED} (idx INTEGER PRIMARY KEY)")
        db.conn.execute(f"DELETE FROM {_REMOVED}")
        db.conn.execute(f"INSERT INTO {_REMOVED} SELECT idx FROM samples WHERE {_REMOVED_WHERE}")
        db.conn.execute(
            "INSERT INTO sample_history (key, idx, status, kinds, measured_run, left_run, left_at, reason) "
            "SELECT s.key, s.idx, s.status, (SELECT group_concat(f.kind, ',') FROM findings f "
            f"WHERE f.idx = s.idx), s.run_id, ?, ?, 'removed' "
            f"FROM {_REMOVED} r JOIN samples s ON s.idx = r.idx",
            [run_id, store.utc_now("milliseconds")],
        )
        db.conn.execute(f"DELETE FROM findings WHERE idx IN (SELECT idx FROM {_REMOVED})")
        # The population summary the index keeps (a large scan's) loses the removed rows with them.
        summaries.take_away(db.conn, f"WHERE idx IN (SELECT idx FROM {_REMOVED})")
        db.conn.execute(f"DELETE FROM samples WHERE idx IN (SELECT idx FROM {_REMOVED})")
        db.conn.execute(f"DELETE FROM {_REMOVED}")
        db.conn.execute(f"DELETE FROM sample_files WHERE key NOT IN (SELECT key FROM {_TABLE})")
        if moved is None:
            moved = db.execute(_MOVED).fetchone()[0]
        total = db.execute("SELECT COUNT(*) FROM samples").fetchone()[0]
        if moved > _REWRITE_ABOVE * total:
            _renumber_by_rewrite(db)
        elif moved:
            _renumber(db, db.execute(_MOVES).fetchall())  # (old, new), in the order of the old positions


# A share of moved rows above which the samples table is written anew in position order: a row
# moved in place costs a b-tree delete and insert (~15-20 µs), an appended one ~2 µs.
_REWRITE_ABOVE = 0.1


def _renumber_by_rewrite(db: Any) -> None:
    """Give every kept row its new position by copying the table in the new order (one pass, no
    Python object per row); findings move first, by a join, through negative positions."""
    moved = f"FROM samples s JOIN {_TABLE} c ON c.key = s.key WHERE findings.idx = s.idx AND s.idx != c.pos"
    db.conn.execute(f"UPDATE findings SET idx = -1 - c.pos {moved}")
    db.conn.execute("UPDATE findings SET idx = -1 - idx WHERE idx < 0")
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
    # Every kept row has a current sample (the removed ones are gone): read them from the table of
    # current samples, which holds them in position order (CROSS JOIN keeps that loop outermost),
    # so the copy appends rows with no sort of the whole table.
    names = ", ".join(columns)
    db.conn.execute(
        f"INSERT INTO samples_renumbered ({names}) SELECT c.pos, {others} "
        f"FROM {_TABLE} c CROSS JOIN samples s ON s.key = c.key"
    )
    copied = db.execute("SELECT COUNT(*) FROM samples_renumbered").fetchone()[0]
    if copied != db.execute("SELECT COUNT(*) FROM samples").fetchone()[0]:  # a row no current sample names
        db.conn.execute("DELETE FROM samples_renumbered")
        db.conn.execute(
            f"INSERT INTO samples_renumbered ({names}) SELECT coalesce(c.pos, s.idx), {others} "
            f"FROM samples s LEFT JOIN {_TABLE} c ON c.key = s.key ORDER BY 1"
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


_REBUILD_INDEXES_ABOVE = 5000
_MOVES = (
    f"SELECT s.idx, c.pos FROM samples s JOIN {_TABLE} c ON c.key = s.key WHERE s.idx != c.pos ORDER BY s.idx"
)


def _renumber(db: Any, moves: list[tuple[int, int]]) -> None:
    """Give rows (and their findings) their new positions; `idx` is the primary key, so no two
    rows may hold one position at any moment.

    When the kept samples keep their order (a sorted folder, a dataset that inserts and deletes),
    rows moving up are moved from the last down and rows moving down from the first up: every
    target is free when it is taken, and each row moves once. Otherwise (a reordered dataset)
    every moved row goes through a negative position first.
    """
    ordered = all(before[1] < after[1] for before, after in itertools.pairwise(moves))
    if ordered:
        steps = [(new, old) for old, new in reversed(moves) if new > old]
        steps += [(new, old) for old, new in moves if new < old]
    else:
        steps = [(-1 - new, old) for old, new in moves] + [(new, -1 - new) for _, new in moves]
    db.conn.executemany("UPDATE findings SET idx = ? WHERE idx = ?", steps)
    # Each move rewrites the row and its entries in both secondary indexes; rebuilding those once
    # afterwards costs a fraction of maintaining them through a renumbering of most rows.
    rebuild = len(steps) > _REBUILD_INDEXES_ABOVE
    if rebuild:
        db.conn.execute("DROP INDEX IF EXISTS idx_samples_status")
        db.conn.execute("DROP INDEX IF EXISTS idx_samples_key")
    db.conn.executemany("UPDATE samples SET idx = ? WHERE idx = ?", steps)
    if rebuild:
        db.conn.execute("CREATE INDEX IF NOT EXISTS idx_samples_status ON samples (status)")
        db.conn.execute("CREATE INDEX IF NOT EXISTS idx_samples_key ON samples (key)")


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


def drop_current(db: Any) -> None:
    with store.transaction(db):
        db.conn.execute(f"DROP TABLE IF EXISTS {_TABLE}")


# ----------------------------------------------------------------------------------------------
# Options that changed since a sample was measured


Effect = Callable[[Any, Any], tuple[str, list[Any]] | None]


def _image_fact(name: str) -> str:
    """SQL for one fact of a row's image: at the top of its info (an image file, a Parquet value, a
    webdataset sample's first image member) or under `image`, where webdataset samples measured
    before their image facts became their info keep them."""
    return f"coalesce(json_extract(s.info, '$.{name}'), json_extract(s.info, '$.image.{name}'))"


def _pixels_effect(old: Any, new: Any) -> tuple[str, list[Any]]:
    # Only images whose pixel count lies above the lower of the two limits can change verdict.
    if old is None or new is None:
        return _EVERY_SAMPLE
    low = min(int(old), int(new))
    return (
        f"({_image_fact('width')} * {_image_fact('height')} > ? OR s.reported LIKE '%decompression_bomb%')",
        [low],
    )


def _timeout_effect(old: Any, new: Any) -> tuple[str, list[Any]]:
    # A timeout may pass under a longer limit; a sample slower than a shorter one now times out.
    if old is None or new is None:
        return _EVERY_SAMPLE
    return "(s.status = 'timeout' OR s.duration > ?)", [min(float(old), float(new))]


_EVERY_SAMPLE: tuple[str, list[Any]] = ("1", [])

# Option -> which samples a change of it can judge differently. Options absent here that change
# verdicts re-measure every sample; policy options (kinds, thresholds) are re-derived from the
# index after every scan and need no entry; listing options (`extensions`) show up as added and
# removed files.
OPTION_EFFECTS: dict[str, Effect] = {
    "max_pixels": _pixels_effect,
    "all_frames": lambda old, new: (f"COALESCE({_image_fact('frames')}, 1) > 1", []),
    "timeout": _timeout_effect,
    "labels": lambda old, new: _EVERY_SAMPLE,
    "extensions": lambda old, new: None,
}


def option_clauses(
    db: Any, asked: dict[str, Any], measured_with: Callable[[dict[str, Any]], dict[str, Any]]
) -> tuple[list[tuple[str, list[Any]]], list[str]]:
    """Per run that measured rows of the index: the clauses selecting the rows its options affect.

    Comparing each run's options (not only the last run's) means a scan stopped halfway after an
    option changed still re-measures the rest next time.
    """
    clauses: list[tuple[str, list[Any]]] = []
    reasons: list[str] = []
    runs = db.execute(
        "SELECT id, options FROM runs WHERE id IN (SELECT DISTINCT run_id FROM samples) AND kind != 'guard'"
    ).fetchall()
    for run_id, text in runs:
        before = measured_with(json.loads(text or "{}"))
        for name in sorted(set(before) | set(asked)):
            old, new = before.get(name), asked.get(name)
            if old == new:
                continue
            effect = OPTION_EFFECTS.get(name, lambda old, new: _EVERY_SAMPLE)(old, new)
            if effect is None:
                continue
            where, params = effect
            clauses.append((f"s.run_id = ? AND {where}", [run_id, *params]))
            reasons.append(f"{name} {_shown(old)} -> {_shown(new)}")
    return clauses, sorted(set(reasons))


def _shown(value: Any) -> str:
    if isinstance(value, list):
        return ",".join(map(str, value)) or "(none)"
    return "(none)" if value is None else str(value)
