"""Issue 30 (the eighth set of real repositories) against the real thing.

A worker seed of `base + worker_id` replays the same draws every epoch, while
`torch.initial_seed()` does not (DL402); a stream fed from a multiprocessing queue hands each item
to one worker, while a thread queue is copied whole into each (DL501). Each test runs real worker
processes, then lints the same source.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from real_run_support import lint, load

from datalint.lint.module import UNKNOWN, Module

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.timeout(60)


SEEDED = textwrap.dedent(
    """
    import random

    import torch
    from torch.utils.data import DataLoader, Dataset


    class Noise(Dataset):
        def __len__(self):
            return 4

        def __getitem__(self, i):
            return random.random()


    def seed_per_worker(worker_id):
        random.seed(SEED_EXPRESSION)


    def epochs(count):
        loader = DataLoader(
            Noise(), batch_size=None, num_workers=2, worker_init_fn=seed_per_worker,
            multiprocessing_context="fork",
        )
        return [sorted(float(x) for x in loader) for _ in range(count)]
    """
)


def test_dl402_a_seed_of_base_plus_worker_id_repeats_every_epoch_and_is_flagged(tmp_path: Path) -> None:
    fixed = SEEDED.replace("SEED_EXPRESSION", "42 + worker_id")
    epoch_one, epoch_two = load(tmp_path, fixed, "dl402_fixed").epochs(2)
    assert epoch_one == epoch_two  # the "random" draws of epoch 2 are epoch 1's
    drawn = SEEDED.replace("SEED_EXPRESSION", "torch.initial_seed() % 2**32")
    epoch_one, epoch_two = load(tmp_path, drawn, "dl402_drawn").epochs(2)
    assert epoch_one != epoch_two

    found = lint("DL402", fixed)
    assert [f.line for f in found] == [fixed.splitlines().index("    random.seed(42 + worker_id)") + 1]
    assert "the same every epoch" in found[0].message and "torch.initial_seed() % 2**32" in found[0].message
    assert lint("DL402", drawn) == []


FED = textwrap.dedent(
    """
    import multiprocessing
    import queue

    from torch.utils.data import DataLoader, IterableDataset


    class Fed(IterableDataset):
        def __init__(self, jobs, count):
            self.jobs = jobs
            self.count = count

        def __iter__(self):
            for _ in range(self.count):
                yield self.jobs.get(timeout=10)
    """
)
STREAMS = FED + textwrap.dedent(
    """

    def drain(jobs, items, workers):
        for item in items:
            jobs.put(item)
        per_worker = len(items) // workers
        loader = DataLoader(
            Fed(jobs, per_worker), batch_size=None, num_workers=workers, multiprocessing_context="fork"
        )
        return sorted(int(x) for x in loader)


    def shared():
        return drain(multiprocessing.get_context("fork").Queue(), list(range(6)), 2)


    def copied():
        return drain(queue.Queue(), list(range(6)), 2)
    """
)


def test_dl501_a_multiprocessing_queue_hands_each_item_to_one_worker_and_stays_silent(tmp_path: Path) -> None:
    streams = load(tmp_path, STREAMS, "dl501_queues")
    assert streams.shared() == list(range(6))  # each item once
    assert streams.copied() == [0, 0, 1, 1, 2, 2]  # each worker drains its own copy of the queue

    # The linter is told the queue by the construction: every one in the file must hand in a shared one.
    shared_source = FED + "\nloader = DataLoader(Fed(multiprocessing.Queue(), 3), num_workers=2)\n"
    assert lint("DL501", shared_source) == []
    copied_source = FED + "\nloader = DataLoader(Fed(queue.Queue(), 3), num_workers=2)\n"
    iter_line = FED.splitlines().index("    def __iter__(self):") + 1
    assert [f.line for f in lint("DL501", copied_source)] == [iter_line]


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("w = 0\n    if fast:\n        w = 0", 0),
        ("w = 0\n    if fast:\n        w = 4", UNKNOWN),
        ("w = 0\n    if fast:\n        w = 0\n    w += extra", UNKNOWN),
        ("w = 0\n    for w in range(3):\n        pass", UNKNOWN),
        ("w = 0\n    w = extra", UNKNOWN),
    ],
)
def test_a_loader_argument_bound_to_one_literal_on_every_path_is_that_literal(
    body: str, expected: object
) -> None:
    source = (
        "from torch.utils.data import DataLoader\n\n\n"
        f"def build(ds, fast, extra):\n    {body}\n    return DataLoader(ds, num_workers=w)\n"
    )
    arg = Module.parse(source, "case.py").loader_calls[0].arg("num_workers")
    assert arg.value is expected if expected is UNKNOWN else arg.value == expected
