"""Guard failures from many nodes into one index: validated batches, group-committed by one writer.

Each dataset has one writer thread (one writer for SQLite). Requests hand it their batch and wait;
the writer takes every batch waiting at that moment and commits them in one transaction, then answers
them all: under load a commit serves many requests, so throughput grows with concurrency while each
request still waits for its own rows to be committed. Acknowledged therefore means committed.

Rows are written as the guard writes them locally (`datalint.training.record`): a `samples` row with
status `error` and an `error` finding marked for quarantine, keyed by the sample index, so a failure
sent twice (a replayed spool) replaces itself and never duplicates.
"""

from __future__ import annotations

import json
import logging
import queue
import socket
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from datalint.scan import store

logger = logging.getLogger("datalint.service")


@dataclass(frozen=True)
class IncomingFailure:
    """One failure as a client sent it (validated by the HTTP layer)."""

    index: int
    key: str | None
    error_type: str
    message: str
    traceback: str | None = None
    host: str | None = None
    pid: int | None = None
    time: str | None = None
    run: str | None = None
    id: str | None = None
    worker: int | None = None
    duration: float | None = None

    @property
    def detail(self) -> str:
        return f"{self.error_type}: {self.message}".rstrip(": ")


class IngestWriter:
    """The one writer of a dataset's guard failures; `submit()` returns once the batch is committed."""

    def __init__(
        self,
        name: str,
        index_path: Path,
        on_commit: Callable[[str, list[int], Any], None],
        before_commit: Callable[[], Any] = lambda: None,
    ) -> None:
        """`on_commit(name, indexes, token)` runs after each commit with the sorted distinct indexes it
        wrote and what `before_commit()` returned just before it (the served list's state)."""
        self.name = name
        self.index_path = index_path
        self.on_commit = on_commit
        self.before_commit = before_commit
        self._queue: queue.Queue[tuple[Sequence[IncomingFailure], Future[int]] | None] = queue.Queue()
        self._thread = threading.Thread(target=self._run, name=f"ingest-{name}", daemon=True)
        self._db: Any = None
        self._run_id: int | None = None
        self._errors = 0  # samples recorded by this writer's guard run
        self._thread.start()

    def submit(self, failures: Sequence[IncomingFailure]) -> Future[int]:
        future: Future[int] = Future()
        self._queue.put((failures, future))
        return future

    def close(self) -> None:
        self._queue.put(None)
        self._thread.join(timeout=30)

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                break
            waiting = [item]
            stop = False
            while True:  # everything that queued up while the last commit ran goes into this one
                try:
                    more = self._queue.get_nowait()
                except queue.Empty:
                    break
                if more is None:
                    stop = True
                    break
                waiting.append(more)
            self._commit(waiting)
            if stop:
                break
        if self._db is not None:
            self._db.close()

    def _commit(self, waiting: list[tuple[Sequence[IncomingFailure], Future[int]]]) -> None:
        rows = [failure for failures, _ in waiting for failure in failures]
        try:
            before = self.before_commit()
            self._write(rows)
        except Exception as exc:  # the edge: every waiting request gets the error, the writer lives on
            logger.error("ingest %s: could not commit %d failures: %s", self.name, len(rows), exc)
            if self._db is not None:
                self._db.close()
            self._db, self._run_id, self._errors = None, None, 0
            for _, future in waiting:
                future.set_exception(exc)
            return
        self.on_commit(self.name, sorted({f.index for f in rows}), before)
        for failures, future in waiting:
            future.set_result(len(failures))

    def _open(self) -> tuple[Any, int]:
        if self._db is None or self._run_id is None:
            self._db = store.open_index(self.index_path, busy_timeout=60.0)
            self._db.execute("PRAGMA synchronous = FULL")  # acknowledged means on disk, power loss included
            self._run_id = store.start_run(
                self._db,
                kind="guard",
                spec=f"datalint serve: {self.name}",
                length=None,
                fingerprint=None,
                options={"source": "service"},
                environment={"host": socket.gethostname()},
            )
        return self._db, self._run_id

    def _write(self, rows: list[IncomingFailure]) -> None:
        db, run_id = self._open()
        samples = [
            (
                f.index,
                f.key,
                run_id,
                f.duration,
                f.error_type,
                f.message,
                f.traceback,
                f.worker or f.pid,
                f.time or store.utc_now(),
                json.dumps(_info(f), separators=(",", ":")),
            )
            for f in rows
        ]
        findings = [(f.index, f.detail) for f in rows]
        with store.transaction(db):
            # The run's count grows by the samples new to it; a count(*) over the run would scan the
            # whole table on every commit (there is no index on run_id), this looks up the batch by key.
            distinct = sorted({f.index for f in rows})
            known = 0
            for start in range(0, len(distinct), 500):
                part = distinct[start : start + 500]
                marks = ", ".join("?" for _ in part)
                (count,) = db.conn.execute(
                    f"SELECT count(*) FROM samples WHERE run_id = ? AND idx IN ({marks})", [run_id, *part]
                ).fetchone()
                known += count
            self._errors += len(distinct) - known
            db.conn.executemany(
                "INSERT OR REPLACE INTO samples (idx, key, status, run_id, duration, error_type,"
                " error_message, traceback, worker, measured_at, info)"
                " VALUES (?, ?, 'error', ?, ?, ?, ?, ?, ?, ?, ?)",
                samples,
            )
            db.conn.executemany(
                "INSERT OR REPLACE INTO findings (idx, kind, detail, quarantine) VALUES (?, 'error', ?, 1)",
                findings,
            )
            db.conn.execute(
                "UPDATE runs SET counts = ? WHERE id = ?", (json.dumps({"error": self._errors}), run_id)
            )


def _info(failure: IncomingFailure) -> dict[str, Any]:
    return {
        key: value
        for key, value in (
            ("host", failure.host),
            ("pid", failure.pid),
            ("run", failure.run),
            ("id", failure.id),
            ("source", "guard"),
        )
        if value is not None
    }
