"""The sample in flight: a DataLoader worker that dies mid-sample under `datalint run` is named with
the sample it was reading, when the training wraps its dataset in `GuardedDataset`."""

from __future__ import annotations

import os
import re
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from datalint.flight import inflight
from datalint.flight.diagnosis import diagnose
from datalint.flight.exits import ExitWatcher

ROOT = Path(__file__).resolve().parents[2]

# Two loaders in one run: in the first, sample 37 segfaults its worker; in the second, sample 53 is
# SIGKILLed, as the OOM killer kills the worker whose sample allocates. Each dying sample says which
# worker (by torch's number) and pid it is, so the test can hold the diagnosis against it.
TRAIN = textwrap.dedent(
    """
    import os, signal, sys, time
    import torch
    from torch.utils.data import DataLoader, Dataset, get_worker_info
    from datalint.torch import GuardedDataset

    class Images(Dataset):
        def __init__(self, deadly, how):
            self.samples = [(f"img/{i:04d}.png", 0) for i in range(400)]
            self.deadly, self.how = deadly, how
        def __len__(self):
            return len(self.samples)
        def __getitem__(self, i):
            time.sleep(0.002)
            if i == self.deadly:
                print(f"dying: worker {get_worker_info().id} pid {os.getpid()} sample {i}", flush=True)
                os.kill(os.getpid(), self.how)
                time.sleep(5)
            return torch.zeros(8)

    if __name__ == "__main__":
        for deadly, how in ((37, signal.SIGSEGV), (53, signal.SIGKILL)):
            loader = DataLoader(GuardedDataset(Images(deadly, how)), batch_size=4, num_workers=2)
            try:
                for batch in loader:
                    pass
            # A loaded machine can break the batch's fd handover first (EOFError, ConnectionError)
            # rather than let torch raise the worker's death: either way, on to the next loader.
            except (RuntimeError, EOFError, ConnectionError) as exc:
                print(f"loader failed: {exc!r}", file=sys.stderr, flush=True)
        sys.exit(1)
    """
)

MAIN = textwrap.dedent(
    """
    import os, signal
    import torch
    from datalint.torch import GuardedDataset

    class Tiny(torch.utils.data.Dataset):
        def __len__(self):
            return 10
        def datalint_key(self, i):
            return f"shard-0/{i}"
        def __getitem__(self, i):
            if i == 6:
                os.kill(os.getpid(), signal.SIGABRT)
            return i

    guarded = GuardedDataset(Tiny())
    for i in range(10):
        guarded[i]
    """
)


def _datalint_run(tmp_path: Path, script: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "train.py").write_text(script)
    return subprocess.run(
        [sys.executable, "-m", "datalint", "run", "--record", str(tmp_path / "run.db"), "--",
         sys.executable, "train.py"],
        capture_output=True, text=True, timeout=180, cwd=tmp_path, check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


@pytest.mark.slow
def test_a_worker_dying_mid_sample_is_named_with_the_sample_it_was_reading(tmp_path: Path) -> None:
    done = _datalint_run(tmp_path, TRAIN)

    assert done.returncode == 1, done.stderr
    dying = re.findall(r"dying: worker (\d+) pid (\d+) sample (\d+)", done.stdout)
    assert [sample for _, _, sample in dying] == ["37", "53"], done.stdout + done.stderr[-3000:]
    # torch's own errors name the dead workers' pids: each it names is one a sample killed. On a
    # loaded machine the main can read the killed worker's broken pipe before torch's check of its
    # workers, and that loader then fails with the pipe's ConnectionResetError, naming no pid.
    named = re.findall(r"DataLoader worker \(pid(?:\(s\))? ([\d, ]+)\)", done.stderr)
    named_pids = {pid.strip() for pids in named for pid in pids.split(",")}
    assert named_pids and named_pids <= {pid for _, pid, _ in dying}, done.stderr
    for (worker, pid, sample), signame in zip(dying, ("SIGSEGV", "SIGKILL"), strict=True):
        # The signal is read while the dead worker is a zombie, and the training may reap it first
        # (on a loaded machine it sometimes does): then the status is said to be unseen, and the
        # sample is still named. A worker killed before the recorder's first look at it is a
        # "child" of the training, not yet "worker N": its sample is named all the same.
        said = re.search(rf"^  (?:worker {worker}|child) \(pid {pid}\) (killed by {signame}|exited; status"
                         rf" not seen \(reaped before it was read\)) at [\d.]+s (.*)$", done.stderr,
                         re.MULTILINE)
        assert said is not None, done.stderr
        assert said[2] == f"while reading sample {sample} (key img/{int(sample):04d}.png)", said[0]
    with sqlite3.connect(tmp_path / "run.db") as db:
        named = db.execute("SELECT sample_index, sample_key, signal FROM events "
                           "WHERE kind = 'exit' AND sample_index IS NOT NULL ORDER BY t").fetchall()
    assert [(index, key) for index, key, _ in named] == [(37, "img/0037.png"), (53, "img/0053.png")]
    seen = [number for _, _, number in named]
    assert seen[0] in (signal.SIGSEGV, None) and seen[1] in (signal.SIGKILL, None)
    if named[0][2] == signal.SIGSEGV:
        assert "try: sample 37 crashed the process reading it (SIGSEGV)" in done.stderr


@pytest.mark.slow
def test_the_main_process_dying_mid_sample_is_named_too(tmp_path: Path) -> None:
    done = _datalint_run(tmp_path, MAIN)

    assert done.returncode == 128 + signal.SIGABRT, done.stderr
    said = r"main \(pid \d+\) killed by SIGABRT at [\d.]+s while reading sample 6 \(key shard-0/6\)"
    assert re.search(said, done.stderr), done.stderr


def test_a_record_says_the_sample_in_flight_then_the_last_one_read(tmp_path: Path) -> None:
    slot = inflight.open_slot(tmp_path)
    assert slot is not None
    assert inflight.read(tmp_path, os.getpid()) == inflight.SampleInFlight(None, None, None, None)

    slot.begin(12, lambda index: f"a/{'é' * (index // 12)}.jpg")
    reading = inflight.read(tmp_path, os.getpid())
    assert reading is not None and (reading.index, reading.key, reading.torn) == (12, "a/é.jpg", False)
    assert inflight.describe(reading) == "while reading sample 12 (key a/é.jpg)"

    slot.end(12)
    between = inflight.read(tmp_path, os.getpid())
    assert between is not None and (between.index, between.last) == (None, 12)
    assert inflight.describe(between) == "between samples (the last it read: sample 12 (key a/é.jpg))"


def test_a_guarded_dataset_inside_another_leaves_the_outer_sample_in_flight(tmp_path: Path) -> None:
    slot = inflight.open_slot(tmp_path)
    assert slot is not None
    slot.begin(3, lambda index: "outer")
    slot.begin(300, lambda index: "inner")
    slot.end(300)
    outer = inflight.read(tmp_path, os.getpid())
    assert outer is not None and (outer.index, outer.key) == (3, "outer")


def test_a_key_longer_than_the_record_is_cut_not_garbled(tmp_path: Path) -> None:
    slot = inflight.open_slot(tmp_path)
    assert slot is not None
    slot.begin(1, lambda index: "a" + "ü" * 500)  # two bytes each: byte KEY_BYTES falls inside a character
    reading = inflight.read(tmp_path, os.getpid())
    assert reading is not None and reading.key == "a" + "ü" * (inflight.KEY_BYTES // 2 - 1)


def test_a_key_reader_that_raises_leaves_the_index(tmp_path: Path) -> None:
    slot = inflight.open_slot(tmp_path)
    assert slot is not None
    slot.begin(8, lambda index: str(1 / 0))
    reading = inflight.read(tmp_path, os.getpid())
    assert reading is not None and (reading.index, reading.key) == (8, None)


def test_a_new_record_wakes_the_recorder_through_the_news_fifo(tmp_path: Path) -> None:
    woken = threading.Event()
    watcher = ExitWatcher(wake=woken.set)
    news = inflight.open_news(tmp_path)
    assert news is not None and watcher.listen(news[0])
    try:
        assert not woken.wait(0.2) and not watcher.take_news()  # nothing new: nobody woken
        assert inflight.open_slot(tmp_path) is not None
        assert woken.wait(60) and watcher.take_news()  # at once, unless the machine is loaded
        assert inflight.pids(tmp_path) == [os.getpid()]
        assert not watcher.take_news()  # told once
    finally:
        watcher.close()
        for fd in news:
            os.close(fd)


def test_a_process_outside_datalint_run_keeps_no_record(tmp_path: Path) -> None:
    assert inflight.open_slot(tmp_path / "gone") is None
    assert inflight.read(tmp_path, os.getpid()) is None


def _record_with(*exits: dict[str, object]) -> dict[str, object]:
    run = {"started": 100.0, "returncode": 1, "memory_limit": None, "shm_total": None}
    main = {"t": 101.0, "pid": 7, "role": "main", "kind": "exit", "detail": "exited with 1", "signal": None}
    return {"run": run, "processes": [], "system": [], "events": [*exits, main]}


def test_a_worker_reaped_unseen_mid_sample_is_a_death_and_one_between_samples_is_not() -> None:
    unseen = "exited; status not seen (reaped before it was read)"
    mid = {"t": 100.5, "pid": 8, "role": "worker 0", "kind": "exit", "detail": unseen, "signal": None,
           "sample_index": 41, "sample_key": "a/41.jpg", "last_sample": 40, "sample_torn": 0}
    done = {**mid, "pid": 9, "role": "worker 1", "sample_index": None, "last_sample": 99, "sample_key": "b"}
    diagnosis = diagnose(_record_with(mid, done), kernel=([], "dmesg"))  # type: ignore[arg-type]

    assert [d.pid for d in diagnosis.deaths if d.role != "main"] == [8]
    assert f"worker 0 (pid 8) {unseen} at 0.5s while reading sample 41 (key a/41.jpg)" in diagnosis.lines


def test_a_death_long_into_a_sample_says_how_long() -> None:
    sample = inflight.SampleInFlight(index=5, last=4, key="big.tif", started=100.0)
    assert inflight.describe(sample, died=103.25) == "while reading sample 5 (key big.tif), 3.2s into it"
    assert inflight.describe(sample, died=100.1) == "while reading sample 5 (key big.tif)"
