"""Isolation per sample: whatever one sample does to its process is an outcome for that sample only."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from scan_support import load_json, samples, spec

import datalint
from datalint.scan import api, runner
from datalint.scan.sources import SourceDescription

HERE = Path(__file__).resolve().parent

FAULTS = {
    3: "segfault",
    10: "abort",
    17: "exit",
    24: "sigkill",
    31: "error",
    32: "sys_exit",
    33: "keyboard_interrupt",
    40: "hang_c",
    47: "hang_py",
}
EXPECTED = {
    "segfault": ("crash", "SIGSEGV"),
    "abort": ("crash", "SIGABRT"),
    "exit": ("crash", "EXIT(3)"),
    "sigkill": ("crash", "SIGKILL"),
    "error": ("error", "ValueError"),
    "sys_exit": ("error", "SystemExit"),
    "keyboard_interrupt": ("error", "KeyboardInterrupt"),
    "hang_c": ("timeout", "Timeout"),
    "hang_py": ("timeout", "Timeout"),
}
LENGTH = 56


def faults_spec() -> str:
    plan = {}
    for index, fault in FAULTS.items():
        plan.setdefault(fault, []).append(index)
    arguments = ", ".join(f"{fault}={indices}" for fault, indices in sorted(plan.items()))
    return spec(f"faults.py:make(length={LENGTH}, {arguments})")


@pytest.fixture(scope="module")
def faulty_scan(tmp_path_factory: pytest.TempPathFactory) -> tuple[api.ScanSummary, Path]:
    db = tmp_path_factory.mktemp("isolation") / "faults.db"
    summary = datalint.scan(faults_spec(), db=db, workers=2, timeout=1.0)
    return summary, db


@pytest.mark.slow
def test_every_failure_mode_is_pinned_on_its_own_sample(faulty_scan) -> None:
    summary, db = faulty_scan
    rows = samples(db)
    assert sorted(rows) == list(range(LENGTH))  # exactly one row per sample, none lost, none doubled
    for index, row in rows.items():
        fault = FAULTS.get(index)
        status, error_type = EXPECTED[fault] if fault else ("ok", None)
        assert (row["status"], row["error_type"]) == (status, error_type), f"sample {index} ({fault})"
    assert summary.statuses == {"ok": 47, "error": 3, "crash": 4, "timeout": 2}


@pytest.mark.slow
def test_crashes_say_why_and_where(faulty_scan) -> None:
    _, db = faulty_scan
    rows = samples(db)
    assert "out of memory" in rows[24]["error_message"]
    assert "segmentation fault" in rows[3]["error_message"]
    assert "Fatal Python error: Segmentation fault" in rows[3]["traceback"]
    assert "faults.py" in rows[3]["info"] and "_segfault" in rows[3]["info"]
    assert "exited with status 3" in rows[17]["error_message"]
    # the hang in C with the GIL held: the stack was dumped from the stuck thread
    assert "_hang_c" in rows[40]["traceback"] and "faults.py" in rows[40]["error_message"]
    assert "ValueError: corrupt record" in rows[31]["traceback"]
    assert "sources.py" not in rows[31]["traceback"]  # datalint's own frames are not the user's problem


@pytest.mark.slow
def test_the_quarantine_list_holds_exactly_the_failed_samples(faulty_scan) -> None:
    summary, _ = faulty_scan
    document = load_json(summary.quarantine_path)
    assert [entry["index"] for entry in document["samples"]] == sorted(FAULTS)
    assert summary.exit_code == 1


def test_workers_zero_runs_in_process_and_says_it_isolates_nothing(tmp_path) -> None:
    summary = datalint.scan(spec("faults.py:make(length=6, error=[2])"), db=tmp_path / "a.db", workers=0)
    rows = samples(tmp_path / "a.db")
    assert {row["worker"] for row in rows.values()} == {os.getpid()}
    assert rows[2]["status"] == "error" and summary.quarantined == 1
    assert any("nothing isolated" in note for note in summary.notes)


def test_an_iterable_dataset_is_scanned_by_position(tmp_path) -> None:
    summary = datalint.scan(spec("streams.py:clean"), db=tmp_path / "s.db", workers=2)
    assert summary.length == 20 and summary.statuses["ok"] == 20
    assert [entry.index for entry in summary.worst] == [5]  # the NaN at position 5


def test_a_stream_that_crashes_ends_at_the_crash(tmp_path) -> None:
    summary = datalint.scan(spec("streams.py:crashing"), db=tmp_path / "s.db", workers=1)
    rows = samples(tmp_path / "s.db")
    assert sorted(rows) == list(range(8))
    assert rows[7]["status"] == "crash" and rows[7]["error_type"] == "SIGSEGV"
    assert summary.length == 8


def test_a_sample_that_finishes_after_the_timeout_is_a_timeout(tmp_path) -> None:
    datalint.scan(spec("faults.py:make(length=4, slow=[1])"), db=tmp_path / "t.db", workers=1, timeout=0.3)
    rows = samples(tmp_path / "t.db")
    assert rows[1]["status"] == "timeout"
    assert [rows[i]["status"] for i in (0, 2, 3)] == ["ok", "ok", "ok"]


def test_truncated_images_are_not_silently_accepted(tmp_path) -> None:
    from PIL import ImageFile

    ImageFile.LOAD_TRUNCATED_IMAGES = True
    try:
        with pytest.warns(UserWarning, match="LOAD_TRUNCATED_IMAGES was True"):
            datalint.scan(spec("faults.py:make(length=2)"), db=tmp_path / "p.db", workers=1)
        assert ImageFile.LOAD_TRUNCATED_IMAGES is False
    finally:
        ImageFile.LOAD_TRUNCATED_IMAGES = False


def _count_with_one_cpu(queue) -> None:
    from datalint.host.cpus import effective_cpu_count

    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    queue.put(effective_cpu_count())


def test_the_default_worker_count_follows_the_cpu_affinity_not_cpu_count() -> None:
    import multiprocessing

    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_count_with_one_cpu, args=(queue,))
    child.start()
    assert queue.get(timeout=30) == 1
    child.join(30)
    assert api.ScanOptions().worker_count() <= len(os.sched_getaffinity(0))


def test_a_worker_that_dies_just_before_it_is_handed_a_chunk_costs_only_its_own_sample(tmp_path) -> None:
    # dying_worker.py orders the race deterministically: the engine writes a chunk to the pipe of a
    # worker that died (in sample 1) after it was last seen alive. The failed send is that worker's
    # death: sample 1 is its crash, and the chunk goes to the replacement worker.
    import dying_worker

    dataset = f"{HERE / 'dying_worker.py'}:make(6, {str(tmp_path)!r})"
    description = SourceDescription.make("dataset", dataset)
    options = runner.RunnerOptions(workers=1, chunk_size=1, timeout=30)
    rows: dict[int, dict] = {}
    for batch in runner.run(description, iter(range(6)), 6, options):
        rows.update((row["idx"], row) for row in batch)
        dying_worker.stage_the_race(str(tmp_path), batch)
    assert (tmp_path / "parent-waiting").exists()  # the race really was staged
    assert sorted(rows) == list(range(6))
    assert (rows[1]["status"], rows[1]["error_type"]) == ("crash", "EXIT(3)")
    assert all(rows[i]["status"] == "ok" for i in (0, 2, 3, 4, 5))
    assert rows[2]["key"] == "sample-2" and rows[2]["worker"] != rows[0]["worker"]  # the replacement
