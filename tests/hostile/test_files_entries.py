"""Entries that are not plain files, folders that cannot be listed, trees deeper than the stack.

Real FIFOs, sockets, symlink loops and unreadable folders; nothing may abort a scan, block a
read or leave an entry out silently.
"""

from __future__ import annotations

import os
import socket
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from files_support import assert_no_internal_error, datalint, make_jpeg

DEPTH = 1100  # deeper than Python's default recursion limit


@pytest.fixture(autouse=True)
def _remove_deep_trees(tmp_path: Path) -> Iterator[None]:
    """pytest's own clean-up of old temporary folders recurses, so trees 1,000 deep go now, with rm."""
    yield
    subprocess.run(["rm", "-rf", str(tmp_path)], check=False)


def deep_folder(base: Path, depth: int, name: str, data: bytes) -> None:
    """`base/d/d/.../d/name` `depth` folders deep, made one level at a time through folder descriptors."""
    base.mkdir(parents=True, exist_ok=True)
    here = os.open(base, os.O_RDONLY)
    try:
        for _ in range(depth):
            os.mkdir("d", dir_fd=here)
            inner = os.open("d", os.O_RDONLY, dir_fd=here)
            os.close(here)
            here = inner
        fd = os.open(name, os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=here)
        os.write(fd, data)
        os.close(fd)
    finally:
        os.close(here)


@pytest.mark.slow
def test_odd_entries_are_each_a_row_with_the_reason(tmp_path: Path) -> None:
    folder = tmp_path / "images"
    make_jpeg(folder / "good.jpg")
    (folder / "loop.jpg").symlink_to("loop.jpg")
    (folder / "gone.jpg").symlink_to("nowhere.jpg")
    os.mkfifo(folder / "pipe.jpg")
    with socket.socket(socket.AF_UNIX) as listener:
        listener.bind(str(folder / "sock.jpg"))
    make_jpeg(folder / "locked" / "hidden.jpg")
    (folder / "locked").chmod(0)
    deep_folder(folder / "deep", DEPTH, "bottom.jpg", (folder / "good.jpg").read_bytes())
    make_jpeg(folder / "deep" / "d" / "shallow.jpg")

    db = tmp_path / "index.db"
    try:
        result = datalint("scan", "--images", str(folder), "--db", str(db), "--workers", "2", bound=True)
    finally:
        (folder / "locked").chmod(0o755)
    assert_no_internal_error(result)
    assert result.returncode == 1, result.stderr

    with sqlite3.connect(db) as connection:
        rows = dict(connection.execute("SELECT key, status FROM samples"))
        reasons = dict(connection.execute("SELECT idx, detail FROM findings WHERE kind = 'unreadable'"))
        keys = dict(connection.execute("SELECT idx, key FROM samples"))
    unreadable = {keys[idx]: detail for idx, detail in reasons.items()}
    assert rows["good.jpg"] == "ok" and rows["deep/d/shallow.jpg"] == "ok"
    assert rows["deep/" + "d/" * DEPTH + "bottom.jpg"] == "ok", "a tree 1,100 deep is walked to the bottom"
    assert "symbolic links" in unreadable["loop.jpg"]
    assert "broken symbolic link" in unreadable["gone.jpg"]
    assert "named pipe" in unreadable["pipe.jpg"]
    assert "socket" in unreadable["sock.jpg"]
    assert "permission denied" in unreadable["locked/"] and "not scanned" in unreadable["locked/"]
    assert len(unreadable) == 5


def test_check_never_blocks_on_a_fifo_and_walks_deep_trees(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe.py")
    source = b"from torch.utils.data import DataLoader\nDataLoader(d, prefetch_factor=2)\n"
    deep_folder(tmp_path / "src", 1050, "deep.py", source)
    for output_format in ("text", "sarif"):
        result = datalint("check", "--format", output_format, ".", cwd=tmp_path, timeout=60)
        assert_no_internal_error(result)
        assert result.returncode == 1
        if output_format == "text":
            assert "pipe.py:1:1: DL000" in result.stdout and "named pipe" in result.stdout
            assert "deep.py:2:1: DL001" in result.stdout, "a file 1,050 folders down is checked"


def test_a_report_does_not_wait_on_a_preview_that_became_a_fifo(tmp_path: Path) -> None:
    folder = tmp_path / "images"
    make_jpeg(folder / "a.jpg")
    (folder / "b.jpg").write_bytes(b"<html>not found</html>")
    db = tmp_path / "index.db"
    assert datalint("scan", "--images", str(folder), "--db", str(db), "--workers", "1").returncode == 1
    (folder / "b.jpg").unlink()
    os.mkfifo(folder / "b.jpg")
    result = datalint("report", str(db), "-o", str(tmp_path / "r.html"), timeout=60)
    assert result.returncode == 0, result.stderr
    assert_no_internal_error(result)
    assert "not read: not a regular file (a named pipe)" in (tmp_path / "r.html").read_text()


def test_a_quarantine_list_that_is_a_fifo_is_refused_not_waited_on(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "quarantine.json")
    script = (
        "from datalint.training.quarantine import load_quarantine\n"
        f"load_quarantine({str(tmp_path / 'quarantine.json')!r})\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert "QuarantineFormatError" in done.stderr and "named pipe" in done.stderr
