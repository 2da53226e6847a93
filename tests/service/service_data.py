"""Datasets for the service tests: scanned by the service's jobs and loaded by real DataLoaders.

`make(n, bad_every, delay)` is what the service scans (`dataset = "service_data.py:make(...)"`): every
`bad_every`-th sample raises, and `delay` seconds per sample make a scan slow enough to watch, kill or
interrupt. `Failing` is the training side's dataset: the samples in `bad` raise at load time.
"""

from __future__ import annotations

import time

import numpy as np


class Planted:
    def __init__(self, n: int, bad_every: int, delay: float) -> None:
        self.n, self.bad_every, self.delay = n, bad_every, delay

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: int) -> dict[str, object]:
        if self.delay:
            time.sleep(self.delay)
        if self.bad_every and index % self.bad_every == 0:
            raise OSError(f"sample {index} is unreadable")
        return {"x": np.full(4, index, dtype=np.float32), "label": index % 3}


def make(n: int = 60, bad_every: int = 10, delay: float = 0.0) -> Planted:
    return Planted(n, bad_every, delay)


def bad_indices(n: int = 60, bad_every: int = 10) -> list[int]:
    return [i for i in range(n) if bad_every and i % bad_every == 0]


class Failing:
    """A torch-style dataset whose samples in `bad` raise (at training time, as a flaky mount does)."""

    def __init__(self, n: int, bad: set[int]) -> None:
        self.n, self.bad = n, bad

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: int) -> np.ndarray:
        if index in self.bad:
            raise OSError(f"read error at sample {index}")
        return np.full(2, index, dtype=np.float32)
