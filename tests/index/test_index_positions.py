"""Keys are identity, positions are derived: the order an incremental scan stores, read back by every
reader of a real index file, and the training guard's failures landing on the row of their key."""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from datalint.index import changes, failures, positions, quarantine, read, store


def _moved(path: Path) -> Any:
    """An index of a, b, c, d whose source then became x, a, c, d (x inserted first, b removed)."""
    db = store.open_index(path)
    run = store.start_run(db, kind="images", spec="f", length=4, fingerprint=None, options={}, environment={})
    rows = [{"idx": idx, "key": key, "status": "ok", "run_id": run} for idx, key in enumerate("abcd")]
    store.write_samples(db, [store.sample_values(row) for row in rows])
    store.write_findings(db, [{"idx": 3, "kind": "corrupt", "detail": "truncated", "quarantine": 1}])
    changes.create_current(db)
    changes.add_current(db, [(key, pos, None, None, None, None, None, 1) for pos, key in enumerate("xacd")])
    changes.apply(db, store.start_run(db, kind="images", spec="f", length=4, fingerprint=None, options={},
                                      environment={}), lambda connection, where: None)  # fmt: skip
    return db


def test_the_order_survives_reopening_and_every_reader_gives_positions(tmp_path: Path) -> None:
    path = tmp_path / "index.db"
    _moved(path).close()
    with contextlib.closing(read.connect(path)) as connection:
        order = positions.read(connection)
        assert [order.position(row) for row in (4, 0, 2, 3)] == [0, 1, 2, 3]
        assert [order.id_at(position) for position in range(4)] == [4, 0, 2, 3]
        assert order.id_at(4) is None and order.position(1) is None  # b's row is gone
        listed = [(entry.index, entry.key) for entry in quarantine.entries(connection)]
        assert listed == [(3, "d")]
        assert connection.execute("SELECT row_at(1), position_of(0)").fetchone() == (0, 1)


def test_a_reader_kept_open_sees_the_order_a_scan_stores_later(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(positions, "_RECHECK_S", 0.0)
    path = tmp_path / "index.db"
    db = store.open_index(path)
    rows = [{"idx": idx, "key": key, "status": "ok"} for idx, key in enumerate("ab")]
    store.write_samples(db, [store.sample_values(row) for row in rows])
    with contextlib.closing(read.connect(path)) as reader:
        assert reader.execute("SELECT position_of(1)").fetchone() == (1,)
        with store.transaction(db):
            positions.write(db.conn, positions.Positions(positions.array.array("q", [1, 0])))
        assert reader.execute("SELECT position_of(1)").fetchone() == (0,)


def test_a_training_failure_after_samples_moved_lands_on_the_row_of_its_key(tmp_path: Path) -> None:
    """The guard says where a sample is (position 3: d); the index knows d's row by its key (row 3
    here, where a scan keyed by position would have written row 3 = position 3 only by chance), and a
    failure of a key the index has no row of takes a row of its own, not another sample's."""
    path = tmp_path / "index.db"
    db = _moved(path)
    run = failures.start_run(db, spec="f", length=4, fingerprint=None, options={}, environment={})
    with store.transaction(db):
        failures.write(db.conn, run, [
            failures.FailureRecord(index=1, key="a", error_type="OSError", message="read failed"),
            failures.FailureRecord(index=0, key="x", error_type="OSError", message="gone"),
        ])  # fmt: skip
    with contextlib.closing(read.connect(path)) as connection:
        rows = dict(connection.execute("SELECT key, idx FROM samples WHERE status = 'error'"))
        assert rows["a"] == 0  # a's own row, at position 1
        assert rows["x"] == 4  # the row the order holds for x at position 0
        listed = [(entry.index, entry.key) for entry in quarantine.entries(connection)]
        assert listed == [(0, "x"), (1, "a"), (3, "d")]
    db.close()


def test_an_index_from_before_stored_orders_reads_every_position_as_its_row(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with contextlib.closing(sqlite3.connect(path)) as connection:
        connection.execute("CREATE TABLE samples (idx INTEGER PRIMARY KEY, key TEXT)")
        connection.execute("INSERT INTO samples VALUES (7, 'a')")
        connection.commit()
    with contextlib.closing(read.connect(path)) as connection:
        assert positions.read(connection).identity
        assert connection.execute("SELECT position_of(idx) FROM samples").fetchone() == (7,)


def test_open_index_gives_each_sample_its_position_as_idx(tmp_path: Path) -> None:
    import datalint

    path = tmp_path / "index.db"
    _moved(path).close()
    with datalint.open_index(path, as_frames=False) as index:
        samples = [(row["idx"], row["key"]) for row in index.samples()]
        found = [(row["idx"], row["key"], row["kind"]) for row in index.findings()]
    assert samples == [(1, "a"), (2, "c"), (3, "d")]  # a's row is 0; x, at 0, is not measured yet
    assert found == [(3, "d", "corrupt")]


def test_a_scan_resumed_or_appended_to_keeps_every_position_as_its_row(tmp_path: Path) -> None:
    """Samples with no row yet (a scan killed half-way, whose workers finished a and c but not b;
    a file appended, d) take their positions as row ids: nothing moved, so no order is stored."""
    db = store.open_index(tmp_path / "index.db")
    run = store.start_run(db, kind="images", spec="f", length=4, fingerprint=None, options={}, environment={})
    store.write_samples(
        db,
        [
            store.sample_values({"idx": i, "key": k, "status": "ok", "run_id": run})
            for i, k in [(0, "a"), (2, "c")]
        ],
    )
    changes.create_current(db)
    changes.add_current(db, [(key, pos, None, None, None, None, None, 1) for pos, key in enumerate("abcd")])

    order = changes.apply(db, run, lambda connection, where: None)

    assert order.identity and positions.read(db.conn).identity
    db.close()


def test_a_damaged_order_is_named_when_the_index_is_opened_and_a_rescan_mends_it(tmp_path: Path) -> None:
    path = tmp_path / "index.db"
    db = _moved(path)
    with store.transaction(db):
        db.conn.execute("UPDATE sample_order SET ids = x'010203'")  # not whole 64-bit ids
    with pytest.raises(store.IndexFileError, match=r"sample order .* is damaged.*--rescan"):
        read.open_index(path)

    store.clear_samples(db)  # what `datalint scan --rescan` does first

    read.open_index(path).close()
    db.close()
