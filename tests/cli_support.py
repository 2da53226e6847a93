"""`python -m datalint ARGS` as a child process, for the CLI tests."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def datalint(*args: str, cwd: Path, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "datalint", *args],
        cwd=cwd,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "DATALINT_DEBUG": ""},
    )
