"""The quarantine-aware samplers and filter behind `datalint.torch`: never yield a quarantined sample.

They hold the good indices in one numpy array (bytes, not Python objects) and shuffle with one
`torch.randperm` per epoch; they check that the list was made for this dataset (see
`datalint.training.fit`). Imports torch at module level: reach it through `datalint.torch`, which
names the [torch] extra when torch is missing.
"""

from __future__ import annotations

import itertools
import math
import os
from collections import deque
from collections.abc import Iterable, Iterator, Sized
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import torch
import torch.distributed as dist
from torch.utils.data import (
    BatchSampler,
    DistributedSampler,
    RandomSampler,
    Sampler,
    SequentialSampler,
    SubsetRandomSampler,
    WeightedRandomSampler,
)

from datalint.errors import DatalintError, UsageError
from datalint.training import permutation, remote
from datalint.training.fit import fit_quarantine
from datalint.training.quarantine import Quarantine, load_quarantine
from datalint.training.refresh import ListFollower, check_ranks_agree

QuarantineSource = Quarantine | str | os.PathLike[str]
IndexArray = npt.NDArray[np.integer[Any]]

# Indices reach the DataLoader as Python ints; converting a chunk at a time keeps the Python objects
# alive at any moment to one chunk instead of one per sample.
_CHUNK = 1 << 16


def resolve_quarantine(quarantine: QuarantineSource, dataset: Sized, strict: bool) -> Quarantine:
    """The list as a `Quarantine`, checked against `dataset` (see `datalint.training.fit`).

    A URL's list is checked before it replaces the cached copy; one that does not fit falls back to
    that copy under `strict=False` (datalint.training.remote).
    """
    if remote.is_url(quarantine):
        fitted: Quarantine = remote.load_remote_quarantine(str(quarantine), dataset=dataset, strict=strict)
        return fitted
    loaded = quarantine if isinstance(quarantine, Quarantine) else load_quarantine(quarantine)
    return fit_quarantine(loaded, dataset, strict=strict)


def good_indices(length: int, quarantine: Quarantine) -> IndexArray:
    """Every index of the dataset except the quarantined ones, in order, in the smallest dtype."""
    keep = np.ones(length, dtype=np.bool_)
    keep[quarantine.indices] = False
    good = np.flatnonzero(keep)
    if not len(good):
        raise DatalintError(
            f"every one of the {length} samples is quarantined by {quarantine.source}; nothing to train on"
        )
    return good.astype(np.int32) if length <= np.iinfo(np.int32).max else good


def _as_ints(values: IndexArray, order: IndexArray | None = None) -> Iterator[int]:
    """Yield `values` (or `values[order]`) as Python ints, one chunk converted at a time."""
    count = len(values) if order is None else len(order)
    for start in range(0, count, _CHUNK):
        window = slice(start, start + _CHUNK)
        chunk = values[window] if order is None else values[order[window]]
        yield from chunk.tolist()


def _fresh_generator() -> torch.Generator:
    # Seeded from torch's global generator, as RandomSampler does, so torch.manual_seed reproduces it.
    generator = torch.Generator()
    generator.manual_seed(int(torch.empty((), dtype=torch.int64).random_().item()))
    return generator


class QuarantineSampler(Sampler[int]):
    """Every index of `data_source` except the quarantined ones, once per epoch.

    `quarantine` is a path (`quarantine.json` or a scan index) or a loaded `Quarantine`. With
    `shuffle=True` each epoch is a fresh permutation drawn from `generator` (a `torch.Generator`).
    `strict=False` turns a list made for another dataset from an error into a warning.
    `refresh()` reloads the list between epochs when its file was rewritten (`datalint watch`);
    `refresh=True` does so at every `set_epoch()`.
    `order="lazy"` (the default from `EXACT_BELOW` samples on) draws each epoch from a seeded Feistel
    permutation in O(1) memory instead of holding the good indices and a `randperm`.
    """

    def __init__(
        self,
        data_source: Sized,
        quarantine: QuarantineSource,
        *,
        shuffle: bool = False,
        generator: torch.Generator | None = None,
        strict: bool = True,
        refresh: bool = False,
        order: permutation.Order = "auto",
    ) -> None:
        self.data_source = data_source
        fitted = resolve_quarantine(quarantine, data_source, strict)
        self._follower = ListFollower(quarantine, fitted)
        if refresh:
            self._follower.require_path(type(self).__name__)
        self.shuffle = shuffle
        self.generator = generator
        self.strict = strict
        self.refresh_each_epoch = refresh
        self.epoch = 0
        self.order = permutation.choose_order(order, len(data_source))
        self._fit(fitted)

    def _fit(self, quarantine: Quarantine) -> None:
        """Take `quarantine` as the list in force: the good indices, or their lazy map."""
        self.quarantine = quarantine
        if self.order == "lazy":
            self._map = _good_index_map(len(self.data_source), quarantine)
        else:
            self._good = good_indices(len(self.data_source), quarantine)

    def refresh(self) -> bool:
        """Reload the list if its file changed since it was loaded; True when it did.

        The epoch under way keeps the list it started with: call this between epochs.
        """
        fitted = self._follower.reload(self.data_source, strict=self.strict)
        if fitted is None:
            return False
        self._fit(fitted)
        return True

    def set_epoch(self, epoch: int) -> None:
        """Note the epoch; with `refresh=True`, pick up a rewritten list first."""
        self.epoch = epoch
        if self.refresh_each_epoch:
            self.refresh()

    def __iter__(self) -> Iterator[int]:
        if self.order == "lazy":
            generator = self.generator if self.generator is not None else _fresh_generator()
            seed = int(torch.randint(0, 1 << 62, (), generator=generator)) if self.shuffle else 0
            return permutation.rank_order(
                self._map,
                seed=seed,
                epoch=0,
                rank=0,
                num_replicas=1,
                num_samples=len(self),
                shuffle=self.shuffle,
            )
        if not self.shuffle:
            return _as_ints(self._good)
        generator = self.generator if self.generator is not None else _fresh_generator()
        order = torch.randperm(len(self._good), generator=generator).numpy()
        return _as_ints(self._good, order)

    def __len__(self) -> int:
        return self._map.good if self.order == "lazy" else len(self._good)


def _good_index_map(length: int, quarantine: Quarantine) -> permutation.GoodIndexMap:
    """The lazy samplers' view of the good indices: O(quarantined) memory, never O(length)."""
    mapped = permutation.GoodIndexMap(length, quarantine.indices)
    if mapped.good <= 0:
        raise DatalintError(
            f"every one of the {length} samples is quarantined by {quarantine.source}; nothing to train on"
        )
    return mapped


def _world(num_replicas: int | None, rank: int | None) -> tuple[int, int]:
    """World size and rank: as given, else from torch.distributed when initialised, else 1 and 0."""
    initialised = dist.is_available() and dist.is_initialized()
    if num_replicas is None:
        num_replicas = dist.get_world_size() if initialised else 1
    if rank is None:
        rank = dist.get_rank() if initialised else 0
    if num_replicas < 1:
        raise ValueError(f"num_replicas must be at least 1, got {num_replicas}")
    if not 0 <= rank < num_replicas:
        raise ValueError(f"rank {rank} is outside [0, {num_replicas - 1}] for num_replicas={num_replicas}")
    return num_replicas, rank


class DistributedQuarantineSampler(Sampler[int]):
    """`DistributedSampler` over the good indices: equal lengths per rank, one permutation per epoch.

    Every rank draws the same permutation of the good indices for a given `seed + epoch` and takes
    every `num_replicas`-th position from its `rank`; the tail is padded by wrapping around (or
    dropped with `drop_last`), exactly as `DistributedSampler` does, so ranks never disagree on the
    number of batches. Call `set_epoch(epoch)` before each epoch. `order="lazy"` (the default from
    `EXACT_BELOW` samples on) keeps that contract with a seeded Feistel permutation evaluated per
    rank in O(1) memory; its order differs from `DistributedSampler`'s.
    """

    def __init__(
        self,
        dataset: Sized,
        quarantine: QuarantineSource,
        num_replicas: int | None = None,
        rank: int | None = None,
        shuffle: bool = True,
        seed: int = 0,
        drop_last: bool = False,
        *,
        strict: bool = True,
        refresh: bool = False,
        order: permutation.Order = "auto",
    ) -> None:
        self.dataset = dataset
        self.num_replicas, self.rank = _world(num_replicas, rank)
        fitted = resolve_quarantine(quarantine, dataset, strict)
        self._follower = ListFollower(quarantine, fitted)
        if refresh:
            self._follower.require_path(type(self).__name__)
        self.strict = strict
        self.refresh_each_epoch = refresh
        self.shuffle = shuffle
        self.seed = seed
        self.drop_last = drop_last
        self.epoch = 0
        self.order = permutation.choose_order(order, len(dataset))
        self._fit(fitted)

    def _fit(self, quarantine: Quarantine) -> None:
        """Take `quarantine` as the list in force: the good indices (or their lazy map) and the
        number of samples each rank draws."""
        self.quarantine = quarantine
        if self.order == "lazy":
            self._map = _good_index_map(len(self.dataset), quarantine)
            good = self._map.good
        else:
            self._good = good_indices(len(self.dataset), quarantine)
            good = len(self._good)
        self.num_samples = self._samples_per_rank(good)
        self.total_size = self.num_samples * self.num_replicas

    def _samples_per_rank(self, good: int) -> int:
        if self.drop_last and good % self.num_replicas:
            per_rank = (good - self.num_replicas) // self.num_replicas + 1 if good > self.num_replicas else 0
        else:
            per_rank = math.ceil(good / self.num_replicas)
        if per_rank == 0:
            raise DatalintError(
                f"{good} good samples cannot fill {self.num_replicas} ranks with drop_last=True;"
                " use drop_last=False (pads by repeating samples) or fewer ranks"
            )
        return per_rank

    def __iter__(self) -> Iterator[int]:
        if self.order == "lazy":
            return permutation.rank_order(
                self._map,
                seed=self.seed,
                epoch=self.epoch,
                rank=self.rank,
                num_replicas=self.num_replicas,
                num_samples=self.num_samples,
                shuffle=self.shuffle,
            )
        # Position p of the padded epoch is position p % good of the permutation: the same wrap-around
        # DistributedSampler pads with, computed only for this rank's positions.
        positions = np.arange(self.rank, self.total_size, self.num_replicas, dtype=np.int64) % len(self._good)
        if self.shuffle:
            generator = torch.Generator()
            generator.manual_seed(self.seed + self.epoch)
            positions = torch.randperm(len(self._good), generator=generator).numpy()[positions]
        return _as_ints(self._good, positions)

    def __len__(self) -> int:
        return self.num_samples

    def set_epoch(self, epoch: int) -> None:
        """Choose the permutation for `epoch` (the same on every rank); with `refresh=True`, pick up
        a rewritten list first."""
        self.epoch = epoch
        if self.refresh_each_epoch:
            self.refresh()

    def refresh(self) -> bool:
        """Reload the list if its file changed; True when it did. Call it on every rank at the same
        point between epochs (`set_epoch` does with `refresh=True`): ranks are checked to agree."""
        fitted = self._follower.reload(self.dataset, strict=self.strict)
        in_force = fitted if fitted is not None else self.quarantine
        check_ranks_agree(np.asarray(in_force.indices))  # on every rank, changed or not: a collective
        if fitted is None:
            return False
        self._fit(fitted)
        return True


@dataclass(frozen=True)
class _Sized:
    """A stand-in dataset when only the length is known (a weighted sampler's weights)."""

    length: int

    def __len__(self) -> int:
        return self.length


def quarantine_filter(
    sampler: Iterable[Any],
    quarantine: QuarantineSource,
    *,
    dataset: Sized | None = None,
    strict: bool = True,
) -> Sampler[Any]:
    """Wrap any sampler or batch sampler so that quarantined indices never come out of it.

    Batch samplers keep their batch size: batches are refilled from the following indices. A
    `WeightedRandomSampler` is rebuilt with zero weight on the quarantined samples instead, so it
    still draws `num_samples` indices. `dataset` is needed when it cannot be found on the sampler
    (`data_source`, `dataset`, `sampler.data_source`), to check that the list was made for it.
    """
    if _inner_distributed(sampler):
        raise UsageError(
            "quarantine_filter cannot keep distributed ranks in step: filtering a DistributedSampler leaves"
            " ranks with different numbers of batches, and DDP hangs. Use DistributedQuarantineSampler"
        )
    target = dataset if dataset is not None else _dataset_of(sampler)
    if target is None:
        raise UsageError(
            f"quarantine_filter cannot tell which dataset the {type(sampler).__name__} samples from;"
            " pass dataset=... so the quarantine list can be checked against it"
        )
    fitted = resolve_quarantine(quarantine, target, strict)
    if type(sampler) is WeightedRandomSampler:
        return _reweighted(sampler, fitted)
    return QuarantineFilter(sampler, fitted)


def _dataset_of(sampler: Any) -> Sized | None:
    for name in ("data_source", "dataset"):
        found = getattr(sampler, name, None)
        if isinstance(found, Sized):
            return found
    if isinstance(sampler, WeightedRandomSampler):
        return _Sized(len(sampler.weights))
    inner = getattr(sampler, "sampler", None)
    return _dataset_of(inner) if inner is not None else None


def _inner_distributed(sampler: Any) -> bool:
    while sampler is not None:
        if isinstance(sampler, DistributedSampler):
            return True
        sampler = getattr(sampler, "sampler", None)
    return False


def _reweighted(sampler: WeightedRandomSampler, quarantine: Quarantine) -> WeightedRandomSampler:
    weights = sampler.weights.clone()
    weights[torch.tensor(quarantine.indices.tolist(), dtype=torch.long)] = 0
    drawable = int((weights > 0).sum())
    if drawable == 0:  # torch would say only "invalid multinomial distribution", at the first draw
        raise DatalintError(_nothing_to_draw(sampler, quarantine))
    if not sampler.replacement and sampler.num_samples > drawable:
        raise DatalintError(
            f"WeightedRandomSampler draws {sampler.num_samples} samples without replacement, but only"
            f" {drawable} non-quarantined samples have a positive weight"
        )
    # WeightedRandomSampler converts its weights with torch.as_tensor, so a tensor is fine at run time.
    return WeightedRandomSampler(
        weights,  # type: ignore[arg-type]
        sampler.num_samples,
        sampler.replacement,
        sampler.generator,
    )


def _nothing_to_draw(sampler: WeightedRandomSampler, quarantine: Quarantine) -> str:
    positive = int((sampler.weights > 0).sum())
    why = (
        f"every one of the {positive} samples with a positive weight is quarantined"
        if positive
        else "its weights were all zero before any sample was quarantined"
    )
    return (
        f"quarantine_filter: the WeightedRandomSampler has nothing left to draw: {why} "
        f"({len(quarantine.indices)} of {len(sampler.weights)} samples quarantined), so the weights left "
        "are all zero; check that the list was made for this dataset and these weights, or give the "
        "samples that are not quarantined a positive weight"
    )


class QuarantineFilter(Sampler[Any]):
    """A sampler or batch sampler with the quarantined indices taken out (see `quarantine_filter`)."""

    def __init__(self, inner: Iterable[Any], quarantine: Quarantine) -> None:
        self.inner = inner
        self.quarantine = quarantine
        # The list is small next to the dataset; a set is the cheapest per-index test.
        self._bad = quarantine.index_set()

    def __iter__(self) -> Iterator[Any]:
        stream = iter(self.inner)
        first = next(stream, None)
        if first is None:
            return iter(())
        items: Iterator[Any] = itertools.chain([first], stream)
        if isinstance(first, torch.Tensor) and first.ndim == 0:
            items = map(int, items)  # a 0-d tensor hashes by identity, not by value
        elif not isinstance(first, int | np.integer):
            return self._refilled(items)
        # The membership test runs in C: this filter costs little more than the sampler it wraps.
        return itertools.filterfalse(self._bad.__contains__, items)

    def _refilled(self, batches: Iterator[Any]) -> Iterator[list[int]]:
        """Batches of the sizes the inner sampler produced, filled from the filtered index stream."""
        sizes: deque[int] = deque()
        pending: deque[int] = deque()
        for batch in batches:
            sizes.append(len(batch))
            pending.extend(index for index in map(int, batch) if index not in self._bad)
            while sizes and len(pending) >= sizes[0]:
                yield [pending.popleft() for _ in range(sizes.popleft())]
        if pending and not getattr(self.inner, "drop_last", False):
            yield list(pending)

    def __len__(self) -> int:
        """Exact for samplers that visit each index once per epoch; an upper bound for the others."""
        inner_sampler = getattr(self.inner, "sampler", None)
        batch_size = getattr(self.inner, "batch_size", None)
        if isinstance(self.inner, BatchSampler) and isinstance(batch_size, int):
            good = _good_count(inner_sampler, self._bad)
            if good is not None:
                full, partial = divmod(good, batch_size)
                return full + (1 if partial and not self.inner.drop_last else 0)
        else:
            good = _good_count(self.inner, self._bad)
            if good is not None:
                return good
        return len(self.inner)  # type: ignore[arg-type]


def _good_count(sampler: Any, bad: frozenset[int]) -> int | None:
    """How many good indices `sampler` yields per epoch, when it visits each index exactly once."""
    if isinstance(sampler, SequentialSampler) or (
        type(sampler) is RandomSampler
        and not sampler.replacement
        and sampler.num_samples == len(sampler.data_source)
    ):
        length = len(sampler.data_source)
        return length - sum(1 for index in bad if index < length)
    if type(sampler) is SubsetRandomSampler:
        return sum(1 for index in sampler.indices if int(index) not in bad)
    return None
