"""The incremental scan's questions, asked of a real index file through datalint/index/changes.py and
groups.py alone: what was added, changed, removed and moved since the index, and what the index
keeps of a removed sample and of the near-duplicate groups."""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path
from typing import Any

from datalint.index import changes, groups, read, store


def _scanned(path: Path) -> tuple[Any, int]:
    """An index a scan of four files (a, b, c, d) left: b truncated, a blurry, every state recorded."""
    db = store.open_index(path)
    run = store.start_run(
        db, kind="scan", spec="images", length=4, fingerprint=None, options={}, environment={}
    )
    store.write_samples(
        db,
        [
            store.sample_values({"idx": idx, "key": key, "status": "ok", "run_id": run})
            for idx, key in enumerate("abcd")
        ],
    )
    store.write_findings(
        db,
        [
            {"idx": 0, "kind": "blurry", "detail": "sharpness 0.01", "quarantine": 0},
            {"idx": 1, "kind": "truncated", "detail": "image file is truncated", "quarantine": 1},
        ],
    )
    changes.create_current(db)
    changes.add_current(db, [(key, pos, 100, 7, pos + 10, 7, None, 1) for pos, key in enumerate("abcd")])
    changes.record_files(db, run)
    return db, run


def test_a_new_file_a_rewritten_one_a_deleted_one_and_a_shifted_one_are_told_apart(tmp_path: Path) -> None:
    db, _ = _scanned(tmp_path / "index.db")
    # x sorts first (a moves to position 1), b is gone, d was rewritten in place (same inode, new size)
    changes.create_current(db)
    current = [("x", 0, 50, 9, 20), ("a", 1, 100, 7, 10), ("c", 2, 100, 7, 12), ("d", 3, 120, 8, 13)]
    changes.add_current(
        db, [(key, pos, size, mtime, inode, mtime, None, 1) for key, pos, size, mtime, inode in current]
    )

    assert changes.added(db) == [0]
    assert changes.changed(db) == [3]
    assert changes.removed_count(db) == 1
    assert changes.moved_count(db) == 1


def test_a_removed_sample_leaves_its_findings_in_its_history_and_a_moved_one_keeps_its_row(
    tmp_path: Path,
) -> None:
    """Keys are identity: a sample that moved keeps its row and findings as they are; its position
    now comes from the order the index stores, which also names the row the added sample will take."""
    path = tmp_path / "index.db"
    db, first = _scanned(path)
    changes.create_current(db)
    changes.add_current(db, [(key, pos, 100, 7, 10, 7, None, 1) for pos, key in enumerate("xacd")])
    later = store.start_run(
        db, kind="scan", spec="images", length=4, fingerprint=None, options={}, environment={}
    )
    forgotten: list[str] = []

    order = changes.apply(db, later, lambda connection, where: forgotten.append(where))

    assert list(order.ids or ()) == [4, 0, 2, 3]  # x, not measured yet, takes the next free row id
    with sqlite3.connect(path) as connection:
        history = connection.execute(
            "SELECT key, idx, kinds, measured_run, left_run, reason FROM sample_history"
        )
        assert history.fetchall() == [("b", 1, "truncated", first, later, "removed")]
        assert dict(connection.execute("SELECT idx, key FROM samples")) == {0: "a", 2: "c", 3: "d"}
        assert connection.execute("SELECT idx, kind FROM findings").fetchall() == [(0, "blurry")]
        assert connection.execute("SELECT key FROM sample_files ORDER BY key").fetchall() == [
            ("a",),
            ("c",),
            ("d",),
        ]
    with contextlib.closing(read.connect(path)) as connection:
        placed = connection.execute("SELECT key, position_of(idx) FROM samples ORDER BY key").fetchall()
        assert placed == [("a", 1), ("c", 2), ("d", 3)]
    assert len(forgotten) == 1  # the population summary is told which rows leave, before they do


def test_compacting_gives_each_row_its_position_with_its_findings(tmp_path: Path) -> None:
    """A path that addresses rows by position (a scan resumed by position, shard files) first makes
    every row's idx its position again, findings along."""
    path = tmp_path / "index.db"
    db, _ = _scanned(path)
    changes.create_current(db)
    changes.add_current(db, [(key, pos, 100, 7, 10, 7, None, 1) for pos, key in enumerate("xacd")])
    later = store.start_run(
        db, kind="scan", spec="images", length=4, fingerprint=None, options={}, environment={}
    )
    changes.apply(db, later, lambda connection, where: None)

    changes.compact(db)

    with contextlib.closing(read.connect(path)) as connection:
        assert dict(connection.execute("SELECT idx, key FROM samples")) == {1: "a", 2: "c", 3: "d"}
        assert connection.execute("SELECT idx, kind FROM findings").fetchall() == [(1, "blurry")]
        assert connection.execute("SELECT count(*) FROM sample_order").fetchone() == (0,)
        assert connection.execute("SELECT position_of(idx) FROM samples ORDER BY idx").fetchall() == [
            (1,), (2,), (3,)
        ]


def test_stored_groups_are_read_back_only_for_the_radius_they_were_found_with(tmp_path: Path) -> None:
    db = store.open_index(tmp_path / "index.db")
    assert groups.stored(db, 4) is None  # never stored
    groups.store_all(db, [("a", "ff00", 0), ("b", "ff01", 0), ("c", "0f0f", 2)], 4)
    groups.store_changes(db, [("b",)], [("c", "0f0f", 0)])

    assert groups.stored(db, 4) == {"a": ("ff00", 0), "c": ("0f0f", 0)}
    assert groups.stored(db, 6) is None  # another radius: found from scratch
