"""The scan index: one SQLite file, written through sqlite-utils (see docs/index.md for the contract).

During a scan the scanning parent is the only writer: WAL mode, so `sqlite-utils` and `datasette`
can read the index live; rows buffered and written in one transaction per batch, so a scan killed
at any moment leaves a valid index whose rows are all complete. The primary key is the sample
index, so a resumed or repeated scan replaces rows and never duplicates them.

`open_index()` is also how other writers (the training-path guard, from several processes at
once) open the index: schema creation is idempotent and serialised by SQLite's own write lock.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import sqlite3
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from datalint.errors import DatalintError
from datalint.files import LockHeld, file_kind, is_regular, take_lock
from datalint.index import positions
from datalint.text import exception_text, is_utf8, name_bytes

SCHEMA_VERSION = 5
_BASE_VERSION = 1  # what `_SCHEMA` creates; `_MIGRATIONS` bring it up to SCHEMA_VERSION

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY,
    kind TEXT,
    spec TEXT,
    length INTEGER,
    fingerprint TEXT,
    options TEXT,
    environment TEXT,
    started TEXT,
    finished TEXT,
    counts TEXT
);
CREATE TABLE IF NOT EXISTS samples (
    idx INTEGER PRIMARY KEY,
    key TEXT,
    status TEXT NOT NULL,
    run_id INTEGER,
    duration REAL,
    nbytes INTEGER,
    signature TEXT,
    non_finite INTEGER,
    requires_grad INTEGER,
    non_cpu INTEGER,
    fd_delta INTEGER,
    labels TEXT,
    info TEXT,
    reported TEXT,
    error_type TEXT,
    error_message TEXT,
    traceback TEXT,
    worker INTEGER,
    measured_at TEXT
);
CREATE INDEX IF NOT EXISTS idx_samples_status ON samples (status);
CREATE INDEX IF NOT EXISTS idx_samples_key ON samples (key);
CREATE TABLE IF NOT EXISTS findings (
    idx INTEGER,
    kind TEXT,
    detail TEXT,
    quarantine INTEGER,
    PRIMARY KEY (idx, kind)
);
CREATE INDEX IF NOT EXISTS idx_findings_kind ON findings (kind);
"""

# version -> the statements that bring an index of version - 1 to it. Each is idempotent, so two
# processes migrating one index at once (one after the other, under the write lock) both succeed.
_MIGRATIONS: dict[int, str] = {
    # Incremental scans (docs/scan.md, "Incremental scans"): the file behind each key as it was
    # when measured, and the samples that left the dataset.
    2: """
CREATE TABLE IF NOT EXISTS sample_files (
    key TEXT PRIMARY KEY,
    size INTEGER,
    mtime_ns INTEGER,
    inode INTEGER,
    content TEXT
);
CREATE TABLE IF NOT EXISTS sample_history (
    key TEXT,
    idx INTEGER,
    status TEXT,
    kinds TEXT,
    measured_run INTEGER,
    left_run INTEGER,
    left_at TEXT,
    reason TEXT
);
CREATE INDEX IF NOT EXISTS idx_sample_history_key ON sample_history (key);
""",
    # Acknowledged failures (docs/service.md, "Acknowledged means kept"): what the training guard
    # reported, kept apart from the samples a scan re-measures, and what ended each one.
    3: """
CREATE TABLE IF NOT EXISTS failures (
    ident TEXT PRIMARY KEY,
    idx INTEGER NOT NULL,
    key TEXT,
    error_type TEXT,
    message TEXT,
    count INTEGER NOT NULL,
    first_at TEXT,
    last_at TEXT,
    last_id TEXT,
    source TEXT,
    file_state TEXT,
    cleared_at TEXT,
    cleared_by TEXT,
    cleared_reason TEXT
);
CREATE INDEX IF NOT EXISTS idx_failures_idx ON failures (idx);
CREATE TABLE IF NOT EXISTS failure_events (
    ident TEXT,
    idx INTEGER,
    key TEXT,
    at TEXT,
    event TEXT,
    by TEXT,
    reason TEXT
);
INSERT OR IGNORE INTO failures (ident, idx, key, error_type, message, count, first_at, last_at, source)
    SELECT coalesce(CAST(s.key AS TEXT), '#' || s.idx), s.idx, s.key, s.error_type, s.error_message, 1,
           s.measured_at, s.measured_at, 'guard'
    FROM samples s WHERE s.status = 'error' AND s.run_id IN (SELECT id FROM runs WHERE kind = 'guard')
""",
    # The file's ctime too (docs/scan.md, "Incremental scans"): any write sets it, and utime
    # cannot set it back. NULL (a state recorded before) is unknown and not compared.
    4: """
ALTER TABLE sample_files ADD COLUMN ctime_ns INTEGER
""",
    # Keys are identity (docs/index.md, "Positions"): an incremental scan keeps the rows it finds
    # again, and stores the samples' current order here once, rather than renumbering every row
    # that moved. No row: each sample's position is its idx.
    5: """
CREATE TABLE IF NOT EXISTS sample_order (
    id INTEGER PRIMARY KEY CHECK (id = 0),
    ids BLOB NOT NULL
)
""",
}

SAMPLE_COLUMNS: tuple[str, ...] = (
    "idx", "key", "status", "run_id", "duration", "nbytes", "signature", "non_finite", "requires_grad",
    "non_cpu", "fd_delta", "labels", "info", "reported", "error_type", "error_message", "traceback",
    "worker", "measured_at",
)  # fmt: skip
INDEX_TABLES = frozenset(
    {
        "runs", "samples", "findings", "sample_files", "sample_history", "failures", "failure_events",
        "sample_order",
    }
)  # fmt: skip
_JSON_COLUMNS = ("signature", "labels", "info", "reported")
STATUSES = ("ok", "error", "crash", "timeout")


class IndexFileError(DatalintError):
    """An index file that cannot be opened or was not made by this version of datalint."""


@dataclass(frozen=True)
class RunRecord:
    """One row of `runs`: a scan (kind "dataset" or "images") or a guard session (kind "guard")."""

    id: int
    kind: str
    spec: str
    length: int | None
    fingerprint: str | None
    options: dict[str, Any]
    started: str | None
    finished: str | None
    environment: dict[str, Any] = field(default_factory=dict)
    counts: dict[str, Any] = field(default_factory=dict)


def utc_now(timespec: str = "seconds") -> str:
    return datetime.now(UTC).isoformat(timespec=timespec)


def create_parent(path: Path) -> None:
    """Create the folder of `path`. A `.datalint/` folder created here gets a `.gitignore` of `*` (as
    ruff's and pytest's caches do), so indexes never show in `git status`; one that already exists is
    left alone, so a team that removed the file to commit its quarantine list keeps it removed."""
    folder = path.parent
    if folder.is_dir():
        return
    folder.parent.mkdir(parents=True, exist_ok=True)
    try:
        folder.mkdir()
    except FileExistsError:  # another process made it first, and writes the .gitignore
        return
    if folder.name == ".datalint":
        (folder / ".gitignore").write_text("# Created by datalint: its indexes stay out of git.\n*\n")


def _sqlite_utils() -> Any:
    """sqlite-utils; in the `datalint` command, imported without pandas when pandas is not loaded.

    sqlite-utils imports pandas (when installed) only to convert pandas values it is handed; the
    index never hands it any, and the import costs ~0.4 s, paid by every incremental scan and
    every `datalint watch` update. Blocking the name for the length of the import makes its
    `import_module("pandas")` fail as when pandas is absent; the name is released right after.
    A library user's process is left alone: their own sqlite-utils calls may hand it pandas values.
    """
    command = sys.modules.get("datalint.cli")
    as_command = command is not None and getattr(command, "AS_COMMAND", False)
    if not as_command or "sqlite_utils" in sys.modules or "pandas" in sys.modules:
        import sqlite_utils

        return sqlite_utils
    sys.modules["pandas"] = None  # type: ignore[assignment]
    try:
        import sqlite_utils
    finally:
        del sys.modules["pandas"]
    return sqlite_utils


def open_index(path: str | Path, *, busy_timeout: float = 30.0, create: bool = True) -> Any:
    """Open (and create, idempotently) an index; returns a `sqlite_utils.Database` in WAL mode."""
    sqlite_utils = _sqlite_utils()
    path = Path(path)
    if not create and not path.exists():
        raise IndexFileError(f"no scan index at {path}; run `datalint scan` first (or pass its --db path)")
    if path.exists() and not is_regular(path):  # SQLite would say "disk I/O error", or block on a FIFO
        kind = file_kind(path.stat().st_mode)
        raise IndexFileError(f"{path} is {kind}, not an index file; pass a file name with --db")
    if create:
        try:
            create_parent(path)
        except OSError as exc:
            raise IndexFileError(f"cannot create the folder of the index {path}: {os_cause(exc)}") from None
    try:
        connection = sqlite3.connect(path, timeout=busy_timeout, check_same_thread=False)
        positions.register(connection)
        db = sqlite_utils.Database(connection)
        ensure_schema(db)
    except sqlite3.DatabaseError as exc:
        cause = sqlite_cause(exc, path)
        if cause is None:
            raise IndexFileError(f"{path} is not a usable datalint index: {exc}") from None
        raise IndexFileError(f"cannot open the index {path}: {cause}; nothing was changed") from None
    return db


def open_shard_file(path: Path) -> Any:
    """A new index file (same schema) that one process writes alone and nobody reads until it is done.

    No journal and no fsync per commit: the file is written under a temporary name and renamed once
    complete (after one fsync), so a writer killed half-way leaves a temporary file that is
    discarded, never a half-written index. No WAL either, which also keeps SQLite's shared-memory
    file off a network filesystem.
    """
    import sqlite_utils

    connection = sqlite3.connect(path, check_same_thread=False)
    positions.register(connection)
    connection.execute("PRAGMA journal_mode = OFF")
    connection.execute("PRAGMA synchronous = OFF")
    connection.execute("PRAGMA locking_mode = EXCLUSIVE")
    db = sqlite_utils.Database(connection)
    ensure_schema(db, wal=False)
    return db


def sqlite_cause(exc: BaseException, path: Path) -> str | None:
    """What a person should hear about an SQLite error on `path`: the disk, the permissions, the JSON.

    None when the error is about the file's content (not a database, another program's database).
    """
    text = str(exc).lower()
    if "disk is full" in text:
        return "the disk is full (SQLite could not grow the file)"
    if "readonly" in text or "unable to open" in text or "disk i/o error" in text:
        return _write_permission_cause(path) or f"SQLite cannot write there ({exc})"
    if "malformed json" in text:
        return "a JSON value in it is not valid JSON (edited by hand?): restore it or scan with --rescan"
    if "locked" in text or "busy" in text:
        return f"another process holds it locked ({exc})"
    return None


def read_only_file_system(path: Path) -> bool:
    """True when `path` lies on a file system mounted read-only (no permission change can help)."""
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def _write_permission_cause(path: Path) -> str | None:
    folder = path.parent if str(path.parent) else Path(".")
    if read_only_file_system(folder):
        return f"it is on a read-only file system ({folder}): copy it somewhere writable, or use another --db"
    if path.exists() and not os.access(path, os.W_OK):
        return "the file is read-only for this user (permission denied)"
    if not os.access(folder, os.W_OK | os.X_OK):
        return (
            f"its folder {folder} is read-only for this user (permission denied): SQLite must create "
            f"{path.name}-wal and {path.name}-shm beside the index"
        )
    return None


def os_cause(exc: OSError) -> str:
    """An OSError as a cause: the disk, the permissions, or what the system said."""
    if exc.errno == errno.ENOSPC:
        return "the disk is full"
    if isinstance(exc, PermissionError):
        return "permission denied"
    return exc.strerror or type(exc).__name__


@contextlib.contextmanager
def index_errors(path: Path, kept: Callable[[], str]) -> Iterator[None]:
    """Turn the index's SQLite, JSON and disk errors into an IndexFileError that names the cause.

    `kept` says what survives (called only after a failure): every batch written before the error
    is complete in the index, so the same command resumes once the cause is fixed.
    """
    try:
        yield
    except sqlite3.Error as exc:
        cause = sqlite_cause(exc, path) or f"SQLite: {exc}"
        raise IndexFileError(f"the index {path}: {cause}. {_kept(kept)}") from None
    except json.JSONDecodeError as exc:
        raise IndexFileError(
            f"the index {path} holds a value that is not valid JSON (edited by hand?): {exc}. "
            "Restore the file, or scan again with --rescan"
        ) from None
    except OSError as exc:
        if exc.errno not in (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES):
            raise
        where = f" {exc.filename}" if exc.filename else ""
        raise IndexFileError(f"cannot write{where}: {os_cause(exc)}. {_kept(kept)}") from None


# What reading a value that datalint never wrote raises: text where a number was, a list where
# an object was, bytes that are not UTF-8, JSON that does not parse.
_FOREIGN_VALUE_ERRORS = (ValueError, TypeError, AttributeError, KeyError, IndexError)


@contextlib.contextmanager
def reading_index(path: Path, kept: Callable[[], str] = lambda: "The index was only read") -> Iterator[None]:
    """Around code that only reads an index: a value of the wrong kind in it is a named error too.

    Only around pure reads (deriving findings or a list, loading one), where these exceptions can
    only come from the index's content; SQLite and JSON errors are named as `index_errors` does.
    """
    try:
        with index_errors(path, kept):
            yield
    except _FOREIGN_VALUE_ERRORS as exc:
        raise IndexFileError(
            f"the index {path} holds a value datalint did not write there (edited by hand, or damaged): "
            f"{exception_text(exc)}. Restore the file, or scan again with --rescan"
        ) from None


def _kept(kept: Callable[[], str]) -> str:
    try:
        return kept()
    except Exception:  # the index itself may be what failed; say what we can
        return "Rows written before the error are kept in the index"


class IndexBusyError(IndexFileError):
    """Another scan is writing this index now."""


def lock_path(index: Path) -> Path:
    return index.with_name(index.name + ".lock")


@contextlib.contextmanager
def scan_lock(index: Path) -> Iterator[None]:
    """Hold the index's scan lock: one scan writes an index at a time; a second one is refused.

    A POSIX record lock on `<index>.lock` (`files.take_lock`), which also holds the holder's pid, host
    and start time for the refusal message; a lock left by a killed scan is never stale.
    """
    path = lock_path(index)
    try:
        fd = take_lock(path)
    except LockHeld as held:
        raise IndexBusyError(
            f"another scan is writing the index {index} ({held.holder}): wait for it to finish, or scan "
            "into another --db"
        ) from None
    except OSError as exc:
        cause = os_cause(exc)
        if isinstance(exc, PermissionError):
            cause = f"its folder {path.parent} is read-only for this user (permission denied)"
        raise IndexFileError(f"cannot create the scan lock {path}: {cause}; nothing was changed") from None
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)  # still holding the lock: nobody can be between open and lock on it
        os.close(fd)


def ensure_schema(db: Any, *, wal: bool = True) -> None:
    """Create the tables if absent and check the schema version. Safe to call from many processes.

    `wal=False` leaves the journal mode alone: a file with one writer and no reader (a shard file)."""
    version = db.execute("PRAGMA user_version").fetchone()[0]
    if version > SCHEMA_VERSION:
        raise IndexFileError(
            f"{index_path(db)} has index schema version {version}; this datalint reads version "
            f"{SCHEMA_VERSION}: upgrade datalint or scan into a new --db"
        )
    if version == 0:
        tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if tables - INDEX_TABLES:
            raise IndexFileError(
                f"{index_path(db)} is an SQLite file but not a datalint index; pick another --db"
            )
        # Concurrent creators take the write lock one after another, and every CREATE is IF NOT EXISTS.
        with transaction(db):
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    db.conn.execute(statement)
            db.conn.execute(f"PRAGMA user_version = {_BASE_VERSION}")
        version = _BASE_VERSION
    if version < SCHEMA_VERSION:
        migrate(db, version)
    if not wal:
        return
    if db.journal_mode != "wal":
        db.enable_wal()
    db.execute("PRAGMA synchronous = NORMAL")  # with WAL: durable at each checkpoint, no fsync per commit


def migrate(db: Any, version: int) -> None:
    """Apply the migrations after `version`, each in its own transaction with its version stamp."""
    for target in range(version + 1, SCHEMA_VERSION + 1):
        with transaction(db):
            if db.execute("PRAGMA user_version").fetchone()[0] >= target:
                continue  # another process migrated it while this one waited for the lock
            for statement in _MIGRATIONS[target].split(";"):
                if statement.strip() and not _column_there(db.conn, statement):
                    db.conn.execute(statement)
            db.conn.execute(f"PRAGMA user_version = {target}")


_ADD_COLUMN = re.compile(r"\s*ALTER TABLE (\w+) ADD COLUMN (\w+)", re.IGNORECASE)


def _column_there(connection: Any, statement: str) -> bool:
    """An ADD COLUMN whose column exists (ALTER TABLE has no IF NOT EXISTS): an index whose version
    was set back, or two migrators, find it done."""
    added = _ADD_COLUMN.match(statement)
    if added is None:
        return False
    table, column = added.groups()
    return any(row[1] == column for row in connection.execute(f"PRAGMA table_info({table})"))


@contextlib.contextmanager
def transaction(db: Any) -> Iterator[Any]:
    """One write transaction that takes the write lock first (BEGIN IMMEDIATE).

    Use it for every write when several processes share an index: a deferred transaction that
    reads before it writes fails at once with "database is locked" when another process committed
    in between (SQLite cannot wait there without risking a deadlock); an immediate one waits its
    turn for up to the busy timeout instead.
    """
    connection: sqlite3.Connection = db.conn
    connection.execute("BEGIN IMMEDIATE")
    try:
        yield db
    except BaseException:
        if connection.in_transaction:  # SQLite has already rolled back after a full disk
            connection.execute("ROLLBACK")
        raise
    try:
        connection.execute("COMMIT")
    except sqlite3.Error:
        if connection.in_transaction:
            connection.execute("ROLLBACK")
        raise


def index_path(db: Any) -> str:
    """The file an open index lives in, for messages about it."""
    row = db.execute("PRAGMA database_list").fetchone()
    return str(row[2]) if row and row[2] else ":memory:"


# ----------------------------------------------------------------------------------------------
# Runs


def start_run(
    db: Any,
    *,
    kind: str,
    spec: str,
    length: int | None,
    fingerprint: str | None,
    options: dict[str, Any],
    environment: dict[str, Any],
    counts: dict[str, Any] | None = None,
) -> int:
    record = {
        "kind": kind,
        "spec": spec,
        "length": length,
        "fingerprint": fingerprint,
        "options": json.dumps(options, sort_keys=True, default=str),
        "environment": json.dumps(environment, sort_keys=True, default=str),
        "started": utc_now("milliseconds"),  # a scan often takes less than a second
        "finished": None,
        "counts": json.dumps(counts) if counts is not None else None,
    }
    with transaction(db):
        db["runs"].insert(record)
        run_id = db.execute("SELECT last_insert_rowid()").fetchone()[0]
    return int(run_id)


def finish_run(db: Any, run_id: int, counts: dict[str, Any], length: int | None = None) -> None:
    values: dict[str, Any] = {
        "finished": utc_now("milliseconds"),
        "counts": json.dumps(counts, sort_keys=True),
    }
    if length is not None:
        values["length"] = length
    with transaction(db):
        db["runs"].update(run_id, values)


def latest_run(
    db: Any, kinds: Sequence[str] = ("dataset", "images", "webdataset", "parquet")
) -> RunRecord | None:
    """The most recent scan run (guard sessions are not scans)."""
    marks = ", ".join("?" for _ in kinds)
    row = db.execute(
        f"SELECT id, kind, spec, length, fingerprint, options, started, finished FROM runs "
        f"WHERE kind IN ({marks}) ORDER BY id DESC LIMIT 1",
        list(kinds),
    ).fetchone()
    if row is None:
        return None
    return RunRecord(row[0], row[1], row[2], row[3], row[4], json.loads(row[5] or "{}"), row[6], row[7])


# ----------------------------------------------------------------------------------------------
# Samples


class SampleWriter:
    """Buffers sample rows and writes them in one transaction per batch (by count or by age)."""

    def __init__(
        self,
        db: Any,
        run_id: int,
        order: positions.Positions | None = None,
        *,
        max_rows: int = 2000,
        max_age: float = 0.5,
    ) -> None:
        self.db = db
        self.run_id = run_id
        # Rows come keyed by position (the sample measured); each is stored under its row id.
        self.order = order if order is not None and not order.identity else None
        self.max_rows = max_rows
        self.max_age = max_age
        self.buffer: list[tuple[Any, ...]] = []
        self.since = time.monotonic()
        self.written = 0

    def add(self, rows: Iterable[dict[str, Any]]) -> None:
        for row in rows:
            self.buffer.append(self._normalise(row))
        if len(self.buffer) >= self.max_rows or (
            self.buffer and time.monotonic() - self.since >= self.max_age
        ):
            self.flush()

    def flush(self) -> None:
        if self.buffer:
            write_samples(self.db, self.buffer)
            self.written += len(self.buffer)
            self.buffer = []
        self.since = time.monotonic()

    def _normalise(self, row: dict[str, Any]) -> tuple[Any, ...]:
        row["run_id"] = self.run_id
        values = sample_values(row)
        if self.order is None:
            return values
        idx = self.order.id_at(values[0])
        if idx is None:
            raise IndexFileError(f"sample {values[0]} is past the end of the index's order of samples")
        return (idx, *values[1:])


_INSERT_SAMPLES = "INSERT OR REPLACE INTO samples ({}) VALUES ({})".format(
    ", ".join(SAMPLE_COLUMNS), ", ".join("?" for _ in SAMPLE_COLUMNS)
)


_JSON_POSITIONS = tuple(SAMPLE_COLUMNS.index(column) for column in _JSON_COLUMNS)


def sample_values(row: dict[str, Any]) -> tuple[Any, ...]:
    """A row (keyed by column; `findings` for `reported`) as values in SAMPLE_COLUMNS order, JSON encoded."""
    if "findings" in row and "reported" not in row:
        row = {**row, "reported": row["findings"] or None}
    values = list(map(row.get, SAMPLE_COLUMNS))
    for position in _JSON_POSITIONS:  # workers send JSON as text already; rows made here are encoded now
        value = values[position]
        if value is not None and not isinstance(value, str):
            values[position] = json.dumps(value, separators=(",", ":"), default=str)
    values[_KEY_POSITION] = stored_key(values[_KEY_POSITION])
    for position in _TEXT_POSITIONS:
        values[position] = storable_text(values[position])
    return tuple(values)


_KEY_POSITION = SAMPLE_COLUMNS.index("key")
_TEXT_POSITIONS = tuple(
    SAMPLE_COLUMNS.index(column) for column in ("error_type", "error_message", "traceback", "status")
)


def stored_key(key: Any) -> Any:
    """A sample key as SQLite keeps it: text, or the exact bytes (a BLOB) when it is not UTF-8.

    File names on Linux are bytes; Python gives the ones that are not UTF-8 as surrogate-escaped
    strings, which SQLite refuses. As a BLOB the key is lossless and can never equal another
    key's text; `read_key` turns it back into the string the dataset gave.
    """
    if isinstance(key, str) and not key.isascii() and not is_utf8(key):
        return name_bytes(key)
    return key


def read_key(value: Any) -> str | None:
    """A `samples.key` value as the string the dataset gave (see `stored_key`)."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "surrogateescape")
    return None if value is None else str(value)


def storable_text(value: Any) -> Any:
    """Text SQLite can store: a message quoting a name that is not UTF-8 shows its bytes as \\xNN."""
    if isinstance(value, str) and not value.isascii() and not is_utf8(value):
        return name_bytes(value).decode("utf-8", "backslashreplace")
    return value


def write_samples(db: Any, values: Sequence[tuple[Any, ...]]) -> None:
    """Insert or replace rows (from `sample_values`) in one transaction.

    Rows go through the sqlite-utils Database's own connection with one prepared statement: per
    row, `insert_all` spends most of its time building the query and JSON-checking every value,
    and measured 2.5x slower here (benchmarks/README.md, "scan"); the writer must stay far ahead
    of any scan.
    """
    with transaction(db):
        db.conn.executemany(_INSERT_SAMPLES, values)


# Rows a scan measured; the training guard's rows (run kind "guard") are replaced when measured.
_SCANNED = "run_id IN (SELECT id FROM runs WHERE kind != 'guard')"


def missing_ranges(db: Any, length: int) -> list[range]:
    """Index ranges in [0, length) no scan has measured yet, read in one ordered pass (no set of 1M ints)."""
    gaps: list[range] = []
    expected = 0
    query = f"SELECT idx FROM samples WHERE idx >= 0 AND idx < ? AND {_SCANNED} ORDER BY idx"
    for (index,) in db.execute(query, [length]):
        if index > expected:
            gaps.append(range(expected, index))
        expected = index + 1
    if expected < length:
        gaps.append(range(expected, length))
    return gaps


def clear_samples(db: Any) -> None:
    """Forget every measured sample and finding (a --rescan); the runs history stays, and so do the
    training failures (each keeps its finding: a rescan killed halfway lists them all the same)."""
    from datalint.index import failures  # it builds on this module

    with transaction(db):
        db.execute("DELETE FROM samples")
        db.execute("DELETE FROM findings")
        positions.write(db.conn, positions.IDENTITY)
        failures.keep_listed(db.conn)


def count_samples(db: Any, scanned_only: bool = False) -> int:
    where = f" WHERE {_SCANNED}" if scanned_only else ""
    return int(db.execute(f"SELECT COUNT(*) FROM samples{where}").fetchone()[0])


def status_counts(db: Any) -> dict[str, int]:
    counts = dict.fromkeys(STATUSES, 0)
    for status, count in db.execute("SELECT status, COUNT(*) FROM samples GROUP BY status"):
        counts[status] = count
    return counts


def iter_samples(
    db: Any,
    columns: Sequence[str] = SAMPLE_COLUMNS,
    where: str = "",
    raw: Sequence[str] = (),
    parameters: Sequence[Any] = (),
) -> Iterator[dict[str, Any]]:
    """Sample rows in index order, JSON columns decoded (except those named in `raw`).

    `where` is SQL written by datalint; every value in it is a `?` with its value in `parameters`.
    """
    cursor = db.execute(f"SELECT {', '.join(columns)} FROM samples {where} ORDER BY idx", list(parameters))
    decode = [name in _JSON_COLUMNS and name not in raw for name in columns]
    for values in cursor:
        yield {
            name: (json.loads(value) if flag and value is not None else value)
            for name, value, flag in zip(columns, values, decode, strict=True)
        }


# ----------------------------------------------------------------------------------------------
# Findings


def write_findings(db: Any, findings: Iterable[dict[str, Any]]) -> None:
    """Replace the derived findings table in one transaction."""
    rows = ({name: storable_text(value) for name, value in finding.items()} for finding in findings)
    with transaction(db):
        db.execute("DELETE FROM findings")
        db["findings"].insert_all(rows, pk=("idx", "kind"), replace=True, batch_size=500)
        from datalint.index import failures  # it builds on this module

        failures.keep_listed(db.conn)
