"""A training process for the service tests: a real DataLoader with 2 workers over a guarded dataset.

    python service_training.py URL N BAD_START BAD_STEP [DELAY]

The samples BAD_START, BAD_START + BAD_STEP, ... fail; each worker sends its failures to URL from
its background sender. Prints the number of batches trained on.
"""

from __future__ import annotations

import sys
import time

import numpy as np
from service_data import Failing
from torch.utils.data import DataLoader

from datalint.torch import GuardedDataset


class Slow(Failing):
    def __init__(self, n: int, bad: set[int], delay: float) -> None:
        super().__init__(n, bad)
        self.delay = delay

    def __getitem__(self, index: int) -> np.ndarray:
        time.sleep(self.delay)
        return super().__getitem__(index)


def main() -> None:
    url, n, start, step = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    delay = float(sys.argv[5]) if len(sys.argv) > 5 else 0.0
    bad = set(range(start, n, step))
    dataset = GuardedDataset(Slow(n, bad, delay), record=url, max_failures=None)
    loader = DataLoader(dataset, batch_size=8, num_workers=2, persistent_workers=False)
    batches = sum(1 for _ in loader)
    print(batches)


if __name__ == "__main__":
    main()
