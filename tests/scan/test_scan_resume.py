"""A scanner killed with SIGKILL leaves a valid index and no orphaned workers; rerunning resumes."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest
from scan_support import alive, children_of, rows, run_cli, spec, start_cli

LENGTH = 300
SPEC = spec(f"faults.py:make(length={LENGTH}, delay=0.01, error=[7])")


def wait_for(condition, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def count(db) -> int:
    try:
        return rows(db, "SELECT COUNT(*) FROM samples")[0][0]
    except Exception:  # the index may not exist yet
        return 0


@pytest.mark.slow
def test_kill_9_leaves_a_valid_index_no_orphans_and_the_rerun_resumes(tmp_path) -> None:
    db = tmp_path / "resume.db"
    scanner = start_cli("scan", "--dataset", SPEC, "--db", str(db), "--workers", "2", "--progress", "none")
    try:
        wait_for(lambda: count(db) >= 40, 120, "the first committed rows")
        workers = children_of(scanner.pid)
        assert len(workers) == 2
        # The OOM killer is pointed at the workers, never at the scanner that holds the index.
        assert [Path(f"/proc/{pid}/oom_score_adj").read_text().strip() for pid in workers] == ["1000", "1000"]
        os.kill(scanner.pid, signal.SIGKILL)
        scanner.wait(10)
    finally:
        if scanner.poll() is None:
            scanner.kill()
        scanner.communicate()
    # The workers follow their scanner (PR_SET_PDEATHSIG), like the OOM killer's victims never do.
    wait_for(lambda: not any(alive(pid) for pid in workers), 60, "the workers to exit")

    assert rows(db, "PRAGMA integrity_check") == [("ok",)]
    kept = count(db)
    assert 40 <= kept < LENGTH
    assert rows(db, "SELECT finished FROM runs") == [(None,)]

    code, out, _ = run_cli("scan", "--dataset", SPEC, "--db", str(db), "--format", "json")
    summary = json.loads(out)
    assert code == 1  # sample 7 raises
    assert summary["resumed"] == kept and summary["scanned"] == LENGTH - kept
    assert rows(db, "SELECT COUNT(*), COUNT(DISTINCT idx), MIN(idx), MAX(idx) FROM samples") == [
        (LENGTH, LENGTH, 0, LENGTH - 1)
    ]
    assert rows(db, "SELECT idx FROM samples WHERE status != 'ok'") == [(7,)]

    code, out, _ = run_cli("scan", "--dataset", SPEC, "--db", str(db), "--format", "json")
    assert json.loads(out)["scanned"] == 0  # complete: a rerun measures nothing
    code, out, _ = run_cli("scan", "--dataset", SPEC, "--db", str(db), "--format", "json", "--rescan")
    assert json.loads(out)["scanned"] == LENGTH
