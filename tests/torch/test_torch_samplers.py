"""QuarantineSampler and DistributedQuarantineSampler, through the real DataLoader."""

from __future__ import annotations

import multiprocessing
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, DistributedSampler, RandomSampler
from torch_test_data import IndexDataset, seen_indices, write_quarantine

from datalint.errors import DatalintError
from datalint.torch import DistributedQuarantineSampler, Quarantine, QuarantineSampler

BAD = [0, 3, 17, 18, 19, 64, 99]


def _good(length: int, bad: list[int]) -> list[int]:
    return sorted(set(range(length)) - set(bad))


def test_loader_never_sees_a_quarantined_sample_and_sees_every_other_once(tmp_path: Path) -> None:
    # Spawned workers are covered with the guard, in test_torch_guard.py (one spawn start for both).
    dataset = IndexDataset(100)
    path = write_quarantine(tmp_path / "quarantine.json", BAD, length=100)
    sampler = QuarantineSampler(dataset, path, shuffle=True, generator=torch.Generator().manual_seed(7))
    loader = DataLoader(dataset, batch_size=8, sampler=sampler, num_workers=2, multiprocessing_context="fork")
    epochs = [seen_indices(loader) for _ in range(2)]
    for seen in epochs:
        assert sorted(seen) == _good(100, BAD)  # no quarantined index, every good one exactly once
    assert epochs[0] != epochs[1]  # a fresh permutation each epoch
    assert len(sampler) == 100 - len(BAD)


def test_unshuffled_sampler_keeps_dataset_order() -> None:
    quarantine = Quarantine.from_indices(BAD, length=100)
    assert list(QuarantineSampler(IndexDataset(100), quarantine)) == _good(100, BAD)


def test_with_nothing_quarantined_it_draws_random_samplers_permutation() -> None:
    # Same generator, same first permutation (RandomSampler draws a second, unused one per epoch,
    # so later epochs differ).
    dataset = IndexDataset(500)
    empty = Quarantine.from_indices([], length=500)
    ours = QuarantineSampler(dataset, empty, shuffle=True, generator=torch.Generator().manual_seed(3))
    theirs = RandomSampler(dataset, generator=torch.Generator().manual_seed(3))
    assert list(ours) == list(theirs)


def test_global_torch_seed_reproduces_the_shuffle() -> None:
    sampler = QuarantineSampler(IndexDataset(300), Quarantine.from_indices(BAD, length=300), shuffle=True)
    torch.manual_seed(11)
    first = list(sampler)
    torch.manual_seed(11)
    assert list(sampler) == first


def test_large_dataset_is_exact_across_chunk_boundaries() -> None:
    length = 300_000  # several conversion chunks
    bad = np.random.default_rng(0).choice(length, size=3_000, replace=False)
    sampler = QuarantineSampler(
        IndexDataset(length), Quarantine.from_indices(bad.tolist(), length=length), shuffle=True,
        generator=torch.Generator().manual_seed(0),
    )
    seen = np.fromiter(iter(sampler), dtype=np.int64)
    expected = np.setdiff1d(np.arange(length), bad)
    assert len(seen) == len(sampler) == len(expected)
    assert np.array_equal(np.sort(seen), expected)


def test_a_fully_quarantined_dataset_is_refused() -> None:
    with pytest.raises(DatalintError, match="every one of the 3 samples is quarantined"):
        QuarantineSampler(IndexDataset(3), Quarantine.from_indices([0, 1, 2], length=3))


# ---- distributed ---------------------------------------------------------------------------------


def _ranks(length: int, bad: list[int], replicas: int, **options: Any) -> list[list[int]]:
    dataset = IndexDataset(length)
    quarantine = Quarantine.from_indices(bad, length=length)
    return [
        list(DistributedQuarantineSampler(dataset, quarantine, num_replicas=replicas, rank=rank, **options))
        for rank in range(replicas)
    ]


def test_ranks_are_disjoint_apart_from_padding_and_cover_every_good_index() -> None:
    ranks = _ranks(103, BAD, 4, seed=5)
    good = _good(103, BAD)  # 96 good: divisible by 4, so no padding
    assert {len(r) for r in ranks} == {24}
    assert sorted(i for r in ranks for i in r) == good
    ranks = _ranks(101, BAD, 4, seed=5)  # 94 good: two padding samples
    counts = Counter(i for r in ranks for i in r)
    assert {len(r) for r in ranks} == {24}
    assert set(counts) == set(_good(101, BAD))
    assert sum(n - 1 for n in counts.values()) == 4 * 24 - 94  # duplicates are exactly the padding


def test_drop_last_gives_equal_disjoint_ranks() -> None:
    ranks = _ranks(101, BAD, 4, seed=5, drop_last=True)
    flat = [i for r in ranks for i in r]
    assert {len(r) for r in ranks} == {23}
    assert len(set(flat)) == len(flat) == 92  # 94 good, the last 2 dropped
    assert set(flat) <= set(_good(101, BAD))


def test_every_rank_draws_the_same_permutation_and_set_epoch_changes_it() -> None:
    dataset, quarantine = IndexDataset(50), Quarantine.from_indices(BAD[:4], length=50)

    def epoch_order(epoch: int) -> list[int]:
        # Interleaving the ranks gives back the permutation each of them drew.
        ranks = []
        for rank in range(3):
            sampler = DistributedQuarantineSampler(dataset, quarantine, num_replicas=3, rank=rank, seed=1)
            sampler.set_epoch(epoch)
            ranks.append(list(sampler))
        return [ranks[p % 3][p // 3] for p in range(3 * len(ranks[0]))]

    assert epoch_order(0) == epoch_order(0)
    assert epoch_order(0) != epoch_order(1)
    assert sorted(set(epoch_order(2))) == _good(50, BAD[:4])


@pytest.mark.parametrize("shuffle", [True, False])
@pytest.mark.parametrize("drop_last", [True, False])
def test_with_nothing_quarantined_it_matches_distributed_sampler(shuffle: bool, drop_last: bool) -> None:
    dataset, empty = IndexDataset(37), Quarantine.from_indices([], length=37)
    for rank in range(5):
        ours = DistributedQuarantineSampler(dataset, empty, 5, rank, shuffle, seed=9, drop_last=drop_last)
        theirs = DistributedSampler(dataset, 5, rank, shuffle, seed=9, drop_last=drop_last)
        ours.set_epoch(3)
        theirs.set_epoch(3)
        assert list(ours) == list(theirs) and len(ours) == len(theirs)


def test_padding_wraps_when_ranks_outnumber_good_samples() -> None:
    ranks = _ranks(6, [0, 1, 2], 8, seed=0)  # 3 good samples over 8 ranks
    assert all(len(r) == 1 for r in ranks)
    assert {i for r in ranks for i in r} == {3, 4, 5}


def test_rank_outside_the_world_is_refused() -> None:
    with pytest.raises(ValueError, match=r"rank 4 is outside \[0, 3\]"):
        DistributedQuarantineSampler(IndexDataset(10), Quarantine.from_indices([], length=10), 4, 4)


def _rank_in_process_group(init_file: str, rank: int, results: Any) -> None:
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=2)
    # Both ranks finish connecting before either can tear the group down (a fast rank 0 closing its
    # side while rank 1 is still meshing is "Connection closed by peer" on a loaded machine).
    dist.barrier()
    try:
        sampler = DistributedQuarantineSampler(IndexDataset(20), Quarantine.from_indices([5], length=20))
        results.put((rank, sampler.rank, sampler.num_replicas, list(sampler)))
    finally:
        dist.destroy_process_group()


def test_rank_and_world_size_come_from_torch_distributed(tmp_path: Path) -> None:
    context = multiprocessing.get_context("fork")
    results = context.Queue()
    workers = [
        context.Process(target=_rank_in_process_group, args=(str(tmp_path / "rendezvous"), rank, results))
        for rank in range(2)
    ]
    for worker in workers:
        worker.start()
    answers = sorted(results.get(timeout=60) for _ in workers)
    for worker in workers:
        worker.join(timeout=30)
    assert [(given, rank, world) for given, rank, world, _ in answers] == [(0, 0, 2), (1, 1, 2)]
    flat = answers[0][3] + answers[1][3]
    assert set(flat) == set(_good(20, [5])) and len(flat) == 20  # 19 good + 1 padding


def test_without_torch_distributed_it_is_a_single_rank() -> None:
    sampler = DistributedQuarantineSampler(IndexDataset(10), Quarantine.from_indices([2], length=10))
    assert (sampler.rank, sampler.num_replicas) == (0, 1)
    assert sorted(sampler) == _good(10, [2])
