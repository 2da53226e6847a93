"""A pause is not a hang: a scan stopped as a whole (Ctrl-Z, a VM pause, a job suspend) and resumed
quarantines nothing that was not bad."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path

import pytest
from engine_support import dataset, descendants, samples, start_scan


def _signal_all(pids: list[int], signum: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signum)


@pytest.mark.slow
def test_stopping_the_whole_scan_longer_than_the_timeout_quarantines_nothing(tmp_path: Path) -> None:
    db = tmp_path / "p.db"
    spec = dataset(f"make(16, {str(tmp_path)!r}, pause=0.4)")
    process = start_scan(
        "--dataset", spec, "--db", str(db), "--workers", "2", "--timeout", "2", "--progress", "none"
    )
    try:
        deadline = time.monotonic() + 60
        while len(descendants(process.pid)) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(1.0)  # samples in flight in both workers
        stopped = [process.pid, *descendants(process.pid)]  # the workers are in their own process groups
        _signal_all(stopped, signal.SIGSTOP)
        time.sleep(5)  # two and a half timeouts
        _signal_all(stopped, signal.SIGCONT)
        _, stderr = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
    rows = samples(db)
    assert "internal error" not in stderr
    assert sorted(rows) == list(range(16))
    assert {row["status"] for row in rows.values()} == {"ok"}, {
        i: r["error_message"] for i, r in rows.items()
    }
    assert process.returncode == 0
