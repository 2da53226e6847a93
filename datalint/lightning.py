"""A quarantine list (and the guard) in a Lightning Trainer: `QuarantineCallback`.

    from datalint.lightning import QuarantineCallback
    trainer = L.Trainer(callbacks=[QuarantineCallback(".datalint/mypkg-data-train.quarantine.json")])

Lightning replaces the sampler of a training loader itself (`use_distributed_sampler=True`): a
quarantine sampler handed to it is wrapped in another distributed sampler (sharded twice) or, as a
`RandomSampler`'s replacement, never used. So the callback works one step earlier and leaves the
sampling to Lightning: at `setup` it wraps the loader's source (the LightningModule's or
DataModule's `train_dataloader()`, or the loaders given to `fit`), and each loader it returns is
rebuilt over a view of its dataset that holds only the good samples. Whatever sampler Lightning
then puts in (a `DistributedSampler` across ranks, with `set_epoch` each epoch) shuffles and shards
the good samples only: each seen once per epoch across ranks, none quarantined, no double
sharding. A loader whose own sampler Lightning keeps (`use_distributed_sampler=False`, or one
already distributed) gets the same view under the same kind of sampler; any other sampler is
filtered (`quarantine_filter`). `record=` wraps the dataset in `GuardedDataset` first, so a
sample that fails in Lightning's workers is recorded (a local index or a `datalint serve` URL) and
replaced. `datalint docs training` has the whole story.
"""

from __future__ import annotations

try:
    # Imported first, so that a missing part of the [lightning] extra is named before anything else loads.
    import numpy as np
    import torch  # noqa: F401
    from lightning.pytorch import Callback, LightningDataModule, LightningModule, Trainer
except ModuleNotFoundError:
    from datalint.extras import missing_extra_error

    _missing = missing_extra_error("lightning", "`import datalint.lightning`")
    if _missing is not None:
        raise _missing from None
    raise

import os
from collections.abc import Callable, Mapping, Sequence, Sized
from typing import Any

import numpy.typing as npt
from torch.utils.data import (
    BatchSampler,
    DataLoader,
    Dataset,
    DistributedSampler,
    IterableDataset,
    RandomSampler,
    Sampler,
    SequentialSampler,
)

from datalint.errors import UsageError
from datalint.training.guard import GuardedDataset, OnError
from datalint.training.samplers import (
    QuarantineSource,
    good_indices,  # "every index but these", one home
    quarantine_filter,
    resolve_quarantine,
)

__all__ = ["GoodSamples", "QuarantineCallback", "quarantined_loader"]


class GoodSamples(Dataset[Any]):
    """The samples of `dataset` at `good` (sorted positions), renumbered 0..len(good)-1: what a
    sampler of any kind draws from, so that it never draws a quarantined sample."""

    def __init__(self, dataset: Any, good: npt.NDArray[np.integer[Any]]) -> None:
        self.dataset = dataset
        self.good = good

    def __len__(self) -> int:
        return len(self.good)

    def __getitem__(self, index: int) -> Any:
        return self.dataset[int(self.good[index])]


class QuarantineCallback(Callback):
    """Apply a quarantine list (a path, a scan index, a `datalint serve` URL or a `Quarantine`) to the
    training loaders of every `Trainer.fit`, on every rank; with `record=`, guard them too.

    `record`, `on_error`, `max_failures`, `token` and `spool` are `GuardedDataset`'s; `strict` is the
    samplers' (a list made for another dataset is an error, or with `strict=False` a warning).
    """

    def __init__(
        self,
        quarantine: QuarantineSource,
        *,
        record: str | os.PathLike[str] | None = None,
        on_error: OnError = "substitute",
        max_failures: int | None = 100,
        strict: bool = True,
        token: str | None = None,
        spool: str | os.PathLike[str] | None = None,
    ) -> None:
        self.quarantine = quarantine
        self.strict = strict
        self.guard: dict[str, Any] | None = None
        if record is not None:
            self.guard = {
                "record": record, "on_error": on_error, "max_failures": max_failures,
                "token": token, "spool": spool,
            }  # fmt: skip

    def setup(self, trainer: Trainer, pl_module: LightningModule, stage: str) -> None:
        if stage != "fit":
            return
        source = getattr(trainer.fit_loop, "_data_source", None)
        if source is None or not hasattr(source, "instance"):
            raise UsageError(
                "QuarantineCallback cannot find the Trainer's training loaders (this Lightning keeps them"
                " elsewhere): apply the list in train_dataloader() with datalint.lightning.quarantined_loader"
            )
        owner = source.instance
        if isinstance(owner, LightningModule | LightningDataModule):
            _wrap_hook(owner, self.apply)
        elif owner is not None:
            source.instance = self.apply(owner)

    def apply(self, loaders: Any) -> Any:
        """`loaders` (a DataLoader, or a list, tuple or dict of them) with the list applied to each."""
        return _each_loader(loaders, self._one)

    def _one(self, loader: DataLoader[Any]) -> DataLoader[Any]:
        return quarantined_loader(loader, self.quarantine, strict=self.strict, guard=self.guard)


class _QuarantinedHook:
    """The `train_dataloader` of a module or data module, with the list applied to what it returns.

    A class rather than a closure: `ddp_spawn` pickles the module, and this with it."""

    def __init__(self, original: Callable[[], Any], apply: Callable[[Any], Any]) -> None:
        self.original = original
        self.apply = apply

    def __call__(self) -> Any:
        return self.apply(self.original())


def _wrap_hook(owner: Any, apply: Callable[[Any], Any]) -> None:
    current = owner.train_dataloader
    if isinstance(current, _QuarantinedHook):  # a second fit with the same module: wrapped once
        current.apply = apply
        return
    owner.train_dataloader = _QuarantinedHook(current, apply)


def _each_loader(loaders: Any, apply: Callable[[DataLoader[Any]], DataLoader[Any]]) -> Any:
    if isinstance(loaders, DataLoader):
        return apply(loaders)
    if isinstance(loaders, Mapping):
        return {name: _each_loader(value, apply) for name, value in loaders.items()}
    if isinstance(loaders, list | tuple):
        return type(loaders)(_each_loader(value, apply) for value in loaders)
    raise UsageError(
        f"QuarantineCallback applies a list to torch DataLoaders (or a list or dict of them); the training"
        f" loaders are a {type(loaders).__name__}: apply it where that is built (datalint docs training)"
    )


def quarantined_loader(
    loader: DataLoader[Any],
    quarantine: QuarantineSource,
    *,
    strict: bool = True,
    guard: Mapping[str, Any] | None = None,
) -> DataLoader[Any]:
    """`loader` rebuilt so that no quarantined sample of its dataset comes out of it.

    A loader that draws each sample once per epoch (shuffled, in order, or a `DistributedSampler`) is
    rebuilt over `GoodSamples` with the same kind of sampler: a sampler Lightning puts in later
    draws from the good samples only. Any other sampler or batch sampler is filtered in place
    (`quarantine_filter`). `guard`: `GuardedDataset`'s keyword arguments, to guard the dataset too.
    """
    dataset: Any = loader.dataset
    if isinstance(dataset, IterableDataset):
        raise UsageError(
            f"{type(dataset).__name__} is an IterableDataset: a list cannot be applied through its loader's"
            " sampler; drop the samples in the stream (datalint.webdataset.skip_quarantined for shards)"
        )
    fitted = resolve_quarantine(quarantine, dataset, strict)
    served = GuardedDataset(dataset, quarantine=fitted, strict=strict, **guard) if guard else dataset
    if not len(fitted):
        return loader if served is dataset else _rebuilt(loader, served, loader.sampler, loader.batch_sampler)
    sampler = _sampler_over(loader, GoodSamples(served, good_indices(len(dataset), fitted)))
    if sampler is not None:
        return _rebuilt(loader, sampler.dataset, sampler.sampler, None)
    filtered = quarantine_filter(_sampling(loader), fitted, dataset=dataset, strict=strict)
    if _custom_batches(loader):
        return _rebuilt(loader, served, None, filtered)
    return _rebuilt(loader, served, filtered, None)


class _Resampled:
    def __init__(self, dataset: GoodSamples, sampler: Sampler[int]) -> None:
        self.dataset = dataset
        self.sampler = sampler


def _sampler_over(loader: DataLoader[Any], view: GoodSamples) -> _Resampled | None:
    """The loader's sampler, of the same kind and settings, over `view`; None when it is not one of
    the kinds that draw every sample once per epoch (it is filtered instead)."""
    if _custom_batches(loader):
        return None
    sampler = loader.sampler
    if type(sampler) is SequentialSampler:
        return _Resampled(view, SequentialSampler(view))
    if type(sampler) is RandomSampler and not sampler.replacement and sampler._num_samples is None:
        return _Resampled(view, RandomSampler(view, generator=sampler.generator))
    if type(sampler) is DistributedSampler:
        return _Resampled(
            view,
            DistributedSampler(
                view,
                num_replicas=sampler.num_replicas,
                rank=sampler.rank,
                shuffle=sampler.shuffle,
                seed=sampler.seed,
                drop_last=sampler.drop_last,
            ),
        )
    return None


def _custom_batches(loader: DataLoader[Any]) -> bool:
    batches = loader.batch_sampler
    return batches is not None and type(batches) is not BatchSampler


def _sampling(loader: DataLoader[Any]) -> Sequence[Any] | Sampler[Any]:
    return loader.batch_sampler if _custom_batches(loader) else loader.sampler  # type: ignore[return-value]


def _rebuilt(
    loader: DataLoader[Any], dataset: Sized, sampler: Any, batch_sampler: Any
) -> DataLoader[Any]:
    """A DataLoader like `loader` (workers, collate, pinning...) over `dataset` with the given sampling."""
    if type(loader) is not DataLoader:
        raise UsageError(
            f"QuarantineCallback rebuilds a torch DataLoader, and {type(loader).__name__} is a subclass of"
            " it whose arguments it cannot know: build it in train_dataloader() over"
            " datalint.lightning.GoodSamples, or with a QuarantineSampler"
        )
    options: dict[str, Any] = {
        "num_workers": loader.num_workers, "collate_fn": loader.collate_fn, "pin_memory": loader.pin_memory,
        "timeout": loader.timeout, "worker_init_fn": loader.worker_init_fn,
        "multiprocessing_context": loader.multiprocessing_context, "generator": loader.generator,
        "persistent_workers": loader.persistent_workers, "pin_memory_device": loader.pin_memory_device,
    }  # fmt: skip
    if loader.num_workers > 0:
        options["prefetch_factor"] = loader.prefetch_factor
    if hasattr(loader, "in_order"):
        options["in_order"] = loader.in_order
    if batch_sampler is not None and type(batch_sampler) is not BatchSampler:
        return DataLoader(dataset, batch_sampler=batch_sampler, **options)  # type: ignore[arg-type]
    return DataLoader(
        dataset,  # type: ignore[arg-type]
        batch_size=loader.batch_size,
        drop_last=loader.drop_last,
        sampler=sampler,
        **options,
    )
