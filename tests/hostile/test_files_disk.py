"""The disk, the index, the list: full disks, read-only files and folders, hand edits, two scans at once."""

from __future__ import annotations

import json
import os
import shutil
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from files_support import ROOT, assert_no_internal_error, datalint

DATASETS = ROOT / "fixtures" / "datasets"


def write_dataset(folder: Path, body: str) -> str:
    (folder / "hostile_ds.py").write_text(body)
    return f"{folder / 'hostile_ds.py'}:ds"


LOUD = """
class Loud:
    def __len__(self): return 3000
    def __getitem__(self, i):
        if i % 50 == 7: raise ValueError("bad sample %d " % i + "x" * 3000)
        return [float(i)] * 8
ds = Loud()
"""
SLOW = """
import time
class Slow:
    def __len__(self): return 12
    def __getitem__(self, i):
        time.sleep(0.25)
        return [1.0, 2.0] if i != 3 else "one"
ds = Slow()
"""


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 512 KiB tmpfs, where root may mount one; skipped (with the reason) elsewhere."""
    mount = tmp_path / "disk"
    mount.mkdir()
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a small tmpfs needs root")
    command = ["mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", str(mount)]
    done = subprocess.run(command, capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode(errors='replace').strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


@pytest.mark.slow
def test_a_full_disk_is_named_with_what_the_index_kept(small_disk: Path, tmp_path: Path) -> None:
    spec = write_dataset(tmp_path, LOUD)
    result = datalint("scan", "--dataset", spec, "--db", str(small_disk / "index.db"), "--workers", "2")
    assert result.returncode == 2, result.stdout + result.stderr
    assert_no_internal_error(result)
    assert "cannot rollback" not in result.stderr
    assert "the disk is full" in result.stderr and "complete sample row(s)" in result.stderr
    assert "run the same command again to resume" in result.stderr


def test_a_read_only_index_or_folder_is_named(tmp_path: Path) -> None:
    spec = write_dataset(tmp_path, SLOW.replace("0.25", "0"))
    folder = tmp_path / "idx"
    db = folder / "index.db"
    assert datalint("scan", "--dataset", spec, "--db", str(db), "--workers", "1").returncode == 1
    for extra in db.parent.glob("index.db-*"):
        extra.unlink()
    db.chmod(0o444)
    rerun = datalint("scan", "--dataset", spec, "--db", str(db), "--workers", "1", bound=True)
    assert rerun.returncode == 2 and "read-only for this user" in rerun.stderr, rerun.stderr
    assert_no_internal_error(rerun)
    db.chmod(0o644)
    folder.chmod(0o555)
    elsewhere = str(tmp_path / "q.json")
    try:
        rerun = datalint("scan", "--dataset", spec, "--db", str(db), "--quarantine", elsewhere, bound=True)
    finally:
        folder.chmod(0o755)
    assert rerun.returncode == 2, rerun.stderr
    assert f"its folder {folder} is read-only for this user" in rerun.stderr, rerun.stderr
    assert "nothing was changed" in rerun.stderr
    assert_no_internal_error(rerun)


def test_json_edited_by_hand_is_named(tmp_path: Path) -> None:
    spec = write_dataset(tmp_path, SLOW.replace("0.25", "0"))
    db = tmp_path / "index.db"
    assert datalint("scan", "--dataset", spec, "--db", str(db), "--workers", "1").returncode == 1
    with sqlite3.connect(db) as connection:
        connection.execute('UPDATE samples SET signature = \'{"type": "list", \' WHERE idx = 2')
    for argv in (("quarantine", str(db)), ("scan", "--dataset", spec, "--db", str(db), "--workers", "1")):
        result = datalint(*argv)
        assert result.returncode == 2, result.stderr
        assert_no_internal_error(result)
        assert "not valid JSON (edited by hand?)" in result.stderr, result.stderr


GATED = """
import os, time
class Gated:
    def __len__(self): return 12
    def __getitem__(self, i):
        deadline = time.monotonic() + 60
        while not os.path.exists(GATE) and time.monotonic() < deadline:
            time.sleep(0.02)
        return [1.0, 2.0] if i != 3 else "one"
ds = Gated()
"""


def test_a_second_scan_of_one_index_is_refused_by_name(tmp_path: Path) -> None:
    # The first scan's samples wait for a gate file, so it holds the lock for as long as the second
    # scan needs, however slow the machine, and ends as soon as the gate opens.
    gate = tmp_path / "gate"
    spec = write_dataset(tmp_path, f"GATE = {str(gate)!r}\n" + GATED)
    db = tmp_path / "index.db"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    first = subprocess.Popen(
        [sys.executable, "-m", "datalint", "scan", "--dataset", spec, "--db", str(db), "--workers", "1"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not (tmp_path / "index.db.lock").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        second = datalint("scan", "--dataset", spec, "--db", str(db), "--workers", "1")
        assert first.poll() is None, "the first scan still runs while the second is refused"
        assert second.returncode == 2, second.stderr
        assert f"pid {first.pid} on host {socket.gethostname()}" in second.stderr, second.stderr
    finally:
        gate.touch()
        _, err = first.communicate(timeout=120)
    assert first.returncode == 1, err
    with sqlite3.connect(db) as connection:
        assert connection.execute("SELECT count(*) FROM runs WHERE finished IS NULL").fetchone()[0] == 0
    assert not (tmp_path / "index.db.lock").exists()

    # A lock file a killed scan left behind holds no lock: the next scan takes over.
    (tmp_path / "index.db.lock").write_text(json.dumps({"pid": 2**22 + 1, "host": "gone", "started": "x"}))
    again = datalint("scan", "--dataset", spec, "--db", str(db), "--workers", "1", "--rescan")
    assert again.returncode == 1, again.stderr


def test_values_reach_sql_as_parameters_and_empty_lists_are_usage_errors(tmp_path: Path) -> None:
    spec = write_dataset(tmp_path, SLOW.replace("0.25", "0"))
    db = tmp_path / "index.db"
    inf = datalint("scan", "--dataset", spec, "--db", str(db), "--workers", "1", "--timeout", "inf")
    assert inf.returncode == 1, inf.stderr
    listed = json.loads((tmp_path / "index.quarantine.json").read_text())["samples"]
    assert [s["index"] for s in listed] == [3], "sample 3 (a string where the others are lists) is found"
    for argv in (
        ("scan", "--dataset", spec, "--db", str(db), "--kinds", ""),
        ("quarantine", str(db), "--kinds", " , "),
        ("check", "--select", "", str(tmp_path)),
        ("check", "--ignore", ",", str(tmp_path)),
    ):
        result = datalint(*argv)
        assert result.returncode == 2, argv
        assert "names no" in result.stderr, (argv, result.stderr)


def test_list_outputs_are_checked_first_and_honour_the_umask(tmp_path: Path) -> None:
    spec = write_dataset(tmp_path, SLOW.replace("0.25", "0"))
    db = tmp_path / "index.db"
    folder = tmp_path / "lists"
    folder.mkdir()
    refused = datalint("scan", "--dataset", spec, "--db", str(db), "--quarantine", str(folder))
    assert refused.returncode == 2 and "is a folder; give a file name" in refused.stderr, refused.stderr
    assert not db.exists() or "scanning" not in refused.stderr, "refused before any sample ran"
    made = datalint("scan", "--dataset", spec, "--db", str(db), "--workers", "1", umask=0o022)
    assert made.returncode == 1
    assert (tmp_path / "index.quarantine.json").stat().st_mode & 0o777 == 0o644
    refused = datalint("quarantine", str(db), "-o", str(folder))
    assert refused.returncode == 2 and "is a folder" in refused.stderr
    assert_no_internal_error(refused)
    written = datalint("quarantine", str(db), "-o", str(folder / "q.json"), umask=0o002)
    assert written.returncode == 1 and (folder / "q.json").stat().st_mode & 0o777 == 0o664
