"""A dataset that makes the scan engine hand a chunk to a worker that has just died, every time.

The race it pins down: the parent sees a worker alive and finishing a chunk, the worker then dies
in its next sample (a segfault, an os._exit), and the parent sends it another chunk before it has
noticed. Files in `folder` order the two processes (scan with one worker and --chunk-size 1):

1. the worker measures sample 0 (`measured-0`), finishes its first chunk and starts sample 1,
   writing its pid to `started-1`;
2. the scanner, keying the row of sample 0, waits for `started-1`, writes `parent-waiting` and
   waits until that worker has exited;
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
        if index == 0 and os.getpid() == self.scanner and self._row_of_sample_0_arrived():
            _wait_for((self.folder / "started-1").exists)
            worker = int((self.folder / "started-1").read_text())
            (self.folder / "parent-waiting").touch()
            _wait_for(lambda: _exited(worker))
        return f"sample-{index}"

    def _row_of_sample_0_arrived(self) -> bool:
        # The fingerprint reads every key before any sample is measured: no waiting then.
        return (self.folder / "measured-0").exists() and not (self.folder / "parent-waiting").exists()


def _exited(pid: int) -> bool:
    # WNOWAIT: look without reaping, so the engine still collects the worker's exit status itself.
    return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None


def _wait_for(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + PATIENCE
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.005)


def make(length: int, folder: str) -> DiesBetweenChunks:
    return DiesBetweenChunks(length, folder)
