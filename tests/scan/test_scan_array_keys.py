"""Keys read from a numpy array of paths, or of (path, label) rows, as `samples` / `imgs`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import datalint

DATASET = '''
import numpy as np
import torch
from torch.utils.data import Dataset


class PathArray(Dataset):
    def __init__(self, rows):
        paths = [f"train/img-{i}.png" for i in range(8)]
        # (path, label) rows become one string array; plain paths a 1-D one.
        self.samples = np.array([(p, str(i % 2)) for i, p in enumerate(paths)]) if rows else np.array(paths)

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, index):
        if index == 5:
            raise OSError("image file is truncated (12 bytes not processed)")
        return torch.zeros(2)


class NumberArray(PathArray):
    def __init__(self):
        self.samples = np.arange(8)
'''


@pytest.mark.parametrize("rows", [False, True])
def test_a_numpy_array_of_paths_names_the_quarantined_sample(tmp_path: Path, rows: bool) -> None:
    (tmp_path / "arrays.py").write_text(DATASET, encoding="utf-8")
    summary = datalint.scan(f"{tmp_path / 'arrays.py'}:PathArray({rows})", db=tmp_path / "a.db", workers=1)
    document = json.loads(Path(summary.quarantine_path).read_text(encoding="utf-8"))
    assert [(entry["index"], entry["key"]) for entry in document["samples"]] == [(5, "train/img-5.png")]
    assert document["fingerprint"] is not None


def test_an_array_of_numbers_is_no_key(tmp_path: Path) -> None:
    (tmp_path / "arrays.py").write_text(DATASET, encoding="utf-8")
    summary = datalint.scan(f"{tmp_path / 'arrays.py'}:NumberArray()", db=tmp_path / "n.db", workers=1)
    document = json.loads(Path(summary.quarantine_path).read_text(encoding="utf-8"))
    assert [entry["index"] for entry in document["samples"]] == [5]
    assert document["samples"][0].get("key") is None
    assert document["fingerprint"] is None
