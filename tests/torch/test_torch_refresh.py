"""Samplers follow a quarantine list rewritten during training: never mid-epoch, between epochs."""

from __future__ import annotations

import json
import multiprocessing
from pathlib import Path
from typing import Any

import pytest
import torch.distributed as dist
from torch.utils.data import DataLoader
from torch_test_data import IndexDataset, seen_indices, write_quarantine

from datalint.errors import DatalintError
from datalint.scan.api import write_json_atomically
from datalint.torch import DistributedQuarantineSampler, Quarantine, QuarantineSampler, StaleQuarantineError


def rewrite(path: Path, indices: list[int], length: int) -> None:
    """Replace the list the way a scan or `datalint watch` does: a new file renamed over the old one."""
    scratch = write_quarantine(path.with_name("scratch.json"), indices, length=length)
    write_json_atomically(path, json.loads(scratch.read_text()))


def test_an_epoch_under_way_keeps_its_list_and_refresh_applies_the_new_one(tmp_path: Path) -> None:
    dataset = IndexDataset(20)
    path = write_quarantine(tmp_path / "q.json", [3], length=20)
    sampler = QuarantineSampler(dataset, path)
    epoch = iter(sampler)
    first_half = [next(epoch) for _ in range(10)]
    rewrite(path, [3, 15], 20)  # the watch found sample 15 damaged halfway through the epoch
    assert first_half + list(epoch) == [i for i in range(20) if i != 3]
    assert sampler.refresh() is True
    assert list(sampler) == [i for i in range(20) if i not in (3, 15)]
    assert sampler.refresh() is False  # the file has not changed since


def test_refresh_at_set_epoch_through_the_real_dataloader(tmp_path: Path) -> None:
    dataset = IndexDataset(40)
    path = write_quarantine(tmp_path / "q.json", [0, 1], length=40)
    sampler = QuarantineSampler(dataset, path, shuffle=True, refresh=True)
    loader = DataLoader(dataset, batch_size=4, sampler=sampler, num_workers=2, multiprocessing_context="fork")
    sampler.set_epoch(0)
    assert sorted(seen_indices(loader)) == list(range(2, 40))
    rewrite(path, [1, 30], 40)  # sample 0 was repaired, sample 30 broke
    sampler.set_epoch(1)
    assert sorted(seen_indices(loader)) == [i for i in range(40) if i not in (1, 30)]
    assert len(sampler) == 38


def test_a_rewritten_list_that_no_longer_fits_is_refused_as_on_the_first_load(tmp_path: Path) -> None:
    path = write_quarantine(tmp_path / "q.json", [2], length=10)
    sampler = QuarantineSampler(IndexDataset(10), path, refresh=True)
    rewrite(path, [2, 11], 12)  # a list for a longer dataset than this one
    with pytest.raises(StaleQuarantineError, match="length 12 in the list, 10 in the dataset"):
        sampler.set_epoch(1)
    assert list(sampler) == [i for i in range(10) if i != 2]  # the last good list is still in force


def test_refresh_needs_a_file_to_read_again() -> None:
    with pytest.raises(ValueError, match=r"refresh=True\) needs the list's path"):
        QuarantineSampler(IndexDataset(4), Quarantine.from_indices([1], length=4), refresh=True)


def _rank(init_file: str, rank: int, lists: list[str], rewritten: list[int], results: Any) -> None:
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=2)
    try:
        sampler = DistributedQuarantineSampler(IndexDataset(20), lists[rank], shuffle=False, refresh=True)
        if rank == 0:
            rewrite(Path(lists[0]), rewritten, 20)
        dist.barrier()  # both ranks call set_epoch after the rewrite
        try:
            sampler.set_epoch(1)
            results.put((rank, sorted(sampler), None))
        except DatalintError as exc:
            results.put((rank, None, str(exc)))
    finally:
        dist.destroy_process_group()


def _run_ranks(tmp_path: Path, lists: list[str], rewritten: list[int]) -> list[Any]:
    context = multiprocessing.get_context("fork")
    results = context.Queue()
    init_file = str(tmp_path / f"rendezvous-{len(set(lists))}")
    workers = [
        context.Process(target=_rank, args=(init_file, r, lists, rewritten, results)) for r in range(2)
    ]
    for worker in workers:
        worker.start()
    answers = sorted(results.get(timeout=60) for _ in workers)
    for worker in workers:
        worker.join(timeout=30)
    return answers


@pytest.mark.slow
def test_distributed_ranks_refresh_together_and_a_disagreement_is_an_error(tmp_path: Path) -> None:
    shared = str(write_quarantine(tmp_path / "shared.json", [5], length=20))
    together = _run_ranks(tmp_path, [shared, shared], [5, 6])
    good = [i for i in range(20) if i not in (5, 6)]
    assert sorted(together[0][1] + together[1][1]) == good  # 18 good samples over 2 ranks, no padding

    own = [str(write_quarantine(tmp_path / f"rank{r}.json", [5], length=20)) for r in range(2)]
    apart = _run_ranks(tmp_path, own, [5, 6])  # rank 0 sees the new list, rank 1 the old one
    assert all(error is not None and "different versions" in error for _, _, error in apart)
