"""Helpers for the hostile file-system tests: the CLI in a child, as a user whom permissions bind."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# Root ignores file modes; without these capabilities it is bound by them like any user.
_DROP_OVERRIDES = ["--bounding-set=-dac_override,-dac_read_search,-fowner"]


def datalint(
    *argv: str, cwd: Path | None = None, timeout: float = 120, bound: bool = False, umask: int | None = None
) -> subprocess.CompletedProcess[str]:
    """`python -m datalint ARGV` as a child; `bound`: as a user whom file permissions bind."""
    command = [sys.executable, "-m", "datalint", *argv]
    if bound:
        command = bound_prefix() + command
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}

    def set_umask() -> None:
        if umask is not None:
            os.umask(umask)

    return subprocess.run(
        command, cwd=cwd or ROOT, env=env, capture_output=True, text=True, errors="surrogateescape",
        timeout=timeout, preexec_fn=set_umask,
    )  # fmt: skip


def bound_prefix() -> list[str]:
    """The command prefix that makes file permissions apply: none as a user, setpriv as root."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root, and without setpriv root ignores file permissions")
    return [setpriv, *_DROP_OVERRIDES]


def assert_no_internal_error(result: subprocess.CompletedProcess[str]) -> None:
    text = result.stdout + result.stderr
    assert "internal error" not in text and "Traceback" not in text, text[-3000:]


def make_jpeg(path: Path, shade: int = 0) -> None:
    from PIL import Image

    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (32, 32), (shade, 128, 255 - shade)).save(path, "JPEG")
