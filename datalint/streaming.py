"""Keep quarantined samples out of a LitData `StreamingDataset`: `drop_quarantined(ds, list)`.

    from datalint.streaming import drop_quarantined
    train = drop_quarantined(StreamingDataset("data/train"), "out/train.quarantine.json", key_column="id")
    loader = DataLoader(train, batch_size=64, num_workers=8)

The list is what `datalint scan --dataset data/train [--key-column id]` wrote. Samples are matched
as the scan named them (`datalint docs training`):
- by the sample's own id (`key_column=`, the scan's `--key-column`): the dataset streams as litdata
  streams it (its shuffle, its split across nodes and DataLoader workers) and a sample whose id is
  listed is dropped before it leaves the worker; the list survives the samples being written again
  into another number of chunks;
- by `CHUNK#OFFSET` (no key column): the listed places are turned into litdata's sample numbers and
  every other sample is read by number, this worker's and this rank's share of them, never the
  listed ones; a list naming a chunk this folder does not have is refused (`StaleQuarantineError`),
  since the chunks were written again and a place now holds another sample.

A list is a path (`quarantine.json`, a binary list, a scan index), a `datalint serve` URL, or a
loaded `Quarantine`.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from typing import Any

try:
    # Imported first, so that a missing part of the [streaming] extra is named before anything else loads.
    importlib.import_module("litdata")  # litdata ships no type information
    import numpy as np
    import torch
    from torch.utils.data import IterableDataset, get_worker_info
except ModuleNotFoundError:
    from datalint.extras import missing_extra_error

    _missing = missing_extra_error("streaming", "`import datalint.streaming`")
    if _missing is not None:
        raise _missing from None
    raise

from datalint.errors import DatalintError
from datalint.scan.streaming_shards import OFFSET_SEPARATOR, Chunks, read_chunks
from datalint.training.fit import StaleQuarantineError
from datalint.training.quarantine import Quarantine
from datalint.training.samplers import good_indices
from datalint.webdataset import ListSource, load_list

__all__ = ["QuarantinedStream", "drop_quarantined"]


def drop_quarantined(
    dataset: Any, quarantine: ListSource, *, key_column: str | None = None, seed: int = 0
) -> QuarantinedStream:
    """`dataset` (a litdata `StreamingDataset`) as an IterableDataset without the listed samples.

    With `key_column`, samples are matched by that field's value; without it, by `CHUNK#OFFSET`, read by
    number in a `seed + epoch` order when the dataset shuffles (`set_epoch(epoch)` before each epoch).
    """
    loaded = load_list(quarantine)
    chunks = read_chunks(_folder(dataset))
    if key_column is not None:
        _check_named_by_id(loaded, chunks, key_column)
        return QuarantinedStream(dataset, loaded, key_column=key_column)
    return QuarantinedStream(dataset, loaded, good=_good_by_place(loaded, chunks), seed=seed)


class QuarantinedStream(IterableDataset[Any]):
    """A streaming dataset less its quarantined samples; `skipped` counts those this process left out."""

    def __init__(
        self,
        dataset: Any,
        quarantine: Quarantine,
        *,
        key_column: str | None = None,
        good: Any = None,
        seed: int = 0,
    ) -> None:
        self.dataset = dataset
        self.quarantine = quarantine
        self.key_column = key_column
        self.good = good  # litdata's sample numbers to read, when matching by place
        self.seed = seed
        self.epoch = 0
        self.skipped = 0
        self._keys = frozenset(str(k) for k in quarantine.keys if k is not None)

    def set_epoch(self, epoch: int) -> None:
        """The epoch whose order the next iteration draws (by place, with a shuffling dataset)."""
        self.epoch = epoch
        if hasattr(self.dataset, "set_epoch"):
            self.dataset.set_epoch(epoch)

    def __len__(self) -> int:
        """This rank's samples an epoch (by id: at most, since which listed ids the stream holds is
        known only once it has streamed)."""
        if self.good is None:
            return len(self.dataset)
        ranks = _rank()[1]
        return -(-len(self.good) // ranks)

    def __iter__(self) -> Iterator[Any]:
        if self.good is None:
            return self._by_id()
        return self._by_place()

    def _by_id(self) -> Iterator[Any]:
        # litdata splits its chunks across ranks and workers itself: each sample reaches one worker.
        for sample in self.dataset:
            if str(sample[self.key_column]) in self._keys:
                self.skipped += 1
                continue
            yield sample

    def _by_place(self) -> Iterator[Any]:
        for index in _share(self.good, self._order_generator()):
            yield self.dataset[int(index)]

    def _order_generator(self) -> torch.Generator | None:
        if not getattr(self.dataset, "shuffle", False):
            return None
        generator = torch.Generator()
        generator.manual_seed(self.seed + self.epoch)
        return generator


def _share(good: Any, generator: torch.Generator | None) -> Any:
    """This rank's and this DataLoader worker's part of the good sample numbers, from one order that
    every rank and worker draws alike (one seed), so the parts are disjoint and together whole.

    Every rank gets the same number, the tail padded by wrapping around as `DistributedSampler`
    pads it: a rank with one batch more would wait for the others at its last step."""
    order = good if generator is None else good[torch.randperm(len(good), generator=generator).numpy()]
    rank, ranks = _rank()
    if len(order) % ranks:
        order = np.resize(order, len(order) + ranks - len(order) % ranks)
    info = get_worker_info()
    worker, workers = (info.id, info.num_workers) if info is not None else (0, 1)
    return order[rank::ranks][worker::workers]


def _rank() -> tuple[int, int]:
    distributed = torch.distributed
    if distributed.is_available() and distributed.is_initialized():
        return distributed.get_rank(), distributed.get_world_size()
    return 0, 1


def _folder(dataset: Any) -> str:
    """The local folder of a StreamingDataset (a remote one is read through its local cache)."""
    input_dir = getattr(dataset, "input_dir", None)
    path = getattr(input_dir, "path", None) or getattr(input_dir, "url", None)
    if not path:
        raise DatalintError(
            f"{type(dataset).__name__} has no input_dir: drop_quarantined takes a litdata StreamingDataset"
        )
    return str(path)


def _good_by_place(quarantine: Quarantine, chunks: Chunks) -> Any:
    listed = [str(key) for key in quarantine.keys if key is not None]
    if len(quarantine) and len(listed) < len(quarantine):
        raise StaleQuarantineError(
            f"{quarantine.source} names samples by number only; a streaming dataset matches them by"
            " CHUNK#OFFSET or an id: write a list with `datalint scan --dataset FOLDER`"
        )
    places = {key: chunks.index_of(key) for key in listed}
    unknown = [key for key, place in places.items() if place is None]
    if unknown:
        raise StaleQuarantineError(_not_these_chunks(quarantine, unknown))
    found = [place for place in places.values() if place is not None]
    return good_indices(chunks.length, Quarantine.from_indices(found, length=chunks.length))


def _not_these_chunks(quarantine: Quarantine, unknown: list[str]) -> str:
    by_id = [key for key in unknown if OFFSET_SEPARATOR not in key]
    if by_id:
        return (
            f"{quarantine.source} names samples by id (such as {by_id[0]!r}), not by CHUNK#OFFSET: pass"
            " key_column= (the field the scan's --key-column named)"
        )
    return (
        f"{quarantine.source} names {len(unknown)} places this dataset's chunks do not have (such as"
        f" {unknown[0]!r}): its samples were written again into other chunks, so a place may now hold"
        " another sample. Write a fresh list with `datalint scan --dataset FOLDER`, or scan with"
        " --key-column ID and pass key_column= so that the list follows the samples"
    )


def _check_named_by_id(quarantine: Quarantine, chunks: Chunks, key_column: str) -> None:
    """A list of CHUNK#OFFSET places given with key_column= would drop nothing: say so."""
    listed = [str(key) for key in quarantine.keys if key is not None]
    if len(quarantine) and not listed:
        raise StaleQuarantineError(
            f"{quarantine.source} names samples by number only, so it cannot be matched by {key_column!r}:"
            f" write a list keyed by it with `datalint scan --dataset FOLDER --key-column {key_column}`"
        )
    if listed and all(chunks.index_of(key) is not None for key in listed):
        raise StaleQuarantineError(
            f"{quarantine.source} names samples by CHUNK#OFFSET (such as {listed[0]!r}), not by"
            f" {key_column!r}: leave out key_column=, or write a list with `datalint scan --dataset FOLDER"
            f" --key-column {key_column}`"
        )
