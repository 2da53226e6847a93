"""quarantine_filter around samplers and batch samplers a user already has."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from torch.utils.data import (
    BatchSampler,
    DataLoader,
    DistributedSampler,
    RandomSampler,
    Sampler,
    SequentialSampler,
    SubsetRandomSampler,
    WeightedRandomSampler,
)
from torch_test_data import IndexDataset, seen_indices, write_quarantine

from datalint.errors import DatalintError, UsageError
from datalint.torch import Quarantine, quarantine_filter

BAD = [1, 2, 9, 30, 31, 32, 33, 59]
GOOD = sorted(set(range(60)) - set(BAD))


def test_filtered_random_sampler_in_a_loader_with_workers(tmp_path: Path) -> None:
    dataset = IndexDataset(60)
    path = write_quarantine(tmp_path / "quarantine.json", BAD, length=60)
    sampler = quarantine_filter(RandomSampler(dataset), path)
    loader = DataLoader(dataset, batch_size=5, sampler=sampler, num_workers=2, multiprocessing_context="fork")
    assert sorted(seen_indices(loader)) == GOOD
    assert len(sampler) == len(GOOD)


@pytest.mark.parametrize("drop_last", [False, True])
def test_batch_sampler_keeps_its_batch_size_by_refilling(drop_last: bool) -> None:
    dataset = IndexDataset(60)
    quarantine = Quarantine.from_indices(BAD, length=60)
    batches = quarantine_filter(BatchSampler(SequentialSampler(dataset), 7, drop_last), quarantine)
    loader = DataLoader(dataset, batch_sampler=batches, num_workers=2, multiprocessing_context="fork")
    sizes = [len(batch) for batch in loader]
    # 52 good samples: 7 full batches of 7, then 3 left over.
    assert sizes == [7] * 7 + ([] if drop_last else [3])
    assert len(batches) == len(sizes)
    assert seen_indices(loader) == (GOOD[:49] if drop_last else GOOD)


def test_weighted_sampler_never_draws_a_quarantined_sample_and_keeps_its_length() -> None:
    weights = torch.ones(60)
    weights[BAD] = 50.0  # the bad samples would otherwise dominate the draw
    sampler = quarantine_filter(
        WeightedRandomSampler(weights.tolist(), num_samples=3000, generator=torch.Generator().manual_seed(0)),
        Quarantine.from_indices(BAD, length=60),
    )
    drawn = list(sampler)
    assert len(drawn) == len(sampler) == 3000
    assert not set(drawn) & set(BAD)
    assert set(drawn) == set(GOOD)


def test_weighted_sampler_without_replacement_that_cannot_be_filled_is_refused() -> None:
    with pytest.raises(DatalintError, match="only 52 non-quarantined samples"):
        quarantine_filter(
            WeightedRandomSampler([1.0] * 60, num_samples=55, replacement=False),
            Quarantine.from_indices(BAD, length=60),
        )


def test_weighted_sampler_whose_weight_is_all_quarantined_says_so(tmp_path: Path) -> None:
    weights = [0.0] * 60
    for index in BAD:
        weights[index] = 1.0  # only the bad samples were ever drawn
    listed = write_quarantine(tmp_path / "quarantine.json", BAD, length=60)
    with pytest.raises(DatalintError) as caught:
        quarantine_filter(WeightedRandomSampler(weights, num_samples=10), listed)
    message = str(caught.value)
    assert "nothing left to draw" in message and "multinomial" not in message
    assert "every one of the 8 samples with a positive weight is quarantined (8 of 60" in message


class LengthBuckets(Sampler[list[int]]):
    """A user's own batch sampler: variable batch sizes, no `batch_size`, no dataset attribute."""

    def __iter__(self) -> Iterator[list[int]]:
        yield from ([list(range(start, start + 10)) for start in range(0, 30, 10)]
                    + [list(range(start, start + 5)) for start in range(30, 60, 5)])

    def __len__(self) -> int:
        return 9


def test_own_batch_sampler_needs_the_dataset_then_keeps_its_batch_sizes() -> None:
    quarantine = Quarantine.from_indices(BAD, length=60)
    with pytest.raises(UsageError, match=r"which dataset the LengthBuckets samples from; pass dataset="):
        quarantine_filter(LengthBuckets(), quarantine)
    batches = list(quarantine_filter(LengthBuckets(), quarantine, dataset=IndexDataset(60)))
    assert [len(b) for b in batches] == [10, 10, 10, 5, 5, 5, 5, 2]
    assert [i for b in batches for i in b] == GOOD


def test_own_index_sampler_and_subset_sampler() -> None:
    dataset, quarantine = IndexDataset(60), Quarantine.from_indices(BAD, length=60)
    evens = quarantine_filter(iter(range(0, 60, 2)), quarantine, dataset=dataset)
    assert list(evens) == [i for i in GOOD if i % 2 == 0]
    tensors = quarantine_filter(list(torch.arange(60)), quarantine, dataset=dataset)  # 0-d tensors
    assert list(tensors) == GOOD
    subset = quarantine_filter(SubsetRandomSampler(range(20)), quarantine, dataset=dataset)
    assert sorted(subset) == [i for i in GOOD if i < 20] and len(subset) == 17


def test_distributed_sampler_is_refused_with_the_way_out() -> None:
    dataset = IndexDataset(60)
    with pytest.raises(UsageError, match=r"DDP hangs\. Use DistributedQuarantineSampler"):
        quarantine_filter(
            BatchSampler(DistributedSampler(dataset, 2, 0), 4, False), Quarantine.from_indices(BAD, length=60)
        )
