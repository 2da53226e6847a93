"""Helpers for the dask backend tests: the fixture spec, a real LocalCluster, the index, processes."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
DATASETS = Path(__file__).resolve().parent / "dask_datasets.py"
PYTHON = (
    str(ROOT / ".venv" / "bin" / "python") if (ROOT / ".venv" / "bin" / "python").exists() else sys.executable
)


def spec(call: str) -> str:
    """An absolute spec of the fixture dataset, e.g. spec("make(length=50, segfault=[3])")."""
    return f"{DATASETS}:{call}"


@contextlib.contextmanager
def local_cluster(workers: int = 2) -> Iterator[Any]:
    """A real LocalCluster standing in for a user's existing cluster, started the way the scan starts
    its own; closed, workers and all, on exit."""
    from datalint.scan.dask_backend import local_cluster as scan_cluster

    with scan_cluster(workers) as cluster:
        yield cluster


def samples(db: Path) -> dict[int, dict[str, Any]]:
    with contextlib.closing(sqlite3.connect(db)) as connection:
        connection.row_factory = sqlite3.Row
        return {row["idx"]: dict(row) for row in connection.execute("SELECT * FROM samples")}


def row_count(db: Path) -> int:
    if not db.exists():
        return 0
    try:
        with contextlib.closing(sqlite3.connect(db, timeout=5)) as connection:
            return int(connection.execute("SELECT COUNT(*) FROM samples").fetchone()[0])
    except sqlite3.OperationalError:  # the scan has not created the table yet
        return 0


def wait_until(condition: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(0.1)


def start_cli(*argv: str) -> subprocess.Popen[str]:
    """`python -m datalint ARGV` in its own session, so a test can find and kill all it started."""
    return subprocess.Popen(
        [PYTHON, "-m", "datalint", *argv],
        cwd=ROOT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def session_members(session: int) -> list[int]:
    """Live (non-zombie) processes whose session id is `session`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rpartition(")")[2].split()
        except OSError:
            continue
        if fields[0] != "Z" and int(fields[3]) == session:
            found.append(int(entry.name))
    return found


def live_children(pid: int) -> dict[int, str]:
    """Live (non-zombie) processes whose parent is `pid`: {pid: command line}."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rpartition(")")[2].split()
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if fields[0] != "Z" and int(fields[1]) == pid:
            found[int(entry.name)] = command
    return found


def stray_children(pid: int) -> dict[int, str]:
    """Children of `pid` other than multiprocessing's resource tracker, which starts with the first
    spawned process (a dask worker) and lives as long as its parent, by design."""
    return {
        child: command
        for child, command in live_children(pid).items()
        if "multiprocessing.resource_tracker" not in command
    }


def run_cli(*argv: str) -> tuple[int, str, str]:
    """`datalint ARGV` in this process: (exit code, stdout, stderr)."""
    import io

    from datalint.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()
