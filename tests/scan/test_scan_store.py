"""The index file: schema created once even by concurrent openers, versioned, resumable by ranges."""

from __future__ import annotations

import multiprocessing
import sqlite3

import pytest

from datalint.index import store


def _open_and_write(path: str, worker: int) -> None:
    db = store.open_index(path)
    with store.transaction(db):
        db["samples"].insert({"idx": worker, "status": "error", "error_type": "OSError"}, replace=True)
    db.close()


def test_concurrent_openers_create_the_schema_once(tmp_path) -> None:
    path = str(tmp_path / "shared.db")
    context = multiprocessing.get_context("fork")
    processes = [context.Process(target=_open_and_write, args=(path, n)) for n in range(4)]
    for process in processes:
        process.start()
    for process in processes:
        process.join(60)
    assert [p.exitcode for p in processes] == [0, 0, 0, 0]
    connection = sqlite3.connect(path)
    assert connection.execute("PRAGMA user_version").fetchone()[0] == store.SCHEMA_VERSION
    assert connection.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert sorted(r[0] for r in connection.execute("SELECT idx FROM samples")) == [0, 1, 2, 3]


def test_a_foreign_sqlite_file_is_refused(tmp_path) -> None:
    path = tmp_path / "other.db"
    sqlite3.connect(path).execute("CREATE TABLE invoices (id INTEGER)").connection.commit()
    with pytest.raises(store.IndexFileError, match="not a datalint index"):
        store.open_index(path)


def test_an_index_from_a_newer_datalint_is_refused(tmp_path) -> None:
    path = tmp_path / "newer.db"
    store.open_index(path).close()
    connection = sqlite3.connect(path)
    connection.execute("PRAGMA user_version = 99")
    connection.commit()
    connection.close()
    with pytest.raises(store.IndexFileError, match="schema version 99"):
        store.open_index(path)


def test_missing_ranges_are_the_gaps_scans_left(tmp_path) -> None:
    db = store.open_index(tmp_path / "gaps.db")
    run_id = store.start_run(
        db, kind="dataset", spec="m:ds", length=10, fingerprint=None, options={}, environment={}
    )
    writer = store.SampleWriter(db, run_id)
    writer.add({"idx": i, "status": "ok"} for i in (0, 1, 2, 5, 9))
    writer.flush()
    guard = store.start_run(
        db, kind="guard", spec="m:ds", length=10, fingerprint=None, options={}, environment={}
    )
    guard_writer = store.SampleWriter(db, guard)
    guard_writer.add([{"idx": 6, "status": "error"}])  # the training guard's row does not count as scanned
    guard_writer.flush()
    assert store.missing_ranges(db, 10) == [range(3, 5), range(6, 9)]
    assert store.count_samples(db) == 6 and store.count_samples(db, scanned_only=True) == 5
