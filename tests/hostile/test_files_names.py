"""File names of every kind: bytes that are not UTF-8, terminal escapes, newlines.

Each test makes the names on a real file system and runs the real CLI in a child process.
"""

from __future__ import annotations

import json
import os
import sqlite3
import sys
from pathlib import Path

import pytest
from files_support import assert_no_internal_error, datalint, make_jpeg

NOT_UTF8 = os.fsdecode(b"caf\xe9.jpg")  # Latin-1 bytes, as an old archive leaves them
ESCAPES = "title\x1b]0;owned\x07\x1b[2J.jpg"  # set the window title, clear the screen
NEWLINE = "two\nlines.jpg"


@pytest.fixture
def odd_names(tmp_path: Path) -> Path:
    folder = tmp_path / "images"
    make_jpeg(folder / "plain.jpg")
    for name in (NOT_UTF8, ESCAPES, NEWLINE):
        (folder / name).write_bytes(b"not an image at all")
    return folder


def test_a_scan_stores_and_prints_every_name_exactly(odd_names: Path, tmp_path: Path) -> None:
    db = tmp_path / "index.db"
    first = datalint("scan", "--images", str(odd_names), "--db", str(db), "--workers", "1")
    assert first.returncode == 1, first.stderr
    assert_no_internal_error(first)
    assert "\x1b" not in first.stdout + first.stderr and "\x07" not in first.stdout + first.stderr
    assert "$'caf\\xe9.jpg'" in first.stdout and "$'two\\nlines.jpg'" in first.stdout

    with sqlite3.connect(db) as connection:
        stored = {row[0] for row in connection.execute("SELECT key FROM samples")}
    assert b"caf\xe9.jpg" in stored, "a name that is not UTF-8 is kept as its exact bytes"
    assert {ESCAPES, NEWLINE, "plain.jpg"} <= stored

    listed = json.loads((tmp_path / "index.quarantine.json").read_text())
    keys = {sample["key"] for sample in listed["samples"]}
    assert keys == {NOT_UTF8, ESCAPES, NEWLINE}, "the list names each file as os.listdir does"
    assert set(os.listdir(odd_names)) >= keys

    # A valid image under such a name goes through every population pass (hashes, near-duplicates).
    (odd_names / os.fsdecode(b"copy\xe9.jpg")).write_bytes((odd_names / "plain.jpg").read_bytes())
    grown = datalint("scan", "--images", str(odd_names), "--db", str(db), "--workers", "1")
    assert grown.returncode == 1 and "duplicate" in grown.stdout, grown.stdout + grown.stderr
    assert_no_internal_error(grown)
    (odd_names / os.fsdecode(b"copy\xe9.jpg")).unlink()

    again = datalint("scan", "--images", str(odd_names), "--db", str(db), "--workers", "1")
    assert again.returncode == 1 and "0 measured, 4 from a previous run" in again.stdout, again.stdout
    assert_no_internal_error(again)

    text = datalint("quarantine", str(db), "--format", "text")
    assert text.returncode == 1, text.stderr
    lines = text.stdout.splitlines()
    assert len(lines) == 3, "a newline in a name does not break the one-line-per-sample format"
    assert all(line.count("\t") == 3 and "\x1b" not in line for line in lines)


def test_the_guard_records_a_failure_whose_key_is_not_utf8(tmp_path: Path) -> None:
    record = tmp_path / "guard.db"
    script = f"""
import os
from datalint.torch import GuardedDataset
from datalint.training.quarantine import load_quarantine

class Files:
    names = ["ok.jpg", os.fsdecode(b"caf\\xe9.jpg"), "fine.jpg"]
    def __len__(self): return 3
    def datalint_key(self, i): return self.names[i]
    def __getitem__(self, i):
        if i == 1: raise OSError("truncated")
        return i

guarded = GuardedDataset(Files(), record={str(record)!r})
print([guarded[i] for i in range(3)])
print(load_quarantine({str(record)!r}).keys == (os.fsdecode(b"caf\\xe9.jpg"),))
"""
    import subprocess

    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:2] == ["[0, 2, 2]", "True"], done.stdout + done.stderr
    assert "$'caf\\xe9.jpg'" in done.stderr, "the guard's log line shows the name escaped"


def test_check_names_every_file_in_every_format(tmp_path: Path) -> None:
    source = "from torch.utils.data import DataLoader\nDataLoader(ds, prefetch_factor=2)\n"
    for name in (os.fsdecode(b"load\xff.py"), "new\nline\x1b[31m.py"):
        (tmp_path / name).write_text(source)
    for output_format in ("text", "json", "sarif", "github"):
        result = datalint("check", "--format", output_format, ".", cwd=tmp_path, timeout=60)
        assert result.returncode == 1, (output_format, result.stderr)
        assert_no_internal_error(result)
        assert "\x1b" not in result.stdout, output_format
        if output_format == "text":
            assert result.stdout.count("\n") == 2, "one line per finding, whatever the names hold"
            assert "$'load\\xff.py':2:1: DL001" in result.stdout
        if output_format == "sarif":
            uris = {
                r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
                for r in json.loads(result.stdout)["runs"][0]["results"]
            }
            assert uris == {"load%FF.py", "new%0Aline%1B%5B31m.py"}, "URIs carry the exact bytes"
        if output_format == "json":
            paths = {f["path"] for f in json.loads(result.stdout)}
            assert os.fsdecode(b"load\xff.py") in paths, "JSON keeps the name losslessly (\\udcff)"
