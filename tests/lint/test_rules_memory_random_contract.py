"""The DL3xx/DL4xx/DL5xx rules against the real thing.

Each test runs a pipeline through a real torch DataLoader (real worker processes) to show the
failure the rule is about, and lints the same source: the rule fires on the broken version
and stays silent on the fixed one. The rule files' own examples are checked by
test_rule_examples.py; these tests keep the rules honest about what torch really does.
"""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest
from real_run_support import lint, load

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.timeout(60)


def line_of(source: str, text: str) -> int:
    """The 1-based line of `source` that contains `text` (exactly one must)."""
    lines = [n for n, line in enumerate(source.splitlines(), start=1) if text in line]
    assert len(lines) == 1, (text, lines)
    return lines[0]


def values(loader: object) -> list[float]:
    return [float(x) for batch in loader for x in batch.reshape(-1)]  # type: ignore[attr-defined]


RNG_IN_INIT = textwrap.dedent(
    """
    import numpy as np
    import torch
    from torch.utils.data import Dataset


    class Jitter(Dataset):
        def __init__(self, n):
            self.n = n
            self.rng = np.random.default_rng(0)

        def __len__(self):
            return self.n

        def __getitem__(self, index):
            return torch.tensor(self.rng.random())
    """
)

RNG_PER_WORKER = textwrap.dedent(
    """
    import numpy as np
    import torch
    from torch.utils.data import Dataset


    class Jitter(Dataset):
        def __init__(self, n):
            self.n = n
            self.rng = None

        def __len__(self):
            return self.n

        def __getitem__(self, index):
            if self.rng is None:
                info = torch.utils.data.get_worker_info()
                self.rng = np.random.default_rng(info.seed if info else None)
            return torch.tensor(self.rng.random())
    """
)


def test_dl401_rng_made_in_init_repeats_across_workers_and_is_flagged(tmp_path: Path) -> None:
    bad = load(tmp_path, RNG_IN_INIT, "dl401_bad")
    loader = torch.utils.data.DataLoader(
        bad.Jitter(4), batch_size=1, num_workers=2, multiprocessing_context="fork"
    )
    drawn = values(loader)
    assert drawn[0] == drawn[1] and drawn[2] == drawn[3]  # worker 0 and worker 1 draw the same numbers
    assert [f.line for f in lint("DL401", RNG_IN_INIT)] == [line_of(RNG_IN_INIT, "default_rng(0)")]

    good = load(tmp_path, RNG_PER_WORKER, "dl401_good")
    loader = torch.utils.data.DataLoader(
        good.Jitter(4), batch_size=1, num_workers=2, multiprocessing_context="fork"
    )
    assert len(set(values(loader))) == 4
    assert lint("DL401", RNG_PER_WORKER) == []


UNSHARDED = textwrap.dedent(
    """
    import torch
    from torch.utils.data import IterableDataset


    class Numbers(IterableDataset):
        def __init__(self, n: int):
            self.n = n

        def __iter__(self):
            for i in range(self.n):
                yield torch.tensor(i)
    """
)

SHARDED = UNSHARDED.replace(
    "        for i in range(self.n):",
    "        info = torch.utils.data.get_worker_info()\n"
    "        start, step = (info.id, info.num_workers) if info else (0, 1)\n"
    "        for i in range(start, self.n, step):",
)


def test_dl501_unsharded_stream_is_duplicated_per_worker_and_is_flagged(tmp_path: Path) -> None:
    bad = load(tmp_path, UNSHARDED, "dl501_bad")
    loader = torch.utils.data.DataLoader(
        bad.Numbers(4), batch_size=None, num_workers=2, multiprocessing_context="fork"
    )
    assert sorted(values(loader)) == [0, 0, 1, 1, 2, 2, 3, 3]
    assert [f.line for f in lint("DL501", UNSHARDED)] == [line_of(UNSHARDED, "def __iter__")]

    good = load(tmp_path, SHARDED, "dl501_good")
    loader = torch.utils.data.DataLoader(
        good.Numbers(4), batch_size=None, num_workers=2, multiprocessing_context="fork"
    )
    assert sorted(values(loader)) == [0, 1, 2, 3]
    assert lint("DL501", SHARDED) == []


EPOCHS_WITHOUT_SET_EPOCH = textwrap.dedent(
    """
    import torch
    from torch.utils.data import DataLoader, DistributedSampler


    def orders(dataset, epochs):
        sampler = DistributedSampler(dataset, num_replicas=1, rank=0)
        loader = DataLoader(dataset, batch_size=None, sampler=sampler)
        seen = []
        for epoch in range(epochs):
            seen.append([int(x) for x in loader])
        return seen
    """
)


def test_dl403_sampler_without_set_epoch_repeats_its_order_and_is_flagged(tmp_path: Path) -> None:
    bad = load(tmp_path, EPOCHS_WITHOUT_SET_EPOCH, "dl403_bad")
    first, second = bad.orders(list(range(8)), 2)
    assert first == second and first != sorted(first)  # shuffled once, then the same every epoch
    assert [f.line for f in lint("DL403", EPOCHS_WITHOUT_SET_EPOCH)] == [
        line_of(EPOCHS_WITHOUT_SET_EPOCH, "sampler = DistributedSampler")
    ]

    fixed = EPOCHS_WITHOUT_SET_EPOCH.replace(
        "    for epoch in range(epochs):\n",
        "    for epoch in range(epochs):\n        sampler.set_epoch(epoch)\n",
    )
    good = load(tmp_path, fixed, "dl403_good")
    first, second = good.orders(list(range(8)), 2)
    assert first != second
    assert lint("DL403", fixed) == []


SHARED_SPLIT = textwrap.dedent(
    """
    import torch
    from torch.utils.data import Dataset, random_split


    class Scaled(Dataset):
        def __init__(self):
            self.factor = 1

        def __len__(self):
            return 10

        def __getitem__(self, i):
            return i * self.factor


    def splits():
        train, val = random_split(Scaled(), [5, 5], generator=torch.Generator().manual_seed(0))
        val.dataset.factor = 0
        return train, val
    """
)


def test_dl405_assigning_through_one_split_changes_the_other_and_is_flagged(tmp_path: Path) -> None:
    module = load(tmp_path, SHARED_SPLIT, "dl405_case")
    train, _ = module.splits()
    assert [train[i] for i in range(5)] == [0] * 5  # the training split lost its data too
    assert [f.line for f in lint("DL405", SHARED_SPLIT)] == [line_of(SHARED_SPLIT, "val.dataset.factor")]


NONE_SAMPLE = textwrap.dedent(
    """
    import torch
    from torch.utils.data import Dataset


    class Sometimes(Dataset):
        def __len__(self):
            return 4

        def __getitem__(self, i):
            if i == 2:
                return None
            return torch.tensor(i)
    """
)


def test_dl502_none_sample_breaks_the_default_collate_and_is_flagged(tmp_path: Path) -> None:
    module = load(tmp_path, NONE_SAMPLE, "dl502_case")
    loader = torch.utils.data.DataLoader(module.Sometimes(), batch_size=4)
    with pytest.raises(TypeError, match="NoneType"):
        next(iter(loader))
    assert [f.line for f in lint("DL502", NONE_SAMPLE)] == [line_of(NONE_SAMPLE, "return None")]


NO_LEN = textwrap.dedent(
    """
    import torch
    from torch.utils.data import DataLoader, Dataset


    class Unsized(Dataset):
        def __getitem__(self, i):
            return torch.tensor(i)


    def loader():
        return DataLoader(Unsized(), batch_size=2, shuffle=True)
    """
)


def test_dl507_dataset_without_len_fails_with_the_default_sampler_and_is_flagged(tmp_path: Path) -> None:
    module = load(tmp_path, NO_LEN, "dl507_case")
    with pytest.raises(TypeError, match="has no len"):
        next(iter(module.loader()))
    findings = lint("DL507", NO_LEN)
    assert [f.line for f in findings] == [line_of(NO_LEN, "class Unsized")] and "__len__" in findings[
        0
    ].message


KEPT_BATCHES = textwrap.dedent(
    """
    import gc
    import resource

    import torch
    from torch.utils.data import DataLoader, Dataset


    class Zeros(Dataset):
        def __len__(self):
            return 300

        def __getitem__(self, i):
            return torch.zeros(8)


    if __name__ == "__main__":
        resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
        views = []
        try:
            for batch in DataLoader(Zeros(), batch_size=2, num_workers=1, multiprocessing_context="fork"):
                views.append(batch.numpy())
        except RuntimeError as exc:
            print("numpy views:", exc)
        views.clear()
        gc.collect()
        copies = []
        for batch in DataLoader(Zeros(), batch_size=2, num_workers=1, multiprocessing_context="fork"):
            copies.append(batch.clone())
        print("copies kept:", len(copies))
    """
)


@pytest.mark.slow
def test_dl304_kept_numpy_views_exhaust_file_descriptors_copies_do_not(tmp_path: Path) -> None:
    import subprocess

    script = tmp_path / "keep.py"
    script.write_text(KEPT_BATCHES)
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert "numpy views: Too many open files" in run.stdout, (
        run.stdout + run.stderr
    )  # `.numpy()` shares storage
    assert "copies kept: 150" in run.stdout
    assert [f.line for f in lint("DL304", KEPT_BATCHES)] == [
        line_of(KEPT_BATCHES, "views.append")
    ]  # not the copies


UNSIZED_STREAM = textwrap.dedent(
    """
    import torch
    from torch.utils.data import DataLoader, IterableDataset


    class Lines(IterableDataset):
        def __iter__(self):
            yield from range(3)


    def steps(epochs):
        loader = DataLoader(Lines(), batch_size=2)
        return epochs * len(loader)
    """
)


def test_dl508_len_of_an_unsized_stream_raises_and_is_flagged(tmp_path: Path) -> None:
    module = load(tmp_path, UNSIZED_STREAM, "dl508_case")
    with pytest.raises(TypeError, match="object of type 'Lines' has no len"):
        module.steps(2)
    assert [f.line for f in lint("DL508", UNSIZED_STREAM)] == [line_of(UNSIZED_STREAM, "len(loader)")]
