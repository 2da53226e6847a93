"""Indexes for the report tests.

`scanned_db` is a real `datalint scan` of tests/report/report_dataset.py (one planted fault per
finding kind, hostile strings) and `image_scan` one of a generated image folder, each run once
per session; `schema_db` is written row by row from the
schema for what a real scan cannot produce cheaply (exact durations, 100k samples, killed scans).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))

from report_images import MAX_PIXELS, ImageCase, make_image_folder  # noqa: E402
from report_schema import dataset_index  # noqa: E402


@pytest.fixture
def schema_db(tmp_path: Path) -> Path:
    return dataset_index(tmp_path / "scan.db")


@pytest.fixture(scope="session")
def scanned_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The index of a real scan: isolated workers, a segfault, a hang, the real policy."""
    db = tmp_path_factory.mktemp("scan") / "scan.db"
    command = [
        sys.executable, "-m", "datalint", "scan", "--dataset", f"{HERE / 'report_dataset.py'}:make()",
        "--label", "label", "--num-classes", "10", "--timeout", "2", "--workers", "2",
        "--db", str(db), "--progress", "none",
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, f"scan exit {done.returncode} (1: something quarantined)\n{done.stderr}"
    return db


@pytest.fixture(scope="session")
def image_scan(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[ImageCase], Path]:
    """A real `datalint scan --images` of the generated folder: (folder, cases, index)."""
    base = tmp_path_factory.mktemp("image-scan")
    root, db = base / "images", base / "images.db"
    cases = make_image_folder(root)
    command = [
        sys.executable, "-m", "datalint", "scan", "--images", str(root), "--max-pixels", str(MAX_PIXELS),
        "--workers", "2", "--db", str(db), "--progress", "none",
        "--no-scores",  # the cases are file kinds; quality kinds are tested in tests/images/
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, f"scan exit {done.returncode} (1: something quarantined)\n{done.stderr}"
    return root, cases, db
