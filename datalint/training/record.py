"""The guard's record: failures at training time, written into a scan index (`datalint docs index`).

The index is opened through the scan's store (`datalint.index.store`), so the schema lives in one
place. Several DataLoader workers write at once, each through its own short-lived connection (never
one opened before a fork). `BEGIN IMMEDIATE` takes the write lock before anything is read, so a busy
database makes a writer wait its turn (the busy timeout) instead of failing with "database is
locked"; each failure is one transaction, so none is half written or lost.
"""

from __future__ import annotations

import atexit
import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from datalint.errors import DatalintError
from datalint.index import failures, store
from datalint.index.failures import FailureRecord

# Long enough to outlast any other writer's single-row transaction, even on a loaded machine.
BUSY_TIMEOUT_S = 60.0
utc_now = store.utc_now
logger = logging.getLogger("datalint.torch")  # where the guard says what it could not record


class RecordError(DatalintError):
    """The guard's record file cannot be used as a scan index."""


# The guard's failure is the index's one failure record.
Failure = FailureRecord


@contextmanager
def _opened(path: Path) -> Iterator[Any]:
    """The index at `path` (created if absent) as a sqlite-utils Database, for one short piece of work."""
    try:
        db = store.open_index(path, busy_timeout=BUSY_TIMEOUT_S)
    except store.IndexFileError as exc:
        raise RecordError(f"cannot record guard failures: {exc}") from None
    try:
        yield db
    finally:
        db.close()


def start_guard_run(
    path: str | os.PathLike[str],
    *,
    spec: str,
    length: int,
    fingerprint: str | None,
    options: dict[str, Any],
    environment: dict[str, Any],
) -> int:
    """Open (or create) the index at `path` and add the `guard` run that failures will point to."""
    with _opened(Path(path)) as db:
        run_id = failures.start_run(
            db, spec=spec, length=length, fingerprint=fingerprint, options=options, environment=environment
        )
    # The run ends with the process that started it; a process killed (or ended by os._exit) leaves
    # it unfinished, which is what a report should then say.
    atexit.register(_finish_at_exit, Path(path), run_id, os.getpid())
    return run_id


def finish_guard_run(path: str | os.PathLike[str], run_id: int) -> None:
    """Mark the guard run finished (its counts are kept current by each recorded failure)."""
    with _opened(Path(path)) as db:
        failures.finish_run(db, run_id)


def _finish_at_exit(path: Path, run_id: int, pid: int) -> None:
    if os.getpid() != pid:  # a forked DataLoader worker inherits the handler; the run is not its own
        return
    if not path.is_file():  # removed since (a temporary record): nothing to finish, nothing to recreate
        return
    try:
        finish_guard_run(path, run_id)
    except Exception as exc:  # at exit: say what was not written, never a traceback
        logger.warning("datalint guard: could not mark run %d finished in %s: %s", run_id, path, exc)


def record_failure(path: str | os.PathLike[str], run_id: int, failure: Failure) -> None:
    """Write one failure (the samples row, its `error` finding, the kept failure, the run's count),
    atomically."""
    with _opened(Path(path)) as db, store.transaction(db):
        failures.write(db.conn, run_id, [failure])
