"""The lazy (Feistel) epoch order: a permutation, split across ranks, skipping quarantined samples."""

from __future__ import annotations

import numpy as np
import pytest
from torch.utils.data import DataLoader

from datalint.torch import DistributedQuarantineSampler, Quarantine, QuarantineSampler
from datalint.training.permutation import EXACT_BELOW, FeistelPermutation, GoodIndexMap, choose_order
from tests.torch.torch_test_data import IndexDataset


@pytest.mark.parametrize("n", [1, 2, 3, 5, 16, 17, 255, 256, 257, 1000, 4097])
def test_every_position_maps_to_a_distinct_value_below_n(n: int) -> None:
    values = FeistelPermutation.seeded(n, seed=7, epoch=3)(np.arange(n))
    assert sorted(values.tolist()) == list(range(n))


def test_the_order_depends_on_seed_and_epoch_and_only_on_them() -> None:
    def order(seed: int, epoch: int) -> list[int]:
        return FeistelPermutation.seeded(10_000, seed, epoch)(np.arange(10_000)).tolist()

    assert order(1, 0) == order(1, 0)
    assert order(1, 0) != order(1, 1)
    assert order(1, 0) != order(2, 0)
    assert order(1, 0) != list(range(10_000))


def test_the_good_index_map_skips_exactly_the_quarantined_indices() -> None:
    rng = np.random.default_rng(0)
    # Runs at both ends and in the middle: the cases an off-by-one in the map gets wrong.
    bad = np.unique(np.concatenate([[0, 1, 2, 4998, 4999], rng.choice(5000, size=1700, replace=False)]))
    expected = np.setdiff1d(np.arange(5000), bad)
    mapped = GoodIndexMap(5000, bad)
    assert mapped.good == len(expected)
    assert mapped(np.arange(mapped.good, dtype=np.uint64)).tolist() == expected.tolist()


@pytest.mark.parametrize(
    ("length", "replicas", "drop_last"), [(1000, 4, False), (1003, 4, False), (1003, 4, True), (37, 8, False)]
)
def test_ranks_are_disjoint_equal_in_length_and_cover_the_good_samples(
    length: int, replicas: int, drop_last: bool
) -> None:
    dataset = IndexDataset(length)
    bad = set(range(0, length, 7))
    quarantine = Quarantine.from_indices(sorted(bad), length=length)
    per_rank = []
    for rank in range(replicas):
        sampler = DistributedQuarantineSampler(
            dataset, quarantine, num_replicas=replicas, rank=rank, seed=5, drop_last=drop_last, order="lazy"
        )
        sampler.set_epoch(2)
        drawn = list(sampler)
        assert len(drawn) == len(sampler)
        per_rank.append(drawn)
    assert len({len(drawn) for drawn in per_rank}) == 1
    everything = [index for drawn in per_rank for index in drawn]
    good = set(range(length)) - bad
    assert not set(everything) & bad
    if drop_last:
        assert len(everything) == len(set(everything))  # disjoint: nothing repeated
        assert len(good) - len(everything) < replicas
    else:
        assert set(everything) == good
        assert len(everything) - len(good) < replicas  # only the wrap-around padding repeats


def test_epochs_differ_and_repeat_per_seed() -> None:
    dataset = IndexDataset(500)
    quarantine = Quarantine.from_indices([3, 4, 99], length=500)

    def epoch(seed: int, number: int) -> list[int]:
        sampler = DistributedQuarantineSampler(
            dataset, quarantine, num_replicas=2, rank=1, seed=seed, order="lazy"
        )
        sampler.set_epoch(number)
        return list(sampler)

    assert epoch(0, 0) == epoch(0, 0)
    assert epoch(0, 0) != epoch(0, 1)
    assert epoch(0, 0) != epoch(1, 0)


def test_the_single_process_sampler_yields_every_good_index_once_through_a_dataloader() -> None:
    dataset = IndexDataset(300)
    quarantine = Quarantine.from_indices(range(0, 300, 3), length=300)
    sampler = QuarantineSampler(dataset, quarantine, shuffle=True, order="lazy")
    seen = [int(i) for batch in DataLoader(dataset, batch_size=16, sampler=sampler) for i in batch]
    assert sorted(seen) == [i for i in range(300) if i % 3]
    assert seen != sorted(seen)
    assert list(QuarantineSampler(dataset, quarantine, order="lazy")) == [i for i in range(300) if i % 3]


def test_small_datasets_keep_the_exact_order_by_default() -> None:
    assert choose_order("auto", EXACT_BELOW - 1) == "exact"
    assert choose_order("auto", EXACT_BELOW) == "lazy"
    sampler = DistributedQuarantineSampler(IndexDataset(100), Quarantine.from_indices([], length=100), 2, 0)
    assert sampler.order == "exact"
    with pytest.raises(ValueError, match="order must be one of"):
        QuarantineSampler(IndexDataset(10), Quarantine.from_indices([], length=10), order="random")  # type: ignore[arg-type]
