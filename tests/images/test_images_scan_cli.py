"""`datalint scan --images / --files / --files-from-dataset` end to end: the real CLI, forked workers,
a real SQLite index and quarantine list."""

from __future__ import annotations

import contextlib
import json
import shutil
import sqlite3
import textwrap
from pathlib import Path
from typing import Any

import pytest
from images_support import findings_by_key, run_cli


@pytest.fixture(scope="module")
def corpus_scan(
    small_corpus: tuple[Path, list[Any]], tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any]:
    images, rows = small_corpus
    out = tmp_path_factory.mktemp("scan")
    code, stdout, stderr = run_cli(
        "scan", "--images", str(images), "--workers", "2", "--format", "json", "--db", str(out / "index.db")
    )
    return {
        "code": code, "summary": json.loads(stdout), "stderr": stderr, "rows": rows, "db": out / "index.db",
        "quarantine": json.loads((out / "index.quarantine.json").read_text()),
    }  # fmt: skip


def test_every_file_gets_exactly_its_findings_keyed_by_path_in_dir(corpus_scan: dict[str, Any]) -> None:
    from datalint.index.kinds import QUALITY_KINDS
    from datalint.scan.quality import SCORED_KINDS

    # The quality kinds judge what the pictures look like (tests/images/test_images_quality.py);
    # this corpus labels what its files are.
    looks = {*QUALITY_KINDS, *SCORED_KINDS} - {"grayscale"}
    found = {key: kinds - looks for key, kinds in findings_by_key(corpus_scan["db"]).items() if kinds - looks}
    expected = {row.relpath: set(row.expected) for row in corpus_scan["rows"] if row.expected}
    assert found == expected


def test_exactly_the_damaged_files_are_quarantined(corpus_scan: dict[str, Any]) -> None:
    damaged = sorted(row.relpath for row in corpus_scan["rows"] if row.damaged)
    quarantined = sorted(entry["key"] for entry in corpus_scan["quarantine"]["samples"])
    assert corpus_scan["code"] == 1 and quarantined == damaged and len(damaged) == 16


def test_non_image_files_are_skipped_and_counted_not_errors(corpus_scan: dict[str, Any]) -> None:
    assert "48 image file(s)" in corpus_scan["stderr"]
    assert (
        "3 other file(s) skipped (class_0/labels.json, class_1/.DS_Store, notes.txt)" in corpus_scan["stderr"]
    )
    assert corpus_scan["summary"]["length"] == 48 and corpus_scan["summary"]["statuses"]["error"] == 0


def test_the_index_records_what_each_file_is(corpus_scan: dict[str, Any]) -> None:
    with contextlib.closing(sqlite3.connect(corpus_scan["db"])) as connection:
        kind, spec = connection.execute("SELECT kind, spec FROM runs").fetchone()
        infos = [json.loads(text) for (text,) in connection.execute("SELECT info FROM samples")]
    assert kind == "images" and spec.endswith("images")
    decoders = {info.get("decoder") for info in infos}
    assert {"opencv", "png", "pillow"} <= decoders  # the cheap path per format


def test_an_empty_folder_says_so_and_exits_0(tmp_path: Path) -> None:
    (tmp_path / "photos").mkdir()
    (tmp_path / "photos" / "README.md").write_text("nothing here yet")
    code, stdout, stderr = run_cli(
        "scan", "--images", str(tmp_path / "photos"), "--db", str(tmp_path / "i.db")
    )
    assert code == 0 and stdout == ""
    assert "no image files in" in stderr and "1 other file(s) skipped (README.md)" in stderr
    assert not (tmp_path / "i.db").exists()


def test_a_missing_folder_is_a_usage_error(tmp_path: Path) -> None:
    code, _, stderr = run_cli("scan", "--images", str(tmp_path / "nowhere"))
    assert code == 2 and f"--images {tmp_path / 'nowhere'}: no such folder" in stderr


def test_ext_and_max_pixels_change_what_is_scanned_and_judged(small_corpus: Any, tmp_path: Path) -> None:
    images, rows = small_corpus
    code, _, stderr = run_cli(
        "scan", "--images", str(images), "--ext", "BMP,.webp", "--max-pixels", "1000",
        "--workers", "1", "--db", str(tmp_path / "i.db"), "--progress", "none",
    )  # fmt: skip
    found = findings_by_key(tmp_path / "i.db")
    bmp_and_webp = sorted(row.relpath for row in rows if row.relpath.endswith((".bmp", ".webp")))
    assert code == 1 and sorted(found) == bmp_and_webp and "3 image file(s)" in stderr
    assert all(kinds == {"decompression_bomb"} for kinds in found.values())  # 96x64 > 1000 pixels


def test_a_file_list_keeps_its_paths_as_keys(small_corpus: Any, tmp_path: Path) -> None:
    images, rows = small_corpus
    clean = next(row.relpath for row in rows if row.kind == "clean")
    cut = next(row.relpath for row in rows if row.kind == "jpeg_trunc90")
    listing = tmp_path / "files.txt"
    listing.write_text(f"# picked by hand\n{clean}\n\n{cut}\ngone/missing.jpg\n")
    code, stdout, _ = run_cli(
        "scan", "--images", str(images), "--files", str(listing), "--workers", "1", "--format", "json",
        "--db", str(tmp_path / "i.db"),
    )  # fmt: skip
    assert code == 1 and json.loads(stdout)["length"] == 3
    assert findings_by_key(tmp_path / "i.db") == {cut: {"corrupt"}, "gone/missing.jpg": {"unreadable"}}


DATASET = """
import numpy as np
from PIL import Image

class Folder:
    '''The ImageFolder convention: `samples` holds (path, class index) pairs.'''

    def __init__(self, root):
        names = sorted(p for p in __import__("os").listdir(root))
        self.samples = [(f"{root}/{name}", -1 if name.startswith("badlabel") else 0) for name in names]

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, index):
        path, label = self.samples[index]
        with Image.open(path) as image:
            pixels = np.asarray(image.convert("RGB").resize((16, 16)))
        if label < 0:
            raise ValueError(f"label {label} for {path}")
        return pixels, label
"""


def test_files_from_dataset_gives_file_damage_and_sample_faults_in_one_index(
    small_corpus: Any, tmp_path: Path
) -> None:
    images, rows = small_corpus
    by_kind = {row.kind: images / row.relpath for row in reversed(rows)}
    folder = tmp_path / "folder"
    folder.mkdir()
    for name, kind in [("a.jpg", "clean"), ("badlabel.jpg", "clean"), ("cut.jpg", "jpeg_trunc50"),
                       ("gray.jpg", "gray_jpeg"), ("crc.png", "png_bad_crc")]:  # fmt: skip
        shutil.copy(by_kind[kind], folder / name)
    (tmp_path / "folderds.py").write_text(textwrap.dedent(DATASET))
    spec = f"{tmp_path / 'folderds.py'}:Folder({str(folder)!r})"
    code, _, _ = run_cli(
        "scan", "--dataset", spec, "--files-from-dataset", "--workers", "2", "--db", str(tmp_path / "i.db"),
        "--progress", "none",
    )  # fmt: skip
    assert code == 1
    assert findings_by_key(tmp_path / "i.db") == {
        f"{folder}/badlabel.jpg": {"error"},
        f"{folder}/crc.png": {"corrupt"},  # Pillow's load() would have passed it: only the file check sees it
        f"{folder}/cut.jpg": {"corrupt"},
        f"{folder}/gray.jpg": {"grayscale"},
    }


def test_files_from_dataset_needs_a_dataset_that_names_its_files(tmp_path: Path) -> None:
    (tmp_path / "plain.py").write_text("ds = [1, 2, 3]\n")
    code, _, stderr = run_cli("scan", "--dataset", f"{tmp_path / 'plain.py'}:ds", "--files-from-dataset")
    assert code == 2 and "does not name its files" in stderr


def test_in_process_scan_finds_the_same(
    corpus_scan: dict[str, Any], small_corpus: Any, tmp_path: Path
) -> None:
    # --workers 0 decodes in the scanning process itself (nothing isolated): the verdicts must not change.
    images, _ = small_corpus
    code, _, _ = run_cli("scan", "--images", str(images), "--workers", "0", "--db", str(tmp_path / "i.db"))
    assert code == 1 and findings_by_key(tmp_path / "i.db") == findings_by_key(corpus_scan["db"])


def test_a_rerun_with_other_verdict_options_is_refused_without_incremental(
    small_corpus: Any, tmp_path: Path
) -> None:
    images, _ = small_corpus
    db = str(tmp_path / "index.db")
    first, _, _ = run_cli("scan", "--images", str(images), "--workers", "2", "--db", db)
    code, _, stderr = run_cli(
        "scan", "--images", str(images), "--max-pixels", "1000", "--db", db, "--no-incremental"
    )
    assert first == 1 and code == 2
    assert "max_pixels=89478485" in stderr and "max_pixels=1000" in stderr and "--rescan" in stderr


def test_file_checks_behind_a_dataset_get_their_own_default_index() -> None:
    from datalint.scan.api import default_index_path

    assert default_index_path("data.py:ds") != default_index_path("data.py:ds", "images")
