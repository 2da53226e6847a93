"""Guard failures from many nodes into one index: validated batches, group-committed by one writer.

Each dataset has one writer thread (one writer for SQLite). Requests hand it their batch and wait;
the writer takes every batch waiting at that moment and commits them in one transaction, then answers
them all: under load a commit serves many requests, so throughput grows with concurrency while each
request still waits for its own rows to be committed. Acknowledged therefore means committed.

Rows are written by the index's one failure writer (`datalint.index.failures.write`), as the local
guard's are: a `samples` row with status `error`, an `error` finding marked for quarantine, and the
failure itself, which no scan clears. A failure sent twice (a replayed spool) is counted once and
never duplicates.
"""

from __future__ import annotations

import logging
import queue
import socket
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from datalint.index import failures, read, store
from datalint.index.failures import FailureRecord

logger = logging.getLogger("datalint.service")


@dataclass(frozen=True)
class _Clear:
    """An admin's order to end acknowledged failures, queued with the batches."""

    indexes: tuple[int, ...]
    by: str
    reason: str


class IngestWriter:
    """The one writer of a dataset's guard failures; `submit()` returns once the batch is committed."""

    def __init__(
        self,
        name: str,
        index_path: Path,
        on_commit: Callable[[str, list[int], Any], None],
        before_commit: Callable[[], Any] = lambda: None,
        on_cleared: Callable[[str, list[int], Any], None] = lambda name, indexes, before: None,
    ) -> None:
        """`on_commit(name, indexes, token)` runs after each commit with the sorted distinct indexes it
        wrote and what `before_commit()` returned just before it (the served list's state)."""
        self.name = name
        self.index_path = index_path
        self.on_commit = on_commit
        self.before_commit = before_commit
        self.on_cleared = on_cleared
        self._queue: queue.Queue[tuple[Any, Future[Any]] | None] = queue.Queue()
        self._thread = threading.Thread(target=self._run, name=f"ingest-{name}", daemon=True)
        self._db: Any = None
        self._run_id: int | None = None
        self._thread.start()

    def submit(self, failures: Sequence[FailureRecord]) -> Future[int]:
        future: Future[int] = Future()
        self._queue.put((failures, future))
        return future

    def clear(self, indexes: Sequence[int], *, by: str, reason: str) -> Future[list[int]]:
        """End these samples' acknowledged failures (an admin's word), in this writer's order."""
        future: Future[list[int]] = Future()
        self._queue.put((_Clear(tuple(indexes), by, reason), future))
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
            batches: list[Any] = []
            for request in waiting:  # clears keep their place between the batches around them
                if isinstance(request[0], _Clear):
                    self._commit(batches)
                    self._clear(request)
                    batches = []
                else:
                    batches.append(request)
            self._commit(batches)
            if stop:
                break
        if self._db is not None:
            self._db.close()

    def _clear(self, request: tuple[Any, Future[Any]]) -> None:
        order, future = request
        try:
            before = self.before_commit()
            db, _ = self._open()
            with store.transaction(db):
                ended = failures.clear(
                    db.conn, order.indexes, by=order.by, reason=order.reason, at=store.utc_now()
                )
        except Exception as exc:  # the edge: the request gets the error, the writer lives on
            logger.error("ingest %s: could not clear failures: %s", self.name, exc)
            self._forget_connection()
            future.set_exception(exc)
            return
        if ended:
            self.on_cleared(self.name, ended, before)
        future.set_result(ended)

    def _forget_connection(self) -> None:
        if self._db is not None:
            self._db.close()
        self._db, self._run_id = None, None

    def _commit(self, waiting: list[tuple[Sequence[FailureRecord], Future[int]]]) -> None:
        if not waiting:
            return
        rows = [failure for batch, _ in waiting for failure in batch]
        try:
            before = self.before_commit()
            self._write(rows)
        except Exception as exc:  # the edge: every waiting request gets the error, the writer lives on
            logger.error("ingest %s: could not commit %d failures: %s", self.name, len(rows), exc)
            self._forget_connection()
            for _, future in waiting:
                future.set_exception(exc)
            return
        self.on_commit(self.name, sorted({f.index for f in rows}), before)
        for batch, future in waiting:
            future.set_result(len(batch))

    def _open(self) -> tuple[Any, int]:
        if self._db is None or self._run_id is None:
            self._db = store.open_index(self.index_path, busy_timeout=60.0)
            self._db.execute("PRAGMA synchronous = FULL")  # acknowledged means on disk, power loss included
            self._run_id = failures.start_run(
                self._db,
                spec=f"datalint serve: {self.name}",
                length=None,
                fingerprint=None,
                options={"source": "service"},
                environment={"host": socket.gethostname()},
            )
        return self._db, self._run_id

    def _write(self, rows: list[FailureRecord]) -> None:
        db, run_id = self._open()
        with store.transaction(db):
            failures.write(db.conn, run_id, rows)


def refusals_by_index(index_path: Path, failures: Sequence[tuple[int, FailureRecord]]) -> dict[int, str]:
    """Why each of these (position, failure) pairs cannot be a failure of the dataset the index holds:
    an index past its length, or a key that is not the one the scan found at that index."""
    if not index_path.is_file():
        return {}
    reasons: dict[int, str] = {}
    with read.reading(index_path) as connection:
        if not read.has_tables(connection):
            return {}  # the first failures are creating the index right now: nothing to check against
        run = store.latest_run(connection)
        length = run.length if run is not None else None
        if length is not None:
            for position, failure in failures:
                if failure.index >= length:
                    reasons[position] = (
                        f"index {failure.index} is past the end of the dataset ({length:,} samples when last "
                        "scanned): a failure of another dataset, or of a list made for another length"
                    )
        keyed = [(p, f) for p, f in failures if f.key is not None and p not in reasons]
        known = read.scanned_keys(connection, sorted({f.index for _, f in keyed}))
    for position, failure in keyed:
        expected = known.get(failure.index)
        if expected is not None and expected != failure.key:
            reasons[position] = (
                f"key {ascii(failure.key)[:300]} is not the key the scan found at index {failure.index} "
                f"({ascii(expected)[:300]}): the dataset's order differs from the one scanned; rescan it"
            )
    return reasons
