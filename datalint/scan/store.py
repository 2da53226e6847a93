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
import json
import sqlite3
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from datalint.errors import DatalintError

SCHEMA_VERSION = 1

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

SAMPLE_COLUMNS: tuple[str, ...] = (
    "idx", "key", "status", "run_id", "duration", "nbytes", "signature", "non_finite", "requires_grad",
    "non_cpu", "fd_delta", "labels", "info", "reported", "error_type", "error_message", "traceback",
    "worker", "measured_at",
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


def open_index(path: str | Path, *, busy_timeout: float = 30.0, create: bool = True) -> Any:
    """Open (and create, idempotently) an index; returns a `sqlite_utils.Database` in WAL mode."""
    import sqlite_utils

    path = Path(path)
    if not create and not path.is_file():
        raise IndexFileError(f"no scan index at {path}; run `datalint scan` first (or pass its --db path)")
    if create:
        create_parent(path)
    try:
        connection = sqlite3.connect(str(path), timeout=busy_timeout, check_same_thread=False)
        db = sqlite_utils.Database(connection)
        ensure_schema(db)
    except sqlite3.DatabaseError as exc:
        raise IndexFileError(f"{path} is not a usable datalint index: {exc}") from None
    return db


def ensure_schema(db: Any) -> None:
    """Create the tables if absent and check the schema version. Safe to call from many processes."""
    version = db.execute("PRAGMA user_version").fetchone()[0]
    if version > SCHEMA_VERSION:
        raise IndexFileError(
            f"{index_path(db)} has index schema version {version}; this datalint reads version "
            f"{SCHEMA_VERSION}: upgrade datalint or scan into a new --db"
        )
    if version == 0:
        tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if tables - {"runs", "samples", "findings"}:
            raise IndexFileError(
                f"{index_path(db)} is an SQLite file but not a datalint index; pick another --db"
            )
        # Concurrent creators take the write lock one after another, and every CREATE is IF NOT EXISTS.
        with transaction(db):
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    db.conn.execute(statement)
            db.conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    if db.journal_mode != "wal":
        db.enable_wal()
    db.execute("PRAGMA synchronous = NORMAL")  # with WAL: durable at each checkpoint, no fsync per commit


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
        connection.execute("ROLLBACK")
        raise
    connection.execute("COMMIT")


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
        "counts": None,
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

    def __init__(self, db: Any, run_id: int, *, max_rows: int = 2000, max_age: float = 0.5) -> None:
        self.db = db
        self.run_id = run_id
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
        return sample_values(row)


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
    return tuple(values)


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
    """Forget every measured sample and finding (a --rescan); the runs history stays."""
    with transaction(db):
        db.execute("DELETE FROM samples")
        db.execute("DELETE FROM findings")


def count_samples(db: Any, scanned_only: bool = False) -> int:
    where = f" WHERE {_SCANNED}" if scanned_only else ""
    return int(db.execute(f"SELECT COUNT(*) FROM samples{where}").fetchone()[0])


def status_counts(db: Any) -> dict[str, int]:
    counts = dict.fromkeys(STATUSES, 0)
    for status, count in db.execute("SELECT status, COUNT(*) FROM samples GROUP BY status"):
        counts[status] = count
    return counts


def iter_samples(
    db: Any, columns: Sequence[str] = SAMPLE_COLUMNS, where: str = "", raw: Sequence[str] = ()
) -> Iterator[dict[str, Any]]:
    """Sample rows in index order, JSON columns decoded (except those named in `raw`)."""
    cursor = db.execute(f"SELECT {', '.join(columns)} FROM samples {where} ORDER BY idx")
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
    with transaction(db):
        db.execute("DELETE FROM findings")
        db["findings"].insert_all(findings, pk=("idx", "kind"), replace=True, batch_size=500)
