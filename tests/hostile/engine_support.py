"""Running `datalint scan` as a real child process for the engine's hostile tests."""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
PYTHON = sys.executable


def dataset(target: str) -> str:
    """A spec for `engine_datasets.py:<target>`."""
    return f"{HERE / 'engine_datasets.py'}:{target}"


@dataclass(frozen=True)
class Outcome:
    code: int
    stdout: str
    stderr: str

    @property
    def summary(self) -> dict[str, Any]:
        return json.loads(self.stdout)


def start_scan(*argv: str, **kwargs: Any) -> subprocess.Popen[str]:
    """`python -m datalint scan ARGV`, in its own session so a test can stop the whole scan."""
    return subprocess.Popen(
        [PYTHON, "-m", "datalint", "scan", *argv],
        cwd=ROOT,
        env={**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        **kwargs,
    )


def scan(*argv: str, limit: float = 120.0) -> Outcome:
    """Run a scan to its end; whatever a sample did, it must end on its own with no internal error."""
    process = start_scan(*argv, "--progress", "none")
    try:
        stdout, stderr = process.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, 9)
        stdout, stderr = process.communicate()
        raise AssertionError(f"the scan did not finish within {limit} s:\n{stderr}") from None
    assert "internal error" not in stderr and "Traceback" not in stderr, stderr
    return Outcome(process.returncode, stdout, stderr)


def samples(db: Path) -> dict[int, dict[str, Any]]:
    with contextlib.closing(sqlite3.connect(db)) as connection:
        connection.row_factory = sqlite3.Row
        return {row["idx"]: dict(row) for row in connection.execute("SELECT * FROM samples")}


def reported_kinds(row: dict[str, Any]) -> set[str]:
    return {finding["kind"] for finding in json.loads(row["reported"] or "[]")}


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return False
    return state != "Z"


def descendants(pid: int) -> list[int]:
    """Every live process below `pid` (read from /proc)."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError):
                fields = (entry / "stat").read_text().rpartition(")")[2].split()
                parents.setdefault(int(fields[1]), []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found
