"""What the report and the flight recorder ask of an index, asked of real SQLite files: the same answers
whatever the connection's row factory, tables with fewer columns read as far as they go, and the
crashed samples matched by the signal that killed a training's worker."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from datalint.index import crashes, read, report_queries, store
from datalint.report import read_index


def _scanned(path: Path) -> Path:
    """A scan's index: one sample of each outcome, the crash and the error also as findings."""
    db = store.open_index(path)
    try:
        run = store.start_run(
            db, kind="dataset", spec="m:ds", length=5, fingerprint=None, options={}, environment={"cpus": 2}
        )
        long = "x" * 5000  # a message longer than the page reads
        rows = [
            {"idx": 0, "key": "ok", "status": "ok", "duration": 0.5},
            {"idx": 1, "key": "segv", "status": "crash", "error_type": "SIGSEGV"},
            {"idx": 2, "key": "killed", "status": "crash", "error_type": "SIGKILL"},
            {"idx": 3, "key": "oom", "status": "error", "error_type": "MemoryError", "error_message": long},
            {"idx": 4, "key": b"\xff.jpg", "status": "timeout"},
        ]
        store.write_samples(db, [store.sample_values({**row, "run_id": run}) for row in rows])
        store.write_findings(
            db,
            [
                {"idx": 1, "kind": "crash", "detail": "SIGSEGV", "quarantine": 1},
                {"idx": 3, "kind": "error", "detail": "MemoryError", "quarantine": 1},
                {"idx": 0, "kind": "slow", "detail": "0.5 s", "quarantine": 0},
            ],
        )
    finally:
        db.close()
    return path


def test_the_flagged_samples_read_the_same_with_tuples_or_rows(tmp_path: Path) -> None:
    index = _scanned(tmp_path / "index.db")
    with read.reading(index) as plain:
        as_tuples = list(report_queries.flagged_samples(plain, True, 10))
        runs = list(report_queries.runs(plain))
    summary = read_index(index, max_rows=10, max_good_images=0)  # the report's connection gives Rows
    assert summary.flagged == tuple(as_tuples)
    assert summary.runs == tuple(runs) and runs[0].environment == {"cpus": 2}
    # quarantined first, then by index; the timeout has no finding yet and is listed by its status
    assert [(s.idx, s.kinds, s.quarantined) for s in as_tuples] == [
        (1, ("crash",), True), (2, ("crash",), True), (3, ("error",), True), (4, ("timeout",), True),
        (0, ("slow",), False),
    ]  # fmt: skip
    assert as_tuples[3].key == b"\xff.jpg".decode("utf-8", "surrogateescape")
    assert len(as_tuples[2].error_message or "") == report_queries.TEXT_READ_LIMIT  # 5,000 read as 2,000


def test_runs_and_flagged_samples_of_an_index_with_fewer_columns(tmp_path: Path) -> None:
    # a table without the columns later versions added: what is absent reads as empty
    index = tmp_path / "old.db"
    connection = sqlite3.connect(index)
    connection.executescript(
        "CREATE TABLE runs (id INTEGER PRIMARY KEY, kind TEXT, spec TEXT);"
        "CREATE TABLE samples (idx INTEGER PRIMARY KEY, key TEXT, status TEXT);"
        "INSERT INTO runs VALUES (1, NULL, 'm:ds');"
        "INSERT INTO samples VALUES (0, 'a', 'ok'), (1, 'b', 'crash');"
    )
    connection.commit()
    connection.close()
    connection = read.connect(index)  # as the report opens it
    (run,) = report_queries.runs(connection)
    (flagged,) = report_queries.flagged_samples(connection, False, 10)
    connection.close()
    assert (run.kind, run.spec, run.options, run.counts, run.finished) == ("dataset", "m:ds", {}, {}, None)
    assert (flagged.idx, flagged.kinds, flagged.duration, flagged.info) == (1, ("crash",), None, {})


def test_a_worker_killed_names_the_samples_killed_and_out_of_memory(tmp_path: Path) -> None:
    index = _scanned(tmp_path / "index.db")
    with read.reading(index) as connection:
        crashes.check_samples(connection)
        killed = crashes.crashed(connection, ("SIGKILL", "MemoryError"), 1)
        unseen = crashes.crashed(connection, None, 5)
    assert (killed.scanned, killed.count, killed.first) == (5, 2, ((2, "killed", "SIGKILL"),))
    assert [idx for idx, _key, _kind in unseen.first] == [1, 2]  # any crash, whatever the signal
