"""Training with a quarantine list: samplers that never yield a quarantined sample, and a guard.

The three-line change to a training script::

    from datalint.torch import GuardedDataset, QuarantineSampler
    sampler = QuarantineSampler(train_ds, "out/quarantine.json", shuffle=True)
    loader = DataLoader(GuardedDataset(train_ds, record="out/scan.db"), batch_size=64, sampler=sampler)

(`datalint docs training` has the whole story: samplers, the filter, staleness, the guard.)

The samplers hold the good indices in one numpy array (bytes, not Python objects) and shuffle with
one `torch.randperm` per epoch; they check that the list was made for this dataset (see
`datalint.training.fit`). This is the only datalint module that imports torch at module level.
"""

from __future__ import annotations

import itertools
import logging
import math
import os
import platform
import sys
import time
import traceback
import uuid
from collections import deque
from collections.abc import Iterable, Iterator, Sized
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

try:
    import numpy as np
    import numpy.typing as npt
    import torch
    import torch.distributed as dist
    from torch.utils.data import (
        BatchSampler,
        Dataset,
        DistributedSampler,
        RandomSampler,
        Sampler,
        SequentialSampler,
        SubsetRandomSampler,
        WeightedRandomSampler,
        default_collate,
    )
except ModuleNotFoundError:
    from datalint.extras import missing_extra_error

    # One line naming the extra and its install command, instead of a bare "No module named torch".
    _missing = missing_extra_error("torch", "`import datalint.torch`")
    if _missing is not None:
        raise _missing from None
    raise

from datalint import __version__
from datalint.errors import DatalintError, UsageError
from datalint.text import exception_text, printable, safe_str, shown_name
from datalint.training import permutation, remote
from datalint.training.fit import (
    StaleQuarantineError,
    StaleQuarantineWarning,
    fit_quarantine,
    key_reader,
)
from datalint.training.quarantine import Quarantine, QuarantineFormatError, load_quarantine
from datalint.training.record import Failure, record_failure, start_guard_run, utc_now
from datalint.training.refresh import ListFollower, check_ranks_agree

__all__ = [
    "DistributedQuarantineSampler",
    "GuardTrippedError",
    "GuardedDataset",
    "Quarantine",
    "QuarantineFilter",
    "QuarantineFormatError",
    "QuarantineSampler",
    "SkippedSample",
    "StaleQuarantineError",
    "StaleQuarantineWarning",
    "guarded_collate",
    "load_quarantine",
    "quarantine_filter",
]

logger = logging.getLogger("datalint.torch")

QuarantineSource = Quarantine | str | os.PathLike[str]
IndexArray = npt.NDArray[np.integer[Any]]

# Indices reach the DataLoader as Python ints; converting a chunk at a time keeps the Python objects
# alive at any moment to one chunk instead of one per sample.
_CHUNK = 1 << 16


def _resolve(quarantine: QuarantineSource, dataset: Sized, strict: bool) -> Quarantine:
    loaded = quarantine if isinstance(quarantine, Quarantine) else load_quarantine(quarantine)
    return fit_quarantine(loaded, dataset, strict=strict)


def _good_indices(length: int, quarantine: Quarantine) -> IndexArray:
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
        self._follower = ListFollower(quarantine)
        if refresh:
            self._follower.require_path(type(self).__name__)
        self.shuffle = shuffle
        self.generator = generator
        self.strict = strict
        self.refresh_each_epoch = refresh
        self.epoch = 0
        self.order = permutation.choose_order(order, len(data_source))
        self._fit(_resolve(quarantine, data_source, strict))

    def _fit(self, quarantine: Quarantine) -> None:
        """Take `quarantine` as the list in force: the good indices, or their lazy map."""
        self.quarantine = quarantine
        if self.order == "lazy":
            self._map = _good_index_map(len(self.data_source), quarantine)
        else:
            self._good = _good_indices(len(self.data_source), quarantine)

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
        self._follower = ListFollower(quarantine)
        if refresh:
            self._follower.require_path(type(self).__name__)
        self.strict = strict
        self.refresh_each_epoch = refresh
        self.shuffle = shuffle
        self.seed = seed
        self.drop_last = drop_last
        self.epoch = 0
        self.order = permutation.choose_order(order, len(dataset))
        self._fit(_resolve(quarantine, dataset, strict))

    def _fit(self, quarantine: Quarantine) -> None:
        """Take `quarantine` as the list in force: the good indices (or their lazy map) and the
        number of samples each rank draws."""
        self.quarantine = quarantine
        if self.order == "lazy":
            self._map = _good_index_map(len(self.dataset), quarantine)
            good = self._map.good
        else:
            self._good = _good_indices(len(self.dataset), quarantine)
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
    fitted = _resolve(quarantine, target, strict)
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


# ---- the guard --------------------------------------------------------------------------------------

OnError = Literal["substitute", "skip", "raise"]
ON_ERROR: tuple[str, ...] = ("substitute", "skip", "raise")


class GuardTrippedError(DatalintError):
    """More samples failed in one process than `max_failures` allows: the source itself looks broken."""


@dataclass(frozen=True)
class SkippedSample:
    """Returned in place of a failing sample under `on_error="skip"`; `guarded_collate` drops it."""

    index: int
    error_type: str


@dataclass
class _ProcessState:
    """What one process (the main one, or one DataLoader worker) has seen fail."""

    pid: int
    failed: set[int] = field(default_factory=set)
    failures: list[Failure] = field(default_factory=list)
    tripped: str | None = None  # once max_failures is passed, every later sample fails fast with this


class _Failed:
    __slots__ = ("error",)

    def __init__(self, error: Exception) -> None:
        self.error = error


class GuardedDataset(Dataset[Any]):
    """A dataset whose failing samples are recorded and replaced instead of killing the training job.

    A sample that raises is recorded (index, key, error, traceback, time) in the SQLite index at
    `record` (created if absent, with the scan's schema), so `datalint quarantine` and the next scan
    see it. Then, by `on_error`: "substitute" returns the next good sample (the batch keeps its size),
    "skip" returns a `SkippedSample` that `guarded_collate` drops, "raise" re-raises. More than
    `max_failures` failing samples in one process (each DataLoader worker counts its own) raise
    `GuardTrippedError`: a dead disk should stop the job, not train an epoch on substitutes.
    `quarantine` (a path or `Quarantine`) keeps known-bad samples out of the substitutes.
    """

    def __init__(
        self,
        dataset: Any,
        record: str | os.PathLike[str] | None = None,
        on_error: OnError = "substitute",
        max_failures: int | None = 100,
        *,
        quarantine: QuarantineSource | None = None,
        strict: bool = True,
        token: str | None = None,
        spool: str | os.PathLike[str] | None = None,
    ) -> None:
        if on_error not in ON_ERROR:
            raise ValueError(f"on_error must be one of {', '.join(map(repr, ON_ERROR))}, got {on_error!r}")
        if max_failures is not None and max_failures < 0:
            raise ValueError(f"max_failures must be a non-negative integer or None, got {max_failures}")
        self.dataset = dataset
        self.on_error = on_error
        self.max_failures = max_failures
        # A `datalint serve` URL: failures go to the service from a background sender (training/remote.py).
        self.remote = str(record) if remote.is_url(record) else None
        self.record = Path(record) if record is not None and self.remote is None else None
        self.token = token
        self.spool = Path(spool) if spool is not None else None
        self._length = len(dataset)
        self._avoid = frozenset() if quarantine is None else _resolve(quarantine, dataset, strict).index_set()
        self._run_id = self._start_run() if self.record is not None else None
        self._remote_run = uuid.uuid4().hex if self.remote is not None else None
        self._state: _ProcessState | None = None

    def _start_run(self) -> int:
        assert self.record is not None
        return start_guard_run(
            self.record,
            spec=f"{type(self.dataset).__module__}.{type(self.dataset).__qualname__}",
            length=self._length,
            fingerprint=None,
            options={"on_error": self.on_error, "max_failures": self.max_failures},
            environment=_environment(),
        )

    @property
    def datalint_wrapped(self) -> Any:
        """The dataset being guarded (sample keys are read from it)."""
        return self.dataset

    @property
    def failures(self) -> tuple[Failure, ...]:
        """The samples that failed in this process, first failure each (the main one when num_workers=0)."""
        return tuple(self._process_state().failures)

    def __len__(self) -> int:
        return self._length

    def __getitem__(self, index: int) -> Any:
        tripped = self._process_state().tripped
        if tripped is not None:
            raise GuardTrippedError(tripped)
        outcome = self._fetch(index)
        if not isinstance(outcome, _Failed):
            return outcome
        if self.on_error == "raise":
            raise outcome.error
        if self.on_error == "skip":
            return SkippedSample(index, type(outcome.error).__name__)
        return self._substitute(index)

    def _fetch(self, index: int) -> Any:
        started = time.perf_counter()
        try:
            return self.dataset[index]
        except Exception as exc:  # the isolation boundary: one sample, whatever it raised
            self._note(index, exc, time.perf_counter() - started)
            return _Failed(exc)

    def _substitute(self, index: int) -> Any:
        """The next sample after `index` (wrapping around) that loads; deterministic, so reproducible."""
        state = self._process_state()
        for step in range(1, self._length):
            candidate = (index + step) % self._length
            if candidate in self._avoid or candidate in state.failed:
                continue
            outcome = self._fetch(candidate)
            if not isinstance(outcome, _Failed):
                return outcome
        name = type(self.dataset).__name__
        state.tripped = f"no sample of the {name} loads: every one failed or is quarantined"
        raise GuardTrippedError(state.tripped)

    def _note(self, index: int, error: Exception, duration: float) -> None:
        state = self._process_state()
        failure = Failure(
            index=index,
            key=_key_of(self.dataset, index),
            error_type=type(error).__name__,
            message=safe_str(error),  # a __str__ that raises must not turn a substitute into a crash
            traceback=traceback.format_exc(),
            duration=duration,
            worker=state.pid,
            at=utc_now(),
        )
        if index not in state.failed:  # a sample failing again (next epoch) is not news
            state.failed.add(index)
            state.failures.append(failure)
            self._record(failure)
        if self.max_failures is not None and len(state.failed) > self.max_failures:
            state.tripped = self._tripped_message(failure, len(state.failed))
            raise GuardTrippedError(state.tripped) from error

    def _record(self, failure: Failure) -> None:
        where = f" ({shown_name(failure.key)})" if failure.key else ""
        logger.warning(
            "datalint guard: sample %d%s failed: %s", failure.index, where, printable(failure.detail)
        )
        if self.remote is not None:
            sender = remote.sender_for(self.remote, token=self.token, spool=self.spool, run=self._remote_run)
            sender.send(failure)
            return
        if self.record is None or self._run_id is None:
            return
        try:
            record_failure(self.record, self._run_id, failure)
        except Exception as exc:  # a failed record must not end training; the warning says what was lost
            logger.warning(
                "datalint guard: could not record sample %d in %s: %s",
                failure.index,
                self.record,
                exception_text(exc),
            )

    def _tripped_message(self, last: Failure, count: int) -> str:
        where = f" (key {shown_name(last.key)})" if last.key else ""
        target = self.record or self.remote
        recorded = f"; failures are recorded in {target}" if target else ""
        return (
            f"{count} samples failed in process {last.worker}, more than max_failures={self.max_failures}:"
            f" the data source itself looks broken (an unreachable disk or mount?)."
            f" Last: sample {last.index}{where}: {printable(last.detail)}{recorded}"
        )

    def _process_state(self) -> _ProcessState:
        # Each DataLoader worker is its own process: start its own record of what failed there.
        if self._state is None or self._state.pid != os.getpid():
            self._state = _ProcessState(pid=os.getpid())
        return self._state

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_state"] = None  # per-process; a spawned worker starts its own
        return state


def _key_of(dataset: Any, index: int) -> str | None:
    reader = key_reader(dataset)
    if reader is None:
        return None
    try:
        return reader(index)
    except Exception:  # a key is a courtesy in the record; a broken key reader must not hide the failure
        return None


def _environment() -> dict[str, str]:
    return {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "datalint": __version__,
        "torch": torch.__version__,
        "numpy": np.__version__,
    }


def guarded_collate(batch: list[Any]) -> Any:
    """`default_collate` without the samples `GuardedDataset(on_error="skip")` skipped.

    Returns None when every sample of the batch was skipped; the training loop should skip it.
    """
    kept = [sample for sample in batch if not isinstance(sample, SkippedSample)]
    return default_collate(kept) if kept else None
