"""Per-shard index files merged into one: equal to the index one writer made of the same scan."""

from __future__ import annotations

import contextlib
import itertools
import sqlite3
from pathlib import Path

import pytest

from datalint.index import store
from datalint.index.shards import ShardMergeError, merge_shard_indexes
from tests.scan.scan_support import run_cli, spec


def table(db: Path, sql: str) -> list[tuple[object, ...]]:
    with contextlib.closing(sqlite3.connect(db)) as connection:
        return connection.execute(sql).fetchall()


@pytest.fixture(scope="module")
def single_writer(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("merge") / "single.db"
    code, _, err = run_cli(
        "scan", "--dataset", spec("demo.py:demo"), "--label", "label", "--num-classes", "10", "--db", str(db)
    )
    assert code == 1, err
    return db


def split_into_shards(source: Path, folder: Path, bounds: list[int]) -> list[Path]:
    """The scan's rows written into one index file per idx range, as per-shard writers would."""
    columns = ", ".join(store.SAMPLE_COLUMNS)
    shards = []
    for first, last in itertools.pairwise(bounds):
        path = folder / f"{first:06d}-{last - 1:06d}.db"
        db = store.open_index(path)
        store.write_samples(
            db, table(source, f"SELECT {columns} FROM samples WHERE idx >= {first} AND idx < {last}")
        )
        with store.transaction(db):
            db.conn.executemany(
                "INSERT INTO findings VALUES (?, ?, ?, ?)",
                table(source, f"SELECT * FROM findings WHERE idx >= {first} AND idx < {last}"),
            )
        db.conn.close()
        shards.append(path)
    return shards


def test_the_merged_index_equals_the_single_writer_index(single_writer: Path, tmp_path: Path) -> None:
    shards = split_into_shards(single_writer, tmp_path, [0, 150, 151, 290, 400])
    merged = tmp_path / "merged.db"
    result = merge_shard_indexes(merged, list(reversed(shards)), run_id=1, batch=3)  # order must not matter
    assert (result.shards, result.samples) == (4, 400)
    everything = "SELECT * FROM samples ORDER BY idx"
    assert table(merged, everything) == table(single_writer, everything)
    assert table(merged, "SELECT * FROM findings ORDER BY idx, kind") == table(
        single_writer, "SELECT * FROM findings ORDER BY idx, kind"
    )
    indexes = {row[0] for row in table(merged, "SELECT name FROM sqlite_master WHERE type = 'index'")}
    assert {"idx_samples_status", "idx_samples_key", "idx_findings_kind"} <= indexes


def test_a_sample_in_two_shard_indexes_fails_the_merge(single_writer: Path, tmp_path: Path) -> None:
    shards = split_into_shards(single_writer, tmp_path, [0, 200, 400])
    (tmp_path / "again").mkdir()
    overlapping = split_into_shards(single_writer, tmp_path / "again", [190, 210])
    with pytest.raises(ShardMergeError, match="in another shard index too"):
        merge_shard_indexes(tmp_path / "merged.db", [*shards, *overlapping], run_id=1)
