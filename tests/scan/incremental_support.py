"""Helpers for the incremental-scan and watch tests: real image files, an ImageFolder-style dataset."""

from __future__ import annotations

import json
import subprocess
import zlib
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image
from scan_support import PYTHON, ROOT

_SEEDS = iter(range(1, 1 << 30))


def write_image(path: Path, side: int = 40) -> Path:
    """A small PNG with pixels no other file of the test shares (so no `duplicate` findings)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    seed = zlib.crc32(str(path).encode()) ^ next(_SEEDS)
    pixels = np.random.default_rng(seed).integers(0, 255, (side, side, 3), dtype=np.uint8)
    Image.fromarray(pixels).save(path, format="PNG")
    return path


def damage(path: Path) -> Path:
    """Cut a PNG after its first 200 bytes: a truncated file the scan reports `corrupt`."""
    data = path.read_bytes() if path.exists() else write_image(path).read_bytes()
    path.write_bytes(data[:200])
    return path


def quarantined_keys(quarantine: Path) -> dict[str, int]:
    """key -> index of every entry of a quarantine list."""
    document = json.loads(quarantine.read_text())
    return {entry["key"]: entry["index"] for entry in document["samples"]}


FOLDER_DATASET = '''
import os
import numpy as np
from PIL import Image

class Folder:
    """ImageFolder's conventions: classes are sub-folders, samples a sorted list of (path, class)."""

    def __init__(self, root):
        classes = sorted(d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d)))
        self.samples = [
            (os.path.join(root, c, name), i)
            for i, c in enumerate(classes)
            for name in sorted(os.listdir(os.path.join(root, c)))
        ]

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, index):
        path, target = self.samples[index]
        with Image.open(path) as im:
            return np.asarray(im.convert("RGB"), dtype=np.float32) / 255, target
'''

KEYED_DATASET = '''
import json
import os

class Keyed:
    """Records named by id; ids come from a JSON file that grows between runs."""

    def __init__(self, ids_file):
        with open(ids_file) as f:
            self.ids = json.load(f)

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, index):
        name = self.ids[index]
        if name.startswith("bad"):
            raise ValueError(f"record {name} is damaged")
        return {"x": [float(len(name))] * 4, "y": index % 3}

    def datalint_key(self, index):
        return self.ids[index]
'''


def scan_in_child(*argv: str, cwd: Path = ROOT) -> dict[str, Any]:
    """`python -m datalint scan ARGV --format json` as a real child process; its JSON summary."""
    done = subprocess.run(
        [PYTHON, "-m", "datalint", "scan", *argv, "--format", "json", "--workers", "2"],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode in (0, 1), done.stderr
    summary: dict[str, Any] = json.loads(done.stdout)
    summary["stderr"] = done.stderr
    return summary
