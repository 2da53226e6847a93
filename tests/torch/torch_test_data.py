"""Datasets and list writers shared by the training-path tests.

They live in an importable module (not in a test file or conftest) so that DataLoader workers
started with `spawn` can unpickle them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path

import torch
from torch.utils.data import Dataset


class IndexDataset(Dataset[torch.Tensor]):
    """Sample i is the tensor i, so a batch says exactly which samples reached it."""

    def __init__(self, length: int) -> None:
        self.length = length

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int) -> torch.Tensor:
        if not 0 <= index < self.length:
            raise IndexError(index)
        return torch.tensor(index)


class FlakyDataset(IndexDataset):
    """Sample i raises OSError for every i in `bad`, as a truncated file does."""

    def __init__(self, length: int, bad: Iterable[int]) -> None:
        super().__init__(length)
        self.bad = frozenset(bad)

    def __getitem__(self, index: int) -> torch.Tensor:
        if index in self.bad:
            raise OSError(f"image file is truncated (sample {index})")
        return super().__getitem__(index)


class DeadDiskDataset(IndexDataset):
    """Every sample raises, as when the mount holding the files has gone away."""

    def __getitem__(self, index: int) -> torch.Tensor:
        raise OSError(5, "Input/output error", f"/mnt/data/{index:05d}.jpg")


class FolderLikeDataset(IndexDataset):
    """Names its samples like ImageFolder: `samples` is a list of (path, class)."""

    def __init__(self, paths: Sequence[str], bad: Iterable[str] = ()) -> None:
        super().__init__(len(paths))
        self.samples = [(path, 0) for path in paths]
        self.bad = frozenset(bad)

    def __getitem__(self, index: int) -> torch.Tensor:
        if self.samples[index][0] in self.bad:
            raise ValueError(f"cannot decode {self.samples[index][0]}")
        return super().__getitem__(index)


def write_quarantine(
    path: Path,
    indices: Iterable[int],
    *,
    length: int | None,
    keys: Sequence[str | None] | None = None,
    fingerprint: str | None = None,
    dataset: str | None = "tests:ds",
) -> Path:
    """A `quarantine.json` as the scan writes it."""
    index_list = list(indices)
    key_list = list(keys) if keys is not None else [None] * len(index_list)
    pairs = sorted(zip(index_list, key_list, strict=True), key=lambda pair: pair[0])
    document = {
        "format": "datalint-quarantine/1",
        "dataset": dataset,
        "length": length,
        "fingerprint": fingerprint,
        "created": "2026-11-30T10:00:00+00:00",
        "policy": ["error", "crash"],
        "samples": [
            {"index": index, "key": key, "kinds": ["error"], "detail": "OSError: truncated"}
            for index, key in pairs
        ],
    }
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


def seen_indices(batches: Iterable[torch.Tensor]) -> list[int]:
    """Every sample index the batches of an IndexDataset carried, in order."""
    return [int(i) for batch in batches for i in batch.reshape(-1)]
