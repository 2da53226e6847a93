"""One failure record and its one writer: a sample that raised at training time, whoever saw it (the
guard in a training process, a remote guard through `datalint serve`, the flight recorder).

A failure is written three ways in one transaction: the `samples` row (status `error`) and the quarantined
`error` finding that every reader of an index already understands, and a row of the `failures` table,
which no scan overwrites. Runtime failures are often intermittent (memory, I/O), so a scan measuring the
same file as ok proves nothing: a failure stays on every list until the *changed* sample (another file
behind its key, or another key at its position) measures ok, a complete scan no longer finds its key, or
someone clears it; each end is an event in `failure_events` (docs/index.md).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from datalint.index import positions
from datalint.index.store import read_key, storable_text, stored_key, transaction, utc_now
from datalint.index.store import start_run as start_scan_run  # any run; this module's are guard runs


@dataclass(frozen=True)
class FailureRecord:
    """One sample that raised at training time."""

    index: int
    key: str | None
    error_type: str
    message: str
    traceback: str | None = None
    duration: float | None = None
    worker: int | None = None  # the process that read it (a DataLoader worker's pid)
    at: str | None = None  # when it failed (ISO 8601)
    host: str | None = None
    pid: int | None = None
    run: str | None = None  # the training run's id
    id: str | None = None  # the client's id of this failure: a replayed one is counted once
    source: str = "guard"  # "guard" (recorded where it failed) or "service" (posted to `datalint serve`)

    @property
    def detail(self) -> str:
        """One line, as the scan's policy words an `error` finding."""
        return f"{self.error_type}: {self.message}".rstrip(": ")

    @property
    def when(self) -> str:
        return self.at or utc_now()

    def info(self) -> dict[str, Any]:
        """Where it came from, for the samples row's `info`."""
        pairs = (("host", self.host), ("pid", self.pid), ("run", self.run), ("id", self.id))
        return {**{key: value for key, value in pairs if value is not None}, "source": self.source}


def start_run(
    db: Any,
    *,
    spec: str,
    length: int | None,
    fingerprint: str | None,
    options: dict[str, Any],
    environment: dict[str, Any],
) -> int:
    """Add the `guard` run that failures will point to (its error count starts at 0)."""
    return start_scan_run(
        db, kind="guard", spec=spec, length=length, fingerprint=fingerprint, options=options,
        environment=environment, counts={"error": 0},
    )  # fmt: skip


def finish_run(db: Any, run_id: int) -> None:
    """Mark the guard run finished (its counts are kept current by each write)."""
    with transaction(db):
        finished = utc_now("milliseconds")
        db.conn.execute("UPDATE runs SET finished = ? WHERE id = ? AND finished IS NULL", [finished, run_id])


def write(connection: sqlite3.Connection, run_id: int, records: Sequence[FailureRecord]) -> None:
    """Write these failures, inside the caller's write transaction: the samples rows (replacing each
    sample's row: a failure sent twice replaces itself), their `error` findings, the failures kept, and
    the run's count of the samples it recorded."""
    now = utc_now()
    records = [record if record.at else replace(record, at=now) for record in records]
    records = _with_row_ids(connection, records)
    new = _new_to_run(connection, run_id, sorted({record.index for record in records}))
    connection.executemany(
        "INSERT OR REPLACE INTO samples (idx, key, status, run_id, duration, error_type, error_message,"
        " traceback, worker, measured_at, info) VALUES (?, ?, 'error', ?, ?, ?, ?, ?, ?, ?, ?)",
        [
            (
                f.index, stored_key(f.key), run_id, f.duration, storable_text(f.error_type),
                storable_text(f.message), storable_text(f.traceback), f.worker or f.pid, f.when,
                json.dumps(f.info(), separators=(",", ":")),
            )
            for f in records
        ],
    )  # fmt: skip
    # A scan rederives the findings; written now, `load_quarantine(index)` and the report see it at once.
    connection.executemany(
        "INSERT OR REPLACE INTO findings (idx, kind, detail, quarantine) VALUES (?, 'error', ?, 1)",
        [(f.index, storable_text(f.detail)) for f in records],
    )
    _remember(connection, records)
    # Counted in the same transaction, so writers in several processes never overwrite each other's total.
    (text,) = connection.execute("SELECT counts FROM runs WHERE id = ?", (run_id,)).fetchone() or (None,)
    counts = json.loads(text) if text else {}
    counts["error"] = int(counts.get("error", 0)) + new
    connection.execute("UPDATE runs SET counts = ? WHERE id = ?", (json.dumps(counts), run_id))


def _with_row_ids(connection: sqlite3.Connection, records: Sequence[FailureRecord]) -> list[FailureRecord]:
    """The records with each sample's row id for its position (training says where a sample is;
    the index knows a row by its key): the row of the same key; for a key the index has no row of,
    the row the order holds at its position if nothing is written there yet (a sample the scan
    listed and has not measured), else a new row past every id in use; for a sample without a key,
    the row at its position."""
    order = positions.read(connection)
    if order.identity:
        return list(records)  # each position is its row's id
    fresh: dict[Any, int] = {}
    found: list[FailureRecord] = []
    for record in records:
        row = None
        if record.key is not None:
            hit = connection.execute(
                "SELECT idx FROM samples WHERE key = ? LIMIT 1", (stored_key(record.key),)
            ).fetchone()
            row = None if hit is None else int(hit[0])
            held = order.id_at(record.index)
            if row is None and held is not None and not _written(connection, held):
                row = held
            if row is None:
                if record.key not in fresh:
                    highest = connection.execute("SELECT max(idx) FROM samples").fetchone()[0]
                    fresh[record.key] = max([-1 if highest is None else highest, *fresh.values()]) + 1
                row = fresh[record.key]
        if row is None:
            row = order.id_at(record.index)
        found.append(record if row is None or row == record.index else replace(record, index=row))
    return found


def _written(connection: sqlite3.Connection, row: int) -> bool:
    return connection.execute("SELECT 1 FROM samples WHERE idx = ?", (row,)).fetchone() is not None


def _new_to_run(connection: sqlite3.Connection, run_id: int, indexes: list[int]) -> int:
    """How many of these samples the run has no row for yet (looked up by key: `run_id` has no index,
    and a count over the whole run on every commit would read the whole table)."""
    known = 0
    for start in range(0, len(indexes), 500):
        part = indexes[start : start + 500]
        marks = ", ".join("?" for _ in part)
        (count,) = connection.execute(
            f"SELECT count(*) FROM samples WHERE run_id = ? AND idx IN ({marks})", [run_id, *part]
        ).fetchone()
        known += count
    return len(indexes) - known


# The key's file as the index knew it when the failure came in (incremental scans keep it).
_FILE_STATE = "(SELECT json_array(size, mtime_ns, inode, content) FROM sample_files WHERE key = ?)"
_IDENT = "coalesce(CAST(? AS TEXT), '#' || ?)"
_REMEMBER = f"""
INSERT INTO failures (ident, idx, key, error_type, message, count, first_at, last_at, last_id, source,
                      file_state)
VALUES ({_IDENT}, ?, ?, ?, ?, 1, ?, ?, ?, ?, {_FILE_STATE})
ON CONFLICT (ident) DO UPDATE SET
    idx = excluded.idx,
    error_type = excluded.error_type,
    message = excluded.message,
    last_at = excluded.last_at,
    source = excluded.source,
    count = CASE WHEN failures.cleared_at IS NOT NULL THEN 1
                 WHEN excluded.last_id = failures.last_id THEN failures.count
                 ELSE failures.count + 1 END,
    first_at = CASE WHEN failures.cleared_at IS NOT NULL THEN excluded.first_at ELSE failures.first_at END,
    file_state = CASE WHEN failures.cleared_at IS NOT NULL THEN excluded.file_state
                      ELSE coalesce(failures.file_state, excluded.file_state) END,
    last_id = excluded.last_id,
    cleared_at = NULL, cleared_by = NULL, cleared_reason = NULL
"""


def _remember(connection: sqlite3.Connection, records: Sequence[FailureRecord]) -> None:
    """Add or count failures in the `failures` table (one row per sample)."""
    connection.executemany(
        _REMEMBER,
        [
            (
                stored_key(f.key), f.index, f.index, stored_key(f.key), storable_text(f.error_type),
                storable_text(f.message), f.when, f.when, f.id, f.source, stored_key(f.key),
            )
            for f in records
        ],
    )  # fmt: skip


@dataclass(frozen=True)
class ActiveFailure:
    """A failure that keeps its sample on every list."""

    index: int
    key: str | None
    error_type: str | None
    message: str | None
    count: int
    last_at: str | None
    source: str | None


def active(connection: Any) -> list[ActiveFailure]:
    """The failures no event has ended, by index (none in an index older than the table)."""
    exists = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'failures'"
    if connection.execute(exists).fetchone() is None:
        return []
    rows = connection.execute(
        "SELECT idx, key, error_type, message, count, last_at, source FROM failures"
        " WHERE cleared_at IS NULL ORDER BY idx"
    )
    return [
        ActiveFailure(idx, read_key(key), error_type, message, count, last_at, source)
        for idx, key, error_type, message, count, last_at, source in rows
    ]


def failure_detail(failure: ActiveFailure, scanned: str | None) -> str:
    """One line for an acknowledged failure: how often, the last error, and what a scan measured."""
    times = "once" if failure.count == 1 else f"{failure.count} times"
    error = f"{failure.error_type}: {failure.message}".rstrip(": ") if failure.error_type else "an error"
    when = f" {failure.last_at}" if failure.last_at else ""
    seen = f"; {scanned} when scanned" if scanned else ""
    return f"failed in training {times} (last{when}: {error}){seen}"


def keep_listed(connection: sqlite3.Connection) -> None:
    """Every active failure has its quarantined `error` finding, whatever replaced the findings: a
    failure committed while a scan judged the index is listed all the same."""
    missing = [
        failure
        for failure in active(connection)
        if connection.execute(
            "SELECT 1 FROM findings WHERE idx = ? AND kind = 'error' AND quarantine = 1", (failure.index,)
        ).fetchone()
        is None
    ]
    connection.executemany(
        "INSERT OR REPLACE INTO findings (idx, kind, detail, quarantine) VALUES (?, 'error', ?, 1)",
        [(failure.index, storable_text(failure_detail(failure, None))) for failure in missing],
    )


def clear(
    connection: sqlite3.Connection, indexes: Sequence[int], *, by: str, reason: str, at: str
) -> list[int]:
    """End the active failures of the samples at these positions (inside the caller's write
    transaction); the samples' rows the guard wrote are forgotten too, so the next scan measures
    them. Returns the positions of those ended."""
    order = positions.read(connection)
    rows = sorted({row for row in map(order.id_at, indexes) if row is not None})
    ended: list[int] = []
    for start in range(0, len(rows), 500):
        part = rows[start : start + 500]
        marks = ", ".join("?" for _ in part)
        found = [
            row[0]
            for row in connection.execute(
                f"SELECT idx FROM failures WHERE cleared_at IS NULL AND idx IN ({marks})", part
            )
        ]
        if not found:
            continue
        _end(connection, f"idx IN ({', '.join('?' for _ in found)})", found, by, reason, at)
        chosen = ", ".join("?" for _ in found)
        connection.execute(
            f"DELETE FROM findings WHERE kind = 'error' AND idx IN ({chosen}) AND idx IN"
            f" (SELECT idx FROM samples WHERE {_GUARD_ROW})",
            found,
        )
        connection.execute(f"DELETE FROM samples WHERE idx IN ({chosen}) AND {_GUARD_ROW}", found)
        ended += found
    return sorted(order.shown(row) for row in ended)


_GUARD_ROW = "run_id IN (SELECT id FROM runs WHERE kind = 'guard')"


def _end(
    connection: sqlite3.Connection, where: str, parameters: Sequence[Any], by: str, reason: str, at: str
) -> int:
    active = f"cleared_at IS NULL AND {where}"
    connection.execute(
        "INSERT INTO failure_events (ident, idx, key, at, event, by, reason)"
        f" SELECT ident, idx, key, ?, 'cleared', ?, ? FROM failures WHERE {active}",
        [at, by, reason, *parameters],
    )
    cursor = connection.execute(
        f"UPDATE failures SET cleared_at = ?, cleared_by = ?, cleared_reason = ? WHERE {active}",
        [at, by, reason, *parameters],
    )
    return cursor.rowcount


def settle(connection: sqlite3.Connection, run_id: int, at: str, *, complete: bool) -> None:
    """After a scan measured the index (inside the caller's write transaction): each keyed failure
    follows its key to the sample's position now; one whose changed sample measured ok ends, and
    (after a scan that measured every sample, `complete`) one whose key the scan no longer lists.
    A sample measured ok again, unchanged, stays listed."""
    by = f"scan run {run_id}"
    keyed_scan = (
        "EXISTS (SELECT 1 FROM samples WHERE key IS NOT NULL AND run_id IN"
        " (SELECT id FROM runs WHERE kind != 'guard'))"
    )
    if connection.execute(f"SELECT {keyed_scan}").fetchone()[0]:
        if complete:
            _end(
                connection,
                "key IS NOT NULL AND NOT EXISTS (SELECT 1 FROM samples s WHERE s.key = failures.key)",
                [],
                by,
                "the sample is no longer in the dataset (its key was not found)",
                at,
            )
        connection.execute(
            "UPDATE failures SET idx = (SELECT s.idx FROM samples s WHERE s.key = failures.key)"
            " WHERE cleared_at IS NULL AND key IS NOT NULL"
            " AND idx IS NOT (SELECT s.idx FROM samples s WHERE s.key = failures.key)"
        )
    measured_ok = (
        "EXISTS (SELECT 1 FROM samples s WHERE s.idx = failures.idx AND s.status = 'ok'"
        " AND s.run_id IN (SELECT id FROM runs WHERE kind != 'guard')"
    )
    _end(
        connection,
        f"{measured_ok} AND s.key IS NOT NULL AND failures.key IS NOT NULL"
        " AND CAST(s.key AS TEXT) IS NOT CAST(failures.key AS TEXT))",
        [],
        by,
        "another sample is at its position now, and it measured ok",
        at,
    )
    _end(
        connection,
        f"{measured_ok}) AND file_state IS NOT NULL AND key IS NOT NULL AND file_state IS NOT"
        f" {_FILE_STATE.replace('key = ?', 'key = failures.key')}",
        [],
        by,
        "its file changed since it failed, and the changed sample measured ok",
        at,
    )
