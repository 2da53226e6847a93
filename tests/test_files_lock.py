"""One lock file for one holder at a time (the scan's index lock, the service's data directory): a second
taker is refused with who holds it, and a holder that dies lets go."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from datalint.files import LockHeld, take_lock
from datalint.index.store import IndexBusyError, scan_lock


def _hold_in_child(path: Path) -> subprocess.Popen[bytes]:
    code = (
        f"import pathlib; from datalint.files import take_lock; take_lock(pathlib.Path({str(path)!r}));"
        " print('held', flush=True); input()"
    )
    child = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert child.stdout is not None and child.stdout.readline() == b"held\n"
    return child


def test_a_second_taker_is_told_who_holds_it_and_takes_it_once_the_holder_dies(tmp_path: Path) -> None:
    path = tmp_path / "service.lock"
    child = _hold_in_child(path)
    try:
        with pytest.raises(LockHeld) as held:
            take_lock(path)
        assert f"pid {child.pid} on host " in held.value.holder
    finally:
        child.kill()
        child.wait()
    deadline = time.monotonic() + 60  # the kernel lets go as the process ends
    while True:
        try:
            fd = take_lock(path)
            break
        except LockHeld:
            assert time.monotonic() < deadline
            time.sleep(0.05)
    os.close(fd)


def test_a_second_scan_of_one_index_is_refused_naming_the_first(tmp_path: Path) -> None:
    index = tmp_path / "scan.db"
    child = _hold_in_child(tmp_path / "scan.db.lock")
    try:
        with pytest.raises(
            IndexBusyError, match=rf"another scan is writing the index .*\(pid {child.pid} on host "
        ), scan_lock(index):
            pass
    finally:
        child.kill()
        child.wait()
