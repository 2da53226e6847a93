"""A dataset that makes the scan engine hand a chunk to a worker that has just died, every time.

The race it pins down: the parent sees a worker alive and finishing a chunk, the worker then dies
in its next sample (a segfault, an os._exit), and the parent sends it another chunk before it has
noticed. Files in `folder` order the two processes (one worker, chunks of one sample):

1. the worker measures sample 0 (`measured-0`), finishes its first chunk and starts sample 1,
   writing its pid to `started-1`;
2. the scanner, having received the row of sample 0 (`stage_the_race`, called by the test between
   two batches of the engine), waits for `started-1`, writes `parent-waiting` and waits until that
   worker has exited;
3. the worker sees `parent-waiting` and exits inside sample 1, so the scanner's next hand-out
   writes to the pipe of a dead worker.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

PATIENCE = 20.0  # seconds; each side goes on after this, so a broken engine fails the test, never hangs


class DiesBetweenChunks:
    def __init__(self, length: int, folder: str) -> None:
        self.length = length
        self.folder = Path(folder)
        self.scanner = os.getpid()

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int) -> dict[str, float]:
        if index == 0:
            (self.folder / "measured-0").touch()
        if index == 1 and not (self.folder / "parent-waiting").exists():
            (self.folder / "started-1").write_text(str(os.getpid()))
            _wait_for(lambda: (self.folder / "parent-waiting").exists())
            os._exit(3)
        return {"value": float(index)}

    def datalint_key(self, index: int) -> str:
        return f"sample-{index}"


def stage_the_race(folder: str, rows: list[dict[str, object]]) -> None:
    """In the scanner, between two batches: once sample 0's row is in, let the worker die unseen."""
    path = Path(folder)
    if any(row["idx"] == 0 for row in rows) and not (path / "parent-waiting").exists():
        _wait_for(lambda: (path / "started-1").exists() and bool((path / "started-1").read_text()))
        worker = int((path / "started-1").read_text())
        (path / "parent-waiting").touch()
        _wait_for(lambda: _exited(worker))


def _exited(pid: int) -> bool:
    # Read from /proc: the worker is its keeper's child, not the scanner's (and the engine reaps it).
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return True
    return state in ("Z", "X")


def _wait_for(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + PATIENCE
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.005)


def make(length: int, folder: str) -> DiesBetweenChunks:
    return DiesBetweenChunks(length, folder)
