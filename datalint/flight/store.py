"""The record of one `datalint run`: a SQLite file written by the recorder alone.

Tables: `run` (one row: the command, start and end, exit status, limits), `processes` (one row
per process per second), `system` (one row per second: /dev/shm, cgroup, CPU, GPU) and `events`
(process starts and deaths, OOM kills counted; a death carries the sample the process was reading
when its training uses `GuardedDataset`).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from datalint.index import read

# 2: the sample a dying process was reading, on its exit event; 3: the recorder's CPU, the scan's index
SCHEMA_VERSION = 3


TABLES: dict[str, dict[str, str]] = {
    "run": {"id": "INTEGER PRIMARY KEY", "command": "TEXT", "started": "REAL", "finished": "REAL",
            "returncode": "INTEGER", "outcome": "TEXT", "memory_limit": "INTEGER", "shm_total": "INTEGER",
            "usable_cpus": "INTEGER", "gpu_source": "TEXT",
            "scan_index": "TEXT"},  # the scan's index of the dataset (--index): suspects for an unnamed death
    "processes": {"t": "REAL", "pid": "INTEGER", "role": "TEXT", "rss": "INTEGER", "pss": "INTEGER",
                  "cpu": "REAL", "fds": "INTEGER", "read_bytes": "INTEGER", "write_bytes": "INTEGER"},
    "system": {"t": "REAL", "shm_used": "INTEGER", "shm_total": "INTEGER", "shm_own": "INTEGER",
               "cgroup_usage": "INTEGER", "cgroup_limit": "INTEGER", "oom": "INTEGER", "oom_kill": "INTEGER",
               "cpu": "REAL", "usable_cpus": "INTEGER", "gpu_memory_used": "INTEGER",
               "gpu_memory_total": "INTEGER", "gpu_utilization": "INTEGER",
               "recorder_cpu": "REAL"},  # the recorder's own CPU since the last row, s per s
    "events": {"t": "REAL", "pid": "INTEGER", "role": "TEXT", "kind": "TEXT", "detail": "TEXT",
               "signal": "INTEGER", "sample_index": "INTEGER", "sample_key": "TEXT", "last_sample": "INTEGER",
               "sample_started": "REAL", "sample_torn": "INTEGER"},
}


def open_record(path: Path) -> sqlite3.Connection:
    """A fresh record at `path` (an old one there is replaced: one file, one run).

    The standard library's sqlite3, not sqlite-utils: sqlite-utils imports numpy, which would put
    ~130 MiB into the recorder that sits beside the training for its whole run. The record is plain
    SQLite, so sqlite-utils and datasette read it as any other.
    """
    for suffix in ("", "-wal", "-shm", "-journal"):
        Path(str(path) + suffix).unlink(missing_ok=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(path, isolation_level=None)
    db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    db.execute("PRAGMA journal_mode = WAL")
    # a commit a second without an fsync: each is in the log before the next second, so a crash of
    # the training (or of the recorder) loses nothing; only the machine's own crash may lose the
    # seconds since the last checkpoint
    db.execute("PRAGMA synchronous = NORMAL")
    for name, columns in TABLES.items():
        db.execute(f"CREATE TABLE {name} ({', '.join(f'{c} {t}' for c, t in columns.items())})")
    return db


def _insert(db: sqlite3.Connection, table: str, rows: Sequence[dict[str, Any]]) -> None:
    columns = list(TABLES[table])
    db.executemany(
        f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})",
        [tuple(row.get(c) for c in columns) for row in rows],
    )


def start_run(db: sqlite3.Connection, command: Sequence[str], started: float, **limits: Any) -> None:
    _insert(db, "run", [{"id": 1, "command": json.dumps(list(command)), "started": started, **limits}])


def write_second(db: sqlite3.Connection, processes: list[dict[str, Any]], system: dict[str, Any],
                 events: list[dict[str, Any]], renamed: dict[int, str] | None = None) -> None:
    """One second of the series in one transaction; `renamed` corrects the role of processes
    already written (a worker whose number torch gave differs from the start-order guess)."""
    db.execute("BEGIN")
    _rename(db, renamed or {})
    _insert(db, "processes", processes)
    _insert(db, "system", [system])
    _insert(db, "events", events)
    db.execute("COMMIT")


def _rename(db: sqlite3.Connection, renamed: dict[int, str]) -> None:
    for pid, role in renamed.items():
        db.execute("UPDATE processes SET role = ? WHERE pid = ?", (role, pid))
        db.execute("UPDATE events SET role = ? WHERE pid = ?", (role, pid))


def finish_run(db: sqlite3.Connection, finished: float, returncode: int, outcome: str,
               events: list[dict[str, Any]], renamed: dict[int, str] | None = None) -> None:
    db.execute("BEGIN")
    _rename(db, renamed or {})
    _insert(db, "events", events)
    db.execute("UPDATE run SET finished = ?, returncode = ?, outcome = ? WHERE id = 1",
               (finished, returncode, outcome))
    db.execute("COMMIT")


def load_record(path: Path) -> dict[str, Any]:
    """The whole record as plain rows (for the diagnosis and the report)."""
    conn = read.connect(path)
    conn.row_factory = sqlite3.Row
    try:
        tables = {name: [dict(r) for r in conn.execute(f"SELECT * FROM {name} ORDER BY rowid")]
                  for name in ("run", "processes", "system", "events")}
    except sqlite3.DatabaseError as exc:
        from datalint.errors import UsageError

        raise UsageError(f"{path} is not a `datalint run` record: {exc}") from None
    finally:
        conn.close()
    record: dict[str, Any] = dict(tables)
    record["run"] = tables["run"][0] if tables["run"] else {}
    return record
