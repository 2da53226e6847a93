"""What a sample makes the engine hold is bounded: worker output, image reads, structure signatures."""

from __future__ import annotations

import json
import os
import random
import subprocess
import time
from pathlib import Path

import pytest
from engine_support import dataset, descendants, samples, scan, start_scan

from datalint.scan import images, probes

MiB = 1 << 20


def _allocated(pid: int) -> int:
    """Bytes on disk of a worker's output file (its stdout), holes not counted."""
    try:
        return os.stat(f"/proc/{pid}/fd/1").st_blocks * 512
    except OSError:
        return 0


def _watch_output(process: subprocess.Popen[str], folder: Path, until: float) -> tuple[int, int]:
    """(the most disk a worker's output took before the big print, the most it took from 0.5 s after
    it while that sample still ran)."""
    before = after = 0
    printed: float | None = None
    while process.poll() is None and time.monotonic() < until:
        largest = max((_allocated(pid) for pid in descendants(process.pid)), default=0)
        if printed is None and list(folder.glob("printed-*")):
            printed = time.monotonic()
        if not list(folder.glob("printing-*")):
            before = max(before, largest)
        elif printed is not None and time.monotonic() - printed > 0.5:
            after = max(after, largest)
        time.sleep(0.02)
    return before, after


@pytest.mark.slow
def test_a_worker_output_file_stays_bounded_however_much_samples_print(tmp_path: Path) -> None:
    # Ten samples print 4 MiB each, then one prints 24 MiB at once and waits 1.5 s: the file is
    # emptied between samples and cut back while a sample runs, so it never keeps what was printed.
    spec = dataset(
        f"make(12, {str(tmp_path)!r}, pause=0.1, print_lots={list(range(10))}, print_then_wait=[11])"
    )
    db = tmp_path / "o.db"
    process = start_scan("--dataset", spec, "--db", str(db), "--workers", "1", "--progress", "none")
    before, after = _watch_output(process, tmp_path, time.monotonic() + 120)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 0 and "internal error" not in stderr, stderr
    assert {row["status"] for row in samples(db).values()} == {"ok"}
    assert 4 * MiB <= before < 10 * MiB, f"{before / MiB:.1f} MiB"  # unbounded: 40 MiB
    assert 0 < after < 4 * MiB, f"{after / MiB:.1f} MiB"  # unbounded: 64 MiB


@pytest.mark.slow
def test_an_image_file_too_large_to_read_is_its_own_finding(tmp_path: Path) -> None:
    folder = tmp_path / "images"
    folder.mkdir()
    from PIL import Image

    for number in range(3):
        Image.new("RGB", (8, 8), (number, 0, 0)).save(folder / f"{number}.png")
    huge = folder / "huge.jpg"
    with huge.open("wb") as handle:  # sparse: it takes no disk, but a whole read would take 6 GiB
        handle.truncate(6 << 30)
    db = tmp_path / "i.db"
    outcome = scan("--images", str(folder), "--db", str(db), "--workers", "1", "--format", "json")
    rows = {row["key"]: row for row in samples(db).values()}
    assert outcome.code == 1 and outcome.summary["quarantined"] == 1
    assert {rows[f"{n}.png"]["status"] for n in range(3)} == {"ok"}
    reported = json.loads(rows["huge.jpg"]["reported"])
    assert reported[0]["kind"] == "unreadable" and "limit for one image file" in reported[0]["detail"]
    assert images.MAX_FILE_BYTES < 6 << 30


def test_nested_lists_give_a_signature_of_constant_size() -> None:
    grid = [[[float(i + j + k) for k in range(40)] for j in range(40)] for i in range(40)]
    text = json.dumps(probes.signature(grid), separators=(",", ":"))
    assert len(text) < 300  # was 757 KB: one node per position, at every level
    assert probes.signature(grid)["fields"]["*"]["fields"]["*"]["length"] == 40


def test_annotation_lists_are_summarised_with_their_length_ranges() -> None:
    rng = random.Random(0)
    annotations = [
        {"bbox": [rng.random() for _ in range(4)], "segmentation": [[rng.random()] * rng.randint(6, 120)]}
        for _ in range(40)
    ]
    sig = probes.signature({"annotations": annotations})
    text = json.dumps(sig, separators=(",", ":"))
    assert len(text) < 2048
    item = sig["fields"]["annotations"]["fields"]["*"]
    polygon = item["fields"]["segmentation"]["fields"]["*"]
    assert (
        polygon["min_length"] >= 6 and polygon["length"] <= 120 and polygon["min_length"] < polygon["length"]
    )


ODD_LIST = """
import torch

class Boxes:
    def __len__(self):
        return 30

    def __getitem__(self, index):
        odd = torch.zeros(3, 9, 9) if index == 17 else torch.zeros(3, 8, 8)
        return {"crops": [torch.zeros(3, 8, 8), odd, torch.zeros(3, 8, 8)], "label": index % 3}

ds = Boxes()
"""


def test_an_odd_element_of_a_summarised_list_is_still_found(tmp_path: Path) -> None:
    module = tmp_path / "odd_list.py"
    module.write_text(ODD_LIST)
    outcome = scan(
        "--dataset", f"{module}:ds", "--db", str(tmp_path / "l.db"), "--workers", "1", "--format", "json"
    )
    worst = outcome.summary["worst"]
    assert outcome.code == 1 and [entry["index"] for entry in worst] == [17]
    assert "shape_mismatch" in worst[0]["kinds"]
