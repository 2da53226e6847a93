"""Helpers shared by the scan tests: fixture specs, the CLI in this process and in a child."""

from __future__ import annotations

import contextlib
import io
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
DATASETS = ROOT / "fixtures" / "datasets"
PYTHON = (
    str(ROOT / ".venv" / "bin" / "python") if (ROOT / ".venv" / "bin" / "python").exists() else sys.executable
)


def spec(name: str) -> str:
    """`fixtures/datasets/<file>.py:<target>` as an absolute spec, e.g. spec("faults.py:make(length=8)")."""
    return f"{DATASETS}/{name}"


def run_cli(*argv: str) -> tuple[int, str, str]:
    """`datalint ARGV` in this process: (exit code, stdout, stderr)."""
    from datalint.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def start_cli(*argv: str, **kwargs: Any) -> subprocess.Popen[str]:
    """`python -m datalint ARGV` as a child process, in its own session (so a test can kill it)."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen(
        [PYTHON, "-m", "datalint", *argv],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        **kwargs,
    )


def rows(db: Path, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """The rows `sql` reads, through datalint's read-only open: `position_of(idx)` gives a sample's
    position (its row's idx, unless an incremental scan moved it)."""
    from datalint.index import read

    with contextlib.closing(read.connect(db)) as connection:
        return connection.execute(sql, params).fetchall()


def samples(db: Path) -> dict[int, dict[str, Any]]:
    with contextlib.closing(sqlite3.connect(db)) as connection:
        connection.row_factory = sqlite3.Row
        return {row["idx"]: dict(row) for row in connection.execute("SELECT * FROM samples")}


def load_json(path: Path | str) -> Any:
    return json.loads(Path(path).read_text())


def children_of(pid: int) -> list[int]:
    """Live processes whose parent is `pid` (read from /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rpartition(")")[2].split()
        if int(fields[1]) == pid and fields[0] != "Z":
            found.append(int(entry.name))
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return False
    return state != "Z"


def write_limit_images(folder: Path) -> Path:
    """10 noisy scenes; `dark.png` (dark at the default limit), `dim.png` (dark only under a limit of
    0.4) and `small.png` (96x72: tiny only under a limit of 100 px): a folder whose list depends on
    the quality limits a scan is given."""
    import numpy as np
    from PIL import Image

    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(14)
    for number in range(10):
        Image.fromarray(rng.integers(0, 256, (192, 256, 3), dtype=np.uint8)).save(
            folder / f"clean_{number}.png"
        )
    Image.fromarray(rng.integers(0, 20, (192, 256, 3), dtype=np.uint8)).save(folder / "dark.png")
    Image.fromarray(rng.integers(0, 80, (192, 256, 3), dtype=np.uint8)).save(folder / "dim.png")
    Image.fromarray(rng.integers(0, 256, (72, 96, 3), dtype=np.uint8)).save(folder / "small.png")
    return folder
