"""Shards are the unit of work: every shard's samples are measured by one worker, on both engines."""

from __future__ import annotations

import sqlite3
from collections import defaultdict
from pathlib import Path

import pytest

import datalint
from datalint.scan.shards import split_by_shard
from datalint.scan.webdataset import webdataset_description
from tests.shards.shard_support import good_sample, write_shard

SHARDS, PER_SHARD = 4, 6


def test_the_split_cuts_a_todo_at_shard_starts_and_keeps_its_order() -> None:
    starts = (0, 3, 7)
    assert list(split_by_shard(range(10), starts)) == [[0, 1, 2], [3, 4, 5, 6], [7, 8, 9]]
    # A resumed scan's todo has holes; a shard with nothing left to do is not handed out at all.
    assert list(split_by_shard([1, 2, 8, 9], starts)) == [[1, 2], [8, 9]]
    assert list(split_by_shard([], starts)) == []


def workers_by_shard(db: Path) -> dict[str, set[int]]:
    found: dict[str, set[int]] = defaultdict(set)
    with sqlite3.connect(db) as connection:
        for key, worker in connection.execute("SELECT key, worker FROM samples"):
            found[key.split("/")[0]].add(worker)
    return found


def scan_shards(tmp_path: Path, **options: object) -> dict[str, set[int]]:
    for shard in range(SHARDS):
        samples = [good_sample(f"s{n:04d}", shard * PER_SHARD + n) for n in range(PER_SHARD)]
        write_shard(tmp_path / f"part-{shard:03d}.tar", samples)
    db = tmp_path / "index.db"
    description = webdataset_description(str(tmp_path / "part-*.tar"))
    summary = datalint.scan(description, db=db, workers=2, **options)  # type: ignore[arg-type]
    assert summary.statuses["ok"] == SHARDS * PER_SHARD == sum(summary.statuses.values())
    return workers_by_shard(db)


def test_the_local_engine_hands_each_worker_whole_shards(tmp_path: Path) -> None:
    # Chunks sized by samples (4 at first, fewer near the end) would split shards of 6 between workers.
    found = scan_shards(tmp_path)
    assert sorted(found) == [f"part-{shard:03d}.tar" for shard in range(SHARDS)]
    assert all(len(workers) == 1 for workers in found.values()), found


@pytest.mark.slow
def test_the_dask_backend_runs_one_task_per_shard(tmp_path: Path) -> None:
    found = scan_shards(tmp_path, backend="dask")
    assert len(found) == SHARDS
    assert all(len(workers) == 1 for workers in found.values()), found
