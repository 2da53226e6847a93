"""The record of one `datalint run`: a SQLite file written by the recorder alone (sqlite-utils).

Tables: `run` (one row: the command, start and end, exit status, limits), `processes` (one row
per process per second), `system` (one row per second: /dev/shm, cgroup, CPU, GPU) and `events`
(process starts and deaths, OOM kills counted).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

SCHEMA_VERSION = 1


def open_record(path: Path) -> Any:
    """A fresh record at `path` (an old one there is replaced: one file, one run)."""
    import sqlite_utils

    for suffix in ("", "-wal", "-shm"):
        Path(str(path) + suffix).unlink(missing_ok=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    db = sqlite_utils.Database(path)
    db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    db.table("run").create(
        {"id": int, "command": str, "started": float, "finished": float, "returncode": int,
         "outcome": str, "memory_limit": int, "shm_total": int, "usable_cpus": int, "gpu_source": str},
        pk="id",
    )
    db.table("processes").create(
        {"t": float, "pid": int, "role": str, "rss": int, "pss": int, "cpu": float, "fds": int,
         "read_bytes": int, "write_bytes": int},
    )
    db.table("system").create(
        {"t": float, "shm_used": int, "shm_total": int, "shm_own": int, "cgroup_usage": int,
         "cgroup_limit": int, "oom": int, "oom_kill": int, "cpu": float, "usable_cpus": int,
         "gpu_memory_used": int, "gpu_memory_total": int, "gpu_utilization": int},
    )
    db.table("events").create(
        {"t": float, "pid": int, "role": str, "kind": str, "detail": str, "signal": int},
    )
    return db


def start_run(db: Any, command: Sequence[str], started: float, **limits: Any) -> None:
    db["run"].insert({"id": 1, "command": json.dumps(list(command)), "started": started, **limits})


def write_second(db: Any, processes: list[dict[str, Any]], system: dict[str, Any],
                 events: list[dict[str, Any]]) -> None:
    """One second of the series in one transaction."""
    with db.conn:
        if processes:
            db["processes"].insert_all(processes)
        db["system"].insert(system)
        if events:
            db["events"].insert_all(events)


def finish_run(db: Any, finished: float, returncode: int, outcome: str, events: list[dict[str, Any]]) -> None:
    with db.conn:
        if events:
            db["events"].insert_all(events)
        db["run"].update(1, {"finished": finished, "returncode": returncode, "outcome": outcome})


def load_record(path: Path) -> dict[str, Any]:
    """The whole record as plain rows (for the diagnosis and the report)."""
    import sqlite3

    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
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
