"""GuardedDataset: failing samples are recorded once, replaced, and a flood of them stops the job."""

from __future__ import annotations

import gc
import json
import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest
import torch
from torch.utils.data import DataLoader, SequentialSampler
from torch_test_data import DeadDiskDataset, FlakyDataset, FolderLikeDataset, IndexDataset, seen_indices

from datalint.torch import (
    GuardedDataset,
    GuardTrippedError,
    Quarantine,
    QuarantineSampler,
    SkippedSample,
    guarded_collate,
    load_quarantine,
)
from datalint.training.record import RecordError

BAD = {3, 10, 11, 40}


def _rows(path: Path, sql: str) -> list[tuple[Any, ...]]:
    with sqlite3.connect(path) as connection:
        return connection.execute(sql).fetchall()


def _loader(dataset: GuardedDataset, context: str = "fork", **options: Any) -> DataLoader[torch.Tensor]:
    return DataLoader(dataset, batch_size=8, num_workers=2, multiprocessing_context=context, **options)


@pytest.mark.parametrize("context", ["fork", pytest.param("spawn", marks=pytest.mark.slow)])
def test_failures_from_workers_are_recorded_once_and_batches_keep_their_size(
    tmp_path: Path, context: str
) -> None:
    # Also the spawn test of QuarantineSampler: starting torch in spawned workers is the slow part.
    record, quarantined = tmp_path / "scan.db", {5, 6, 50}
    guarded = GuardedDataset(FlakyDataset(72, BAD), record=record)
    sampler = QuarantineSampler(guarded, Quarantine.from_indices(quarantined, length=72), shuffle=True)
    loader = _loader(guarded, context, sampler=sampler, persistent_workers=True)
    for _ in range(2):  # the second epoch fails on the same samples again
        batches = list(loader)
        assert [len(batch) for batch in batches] == [8] * 8 + [5]  # 69 samples: nothing lost to failures
        assert not set(seen_indices(batches)) & (BAD | quarantined)
    rows = _rows(record, "SELECT idx, status, error_type, error_message, traceback, worker FROM samples")
    assert sorted(row[0] for row in rows) == sorted(BAD)  # every failure, exactly once
    for idx, status, error_type, message, trace, worker in rows:
        assert (status, error_type) == ("error", "OSError")
        assert message == f"image file is truncated (sample {idx})" and "torch_test_data.py" in str(trace)
        assert worker != os.getpid()  # written by the worker that hit it
    assert _rows(record, "SELECT kind, counts FROM runs") == [("guard", json.dumps({"error": 4}))]
    assert load_quarantine(record).indices.tolist() == sorted(BAD)  # `datalint quarantine` sees them


def test_substitute_is_the_next_sample_that_loads_and_skips_quarantined_ones() -> None:
    quarantine = Quarantine.from_indices([4], length=10)
    guarded = GuardedDataset(FlakyDataset(10, {2, 3, 9}), quarantine=quarantine)
    assert int(guarded[2]) == 5  # 3 fails too and 4 is quarantined
    assert int(guarded[9]) == 0  # wraps around
    assert [failure.index for failure in guarded.failures] == [2, 3, 9]


def test_skip_returns_a_marker_that_guarded_collate_drops() -> None:
    guarded = GuardedDataset(FlakyDataset(12, {1, 2, 7}), on_error="skip")
    assert guarded[1] == SkippedSample(1, "OSError")
    loader = DataLoader(guarded, batch_size=4, collate_fn=guarded_collate)
    assert [batch.tolist() for batch in loader] == [[0, 3], [4, 5, 6], [8, 9, 10, 11]]
    assert guarded_collate([SkippedSample(1, "OSError")]) is None


def test_raise_records_then_raises_the_original_error(tmp_path: Path) -> None:
    record = tmp_path / "scan.db"
    loader = DataLoader(GuardedDataset(FlakyDataset(8, {5}), record=record, on_error="raise"), batch_size=4)
    with pytest.raises(OSError, match=r"image file is truncated \(sample 5\)"):
        list(loader)
    assert _rows(record, "SELECT idx FROM samples") == [(5,)]


def test_max_failures_turns_a_dead_disk_into_a_clear_error(tmp_path: Path) -> None:
    record = tmp_path / "scan.db"
    guarded = GuardedDataset(DeadDiskDataset(200), record=record, max_failures=5)
    batches = iter(_loader(guarded))
    with pytest.raises(GuardTrippedError, match=r"more than max_failures=5: the data source itself looks"):
        list(batches)
    # The interrupted iterator sits in a reference cycle with the traceback. Stop its workers now
    # (left to the garbage collector this takes seconds of join timeouts) and collect it: collected
    # later inside another test's forked worker, its __del__ would import in the middle of an
    # import there and kill that worker (CPython 3.11 import-lock bookkeeping).
    batches._shutdown_workers()  # type: ignore[attr-defined]
    gc.collect()
    recorded = len(_rows(record, "SELECT idx FROM samples"))
    assert 6 <= recorded <= 2 * 6  # each worker stops at its sixth failure, of 200 samples


def test_without_max_failures_a_dataset_where_nothing_loads_still_stops() -> None:
    guarded = GuardedDataset(DeadDiskDataset(6), max_failures=None)
    with pytest.raises(GuardTrippedError, match="no sample of the DeadDiskDataset loads"):
        guarded[2]
    with pytest.raises(GuardTrippedError):  # and from then on without trying every sample again
        guarded[3]
    assert len(guarded.failures) == 6


@pytest.mark.filterwarnings("ignore:This DataLoader will create 4 worker processes")
def test_many_workers_writing_at_once_lose_no_row(tmp_path: Path) -> None:
    record = tmp_path / "scan.db"
    bad = set(range(0, 240, 3))  # 80 failures spread over every batch
    guarded = GuardedDataset(FlakyDataset(240, bad), record=record, max_failures=None)
    loader = DataLoader(guarded, batch_size=4, num_workers=4, multiprocessing_context="fork")
    assert all(len(batch) == 4 for batch in loader)
    rows = _rows(record, "SELECT idx, worker FROM samples")
    assert sorted(idx for idx, _ in rows) == sorted(bad)
    assert len({worker for _, worker in rows}) > 1  # really written from several processes
    assert _rows(record, "SELECT count(*) FROM findings WHERE kind = 'error' AND quarantine = 1") == [(80,)]


def test_record_names_the_sample_by_key(tmp_path: Path) -> None:
    record = tmp_path / "scan.db"
    guarded = GuardedDataset(FolderLikeDataset(["a.jpg", "b.jpg", "c.jpg"], bad={"b.jpg"}), record=record)
    assert [int(guarded[i]) for i in range(3)] == [0, 2, 2]
    assert _rows(record, "SELECT idx, key FROM samples") == [(1, "b.jpg")]


def test_guard_with_quarantine_sampler_sees_neither_quarantined_nor_failing_samples(tmp_path: Path) -> None:
    dataset = FlakyDataset(50, {20, 21})
    quarantine = Quarantine.from_indices([7, 22], length=50)
    guarded = GuardedDataset(dataset, record=tmp_path / "scan.db", quarantine=quarantine)
    sampler = QuarantineSampler(guarded, quarantine, shuffle=True)
    seen = seen_indices(DataLoader(guarded, batch_size=6, sampler=sampler))
    assert len(seen) == 48 and not set(seen) & {7, 20, 21, 22}


def test_record_file_of_another_schema_version_is_refused(tmp_path: Path) -> None:
    record = tmp_path / "scan.db"
    with sqlite3.connect(record) as connection:
        connection.execute("PRAGMA user_version = 7")
    with pytest.raises(RecordError, match="index schema version 7"):
        GuardedDataset(IndexDataset(3), record=record)


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="on_error must be one of 'substitute', 'skip', 'raise'"):
        GuardedDataset(IndexDataset(3), on_error="ignore")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_failures"):
        GuardedDataset(IndexDataset(3), max_failures=-1)


def test_plain_dataset_behaviour_is_unchanged() -> None:
    guarded = GuardedDataset(IndexDataset(5))
    assert len(guarded) == 5
    assert [int(x) for x in DataLoader(guarded, sampler=SequentialSampler(guarded))] == list(range(5))
    assert guarded.failures == ()


GUARDED_TRAINING = """
import os, sys
from torch.utils.data import DataLoader
from torch_test_data import FlakyDataset
from datalint.torch import GuardedDataset

guarded = GuardedDataset(FlakyDataset(24, bad=[5]), record=sys.argv[1])
for _ in DataLoader(guarded, batch_size=8, num_workers=2, multiprocessing_context="fork"):
    pass
if sys.argv[2] == "killed":
    os._exit(9)  # as SIGKILL or the OOM killer would end it: no exit handlers run
"""


@pytest.mark.parametrize(
    ("ending", "finished"), [("normal", True), pytest.param("killed", False, marks=pytest.mark.slow)]
)
def test_the_guard_run_is_finished_when_the_training_process_ends_normally(
    tmp_path: Path, ending: str, finished: bool
) -> None:
    import subprocess
    import sys

    record = tmp_path / "guard.db"
    done = subprocess.run(
        [sys.executable, "-c", GUARDED_TRAINING, str(record), ending],
        cwd=Path(__file__).parent,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parent), *sys.path])},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == (0 if finished else 9), done.stderr
    ((kind, started, ended, counts),) = _rows(record, "SELECT kind, started, finished, counts FROM runs")
    assert kind == "guard" and json.loads(counts) == {"error": 1}
    assert (ended is not None) == finished
    if finished:
        assert ended >= started
