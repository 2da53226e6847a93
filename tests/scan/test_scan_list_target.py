"""A list is written only over a missing file or a list datalint wrote: `--quarantine ds.py` used to
replace the dataset's own code with JSON."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from scan_support import ROOT

# A dataset's own code, without torch: each scan's worker imports it, and torch would add 2 s of CPU
# to each of the file's eight commands for nothing these tests look at.
DATASET = """\
import math


class Small:
    def __len__(self):
        return 4

    def __getitem__(self, index):
        return {"x": [math.pi, 0.0], "label": index}


ds = Small()
"""


def datalint(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DATALINT_DEBUG": ""}
    return subprocess.run(
        [sys.executable, "-m", "datalint", *argv],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    code = tmp_path / "ds.py"
    code.write_text(DATASET)
    return code


def _assert_refused(result: subprocess.CompletedProcess[str], target: Path, flag: str) -> None:
    assert result.returncode == 2, result.stderr
    assert f"{flag} {target} exists and is not a quarantine list" in result.stderr
    assert "it begins 'import math'" in result.stderr
    assert "Traceback" not in result.stderr


def test_scan_refuses_to_write_its_list_over_the_datasets_code(dataset: Path, tmp_path: Path) -> None:
    db = tmp_path / "ds.db"
    result = datalint(
        "scan", "--dataset", f"{dataset}:ds", "--db", str(db), "--quarantine", str(dataset), cwd=tmp_path
    )
    _assert_refused(result, dataset, "--quarantine")
    assert dataset.read_text() == DATASET
    assert not db.exists()  # refused before any work


def test_a_list_datalint_wrote_is_written_again(dataset: Path, tmp_path: Path) -> None:
    db, listed = tmp_path / "ds.db", tmp_path / "list.json"
    for _ in range(2):
        result = datalint(
            "scan", "--dataset", f"{dataset}:ds", "--db", str(db), "--quarantine", str(listed), cwd=tmp_path
        )
        assert result.returncode == 0, result.stderr
    assert json.loads(listed.read_text())["format"] == "datalint-quarantine/1"
    for form, name in (("text", "list.txt"), ("binary", "list.bin"), ("json", "list.json")):
        for _ in range(2):
            args = ("quarantine", str(db), "--kinds", "all", "--format", form, "-o", str(tmp_path / name))
            result = datalint(*args, cwd=tmp_path)
            assert result.returncode == 0, (form, result.stderr)


def test_quarantine_and_watch_refuse_a_file_that_is_not_a_list(dataset: Path, tmp_path: Path) -> None:
    db = tmp_path / "ds.db"
    assert datalint("scan", "--dataset", f"{dataset}:ds", "--db", str(db), cwd=tmp_path).returncode == 0
    result = datalint("quarantine", str(db), "-o", str(dataset), cwd=tmp_path)
    _assert_refused(result, dataset, "-o/--output-file")
    pytest.importorskip("watchfiles")
    result = datalint(
        "watch", "--dataset", f"{dataset}:ds", "--db", str(db), "--quarantine", str(dataset), cwd=tmp_path
    )
    _assert_refused(result, dataset, "--quarantine")
    assert dataset.read_text() == DATASET


def test_the_binary_list_beside_a_large_list_is_held_to_the_same_rule(dataset: Path, tmp_path: Path) -> None:
    own_code = tmp_path / "list.bin"  # where a list.json of a million samples puts its binary form
    own_code.write_text(DATASET)
    listed = tmp_path / "list.json"
    result = datalint(
        "scan",
        "--dataset",
        f"{dataset}:ds",
        "--db",
        str(tmp_path / "ds.db"),
        "--quarantine",
        str(listed),
        cwd=tmp_path,
    )
    assert result.returncode == 2, result.stderr
    assert f"--quarantine {listed}: {own_code} exists and is not a quarantine list" in result.stderr
    assert own_code.read_text() == DATASET and not listed.exists()
