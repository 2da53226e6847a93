"""What a decoder prints while `dataset[i]` runs is that sample's: real JPEGs, real decoders, real scans."""

from __future__ import annotations

import io
import json
import subprocess
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from scan_support import PYTHON, ROOT, samples

from datalint.scan.images import classify_native_stderr

TRUNCATED = 2  # of 4 samples; the others are intact

OPENCV_READER = """
import sys
import cv2

class Photos:
    def __init__(self, paths):
        self.paths = paths
    def __len__(self):
        return len(self.paths)
    def __getitem__(self, i):
        print(f"reading sample {i}", file=sys.stderr)  # the dataset's own words are not a finding
        image = cv2.imread(self.paths[i])
        assert image is not None, self.paths[i]  # OpenCV returned pixels: nothing raised
        return image
"""

# torchvision.datasets.folder.pil_loader and ImageFolder's `samples`, without torchvision; the
# module sets LOAD_TRUNCATED_IMAGES, as many training scripts do, and datalint turns it off again.
PILLOW_READER = """
from PIL import Image, ImageFile

ImageFile.LOAD_TRUNCATED_IMAGES = True

def pil_loader(path):
    with open(path, "rb") as f:
        image = Image.open(f)
        return image.convert("RGB")

class Photos:
    def __init__(self, paths):
        self.samples = [(path, 0) for path in paths]
    def __len__(self):
        return len(self.samples)
    def __getitem__(self, i):
        path, target = self.samples[i]
        return pil_loader(path), target
"""


@pytest.fixture(scope="module")
def photos(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    folder = tmp_path_factory.mktemp("photos")
    rng = np.random.default_rng(31)
    paths = []
    for i in range(4):
        buffer = io.BytesIO()
        Image.fromarray(rng.integers(0, 256, (64, 96, 3), dtype=np.uint8)).save(buffer, "JPEG", quality=90)
        data = buffer.getvalue()
        path = folder / f"photo_{i}.jpg"
        path.write_bytes(data[:-300] if i == TRUNCATED else data)  # cut inside the scan data
        paths.append(str(path))
    return paths


def _scan(tmp_path: Path, reader: str, paths: list[str], workers: str) -> tuple[dict, dict[int, dict], str]:
    (tmp_path / "photos_ds.py").write_text(reader + f"\nds = Photos({paths!r})\n")
    db = tmp_path / "photos.db"
    argv = ["--dataset", f"{tmp_path / 'photos_ds.py'}:ds", "--db", str(db), "--workers", workers]
    done = subprocess.run(
        [PYTHON, "-m", "datalint", "scan", *argv, "--format", "json"],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr  # something quarantined
    return json.loads(done.stdout), samples(db), done.stderr


def _reported(row: dict) -> list[dict]:
    return json.loads(row["reported"]) if row["reported"] else []


@pytest.mark.parametrize("workers", ["1", "0"])
def test_a_truncated_jpeg_opencv_returns_is_corrupt_with_libjpegs_words(
    tmp_path: Path, photos: list[str], workers: str
) -> None:
    # --workers 0 captures by redirecting fd 2 (and shows the text again); a worker reads its output back.
    summary, rows, stderr = _scan(tmp_path, OPENCV_READER, photos, workers)
    assert all(row["status"] == "ok" for row in rows.values())  # __getitem__ returned every time
    assert _reported(rows[TRUNCATED]) == [
        {"kind": "corrupt", "detail": "libjpeg: Premature end of JPEG file"}
    ]
    assert not any(_reported(row) for index, row in rows.items() if index != TRUNCATED)
    assert summary["findings"] == {"corrupt": 1} and summary["quarantined"] == 1
    assert [entry["index"] for entry in summary["worst"]] == [TRUNCATED]
    if workers == "0":  # in this process the dataset's own stderr still shows
        assert "reading sample 3" in stderr and "Premature end of JPEG file" in stderr


def test_a_truncated_jpeg_pillow_loads_is_caught_though_the_module_allowed_truncation(
    tmp_path: Path, photos: list[str]
) -> None:
    # Pillow's libjpeg prints nothing; with LOAD_TRUNCATED_IMAGES off again its decode raises.
    _, rows, _ = _scan(tmp_path, PILLOW_READER, photos, "1")
    assert rows[TRUNCATED]["status"] == "error" and "truncated" in rows[TRUNCATED]["error_message"]
    assert all(row["status"] == "ok" and not _reported(row) for i, row in rows.items() if i != TRUNCATED)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Premature end of JPEG file\n", [("corrupt", "libjpeg: Premature end of JPEG file")]),
        (
            "epoch 3\nCorrupt JPEG data: 3 extraneous bytes before marker 0xd9\n",
            [("corrupt", "libjpeg: Corrupt JPEG data: 3 extraneous bytes before marker 0xd9")],
        ),
        (
            "Corrupt JPEG data: 1 extraneous bytes before marker 0xe1\n",
            [("decoder_warning", "libjpeg: Corrupt JPEG data: 1 extraneous bytes before marker 0xe1")],
        ),
        (
            "libpng warning: iCCP: known incorrect sRGB profile\n",
            [("decoder_warning", "libpng: libpng warning: iCCP: known incorrect sRGB profile")],
        ),
        (
            "Fax4Decode: Bad code word at line 7\n",
            [("corrupt", "libtiff: Fax4Decode: Bad code word at line 7")],
        ),
        ("loading JPEG file 7: premature end? no\nWarning: something of the user's\n", []),
    ],
)
def test_only_what_a_native_decoder_wrote_is_judged(text: str, expected: list[tuple[str, str]]) -> None:
    assert [(f.kind, f.detail) for f in classify_native_stderr(text)] == expected
