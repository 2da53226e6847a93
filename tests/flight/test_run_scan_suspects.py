"""A worker that dies unnamed (no `GuardedDataset`) under `datalint run --index`: the diagnosis
names the samples the scan of the same dataset saw crash its worker with the same signal."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from datalint.flight import suspects
from datalint.flight.diagnosis import diagnose

ROOT = Path(__file__).resolve().parents[2]

DATA = textwrap.dedent(
    """
    import os, signal, time
    import torch
    from torch.utils.data import Dataset

    class Images(Dataset):
        samples = [(f"img/{i:04d}.png", 0) for i in range(48)]
        def __len__(self):
            return len(self.samples)
        def __getitem__(self, i):
            time.sleep(0.06)  # the worker lives past the recorder's first look at the tree
            if i == 37:  # a decoder's bug on one malformed file
                os.kill(os.getpid(), signal.SIGSEGV)
            return torch.zeros(8)

    def make():
        return Images()
    """
)

TRAIN = textwrap.dedent(
    """
    from torch.utils.data import DataLoader
    from data import Images

    if __name__ == "__main__":
        for batch in DataLoader(Images(), batch_size=4, num_workers=2):
            pass
    """
)


def _run(tmp_path: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{tmp_path}"}
    return subprocess.run([sys.executable, "-m", "datalint", *argv], capture_output=True, text=True,
                          timeout=180, cwd=tmp_path, env=env)


@pytest.mark.slow
def test_an_unguarded_worker_killed_by_a_sample_is_named_from_the_scan(tmp_path: Path) -> None:
    (tmp_path / "data.py").write_text(DATA)
    (tmp_path / "train.py").write_text(TRAIN)
    scanned = _run(tmp_path, "scan", "--dataset", "data.py:make()", "--db", "index.db", "--workers", "1")
    assert scanned.returncode in (0, 1), scanned.stderr

    done = _run(tmp_path, "run", "--index", "index.db", "--", sys.executable, "train.py")

    assert done.returncode == 1, done.stderr  # torch raises in the main process
    if "killed by SIGSEGV" in done.stderr:
        said = "saw sample 37 (key img/0037.png) crash a worker with SIGSEGV: most likely the one it was"
        assert f"{said} reading" in done.stderr, done.stderr
        assert "not named by an in-flight record; the scan's index" in done.stderr
    else:
        # On a loaded machine the worker can die before the recorder's first look at the tree: then
        # no worker's death is seen, and the failed main gets the scan's crashes by any signal.
        assert "no worker's death was seen" in done.stderr, done.stderr
        assert "saw sample 37 (key img/0037.png) [SIGSEGV] crash a worker" in done.stderr, done.stderr
    assert "datalint quarantine" in done.stderr


def test_a_failed_main_with_no_worker_death_seen_gets_the_scans_crashes(tmp_path: Path) -> None:
    index = _index(tmp_path)
    record = {"run": {"started": 100.0, "returncode": 1, "scan_index": str(index)}, "processes": [],
              "system": [], "events": [{"t": 101.0, "pid": 7, "role": "main", "kind": "exit",
                                        "detail": "exited with 1", "signal": None}]}
    lines = diagnose(record, kernel=([], "dmesg")).lines
    assert lines[1] == ("  no worker's death was seen (one that dies within its first second is not, "
                        f"unless GuardedDataset announces it); the scan's index ({index}) saw sample 5 "
                        "(key b\\xff.png) [SIGSEGV] crash a worker")
    assert any("datalint quarantine" in line for line in lines)


def _index(tmp_path: Path) -> Path:
    index = tmp_path / "index.db"
    with sqlite3.connect(index) as db:
        db.execute("CREATE TABLE samples (idx INTEGER PRIMARY KEY, key, status TEXT, error_type TEXT)")
        db.executemany("INSERT INTO samples VALUES (?, ?, ?, ?)",
                       [(1, "a.png", "ok", None), (5, b"b\xff.png", "crash", "SIGSEGV"),
                        (9, "c.png", "error", "MemoryError")])
    return index


def test_a_death_by_another_signal_says_the_scan_saw_none(tmp_path: Path) -> None:
    index = _index(tmp_path)
    segv = suspects.evidence(str(index), "SIGSEGV")
    assert segv is not None and (segv.count, segv.suspects[0].key) == (1, "b\\xff.png")
    killed = suspects.evidence(str(index), "SIGKILL")
    assert killed is not None and [s.index for s in killed.suspects] == [9]  # out of memory in the scan
    aborted = suspects.evidence(str(index), "SIGABRT")
    assert aborted is not None and suspects.describe(aborted) == (
        f"the scan's index ({index}, 3 samples) saw no sample crash a worker with SIGABRT: "
        "the sample is not named")


def test_an_index_that_is_not_a_scan_is_refused_before_the_training_starts(tmp_path: Path) -> None:
    (tmp_path / "notes.db").write_text("not sqlite at all")
    done = _run(tmp_path, "run", "--index", "notes.db", "--", sys.executable, "-c", "print('started')")
    assert done.returncode == 2 and "--index notes.db: not a scan index" in done.stderr
    assert "started" not in done.stdout and "internal error" not in done.stderr
    missing = _run(tmp_path, "run", "--index", "gone.db", "--", "true")
    assert missing.returncode == 2 and "--index gone.db: no such file" in missing.stderr
