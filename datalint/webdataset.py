"""Keep quarantined samples out of webdataset, Hugging Face `datasets` and pyarrow pipelines.

webdataset (keys: the scan's `SHARD/__key__`, rebuilt from each sample's `__url__` and `__key__`)::

    from datalint.webdataset import skip_quarantined
    dataset = wds.WebDataset(urls).compose(skip_quarantined("out/shards.quarantine.json"))
    # or: wds.DataPipeline(wds.SimpleShardList(urls), wds.tarfile_to_samples(), skip_quarantined(path), ...)

Hugging Face `datasets` (rows by position, as `--parquet` scans them)::

    from datalint.webdataset import hf_filter
    train = train.filter(hf_filter("out/train.quarantine.json"), with_indices=True)

pyarrow (a table's rows by position, or by a key column)::

    from datalint.webdataset import arrow_mask
    table = table.filter(arrow_mask("out/train.quarantine.json", table.num_rows))

None of these imports webdataset, datasets or pyarrow: each works on the objects they hand it.
A list is a path (`quarantine.json`, a binary list, a scan index) or an http(s) URL.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from datalint.errors import UsageError
from datalint.training.quarantine import Quarantine, load_quarantine

ListSource = Quarantine | str | os.PathLike[str]

__all__ = ["QuarantineStage", "arrow_mask", "hf_filter", "load_list", "skip_quarantined"]


def load_list(source: ListSource) -> Quarantine:
    """A loaded list, a path, or an http(s) URL of `datalint serve` (fetched as every list URL is:
    checked before it is cached, within a total deadline, the last good copy when the service fails)."""
    if isinstance(source, Quarantine):
        return source
    return load_quarantine(os.fspath(source))


class QuarantineStage:
    """A webdataset pipeline stage that drops quarantined samples by key; also a `select` predicate."""

    def __init__(self, quarantine: Quarantine) -> None:
        if len(quarantine) and not quarantine.has_keys:
            raise UsageError(
                f"{quarantine.source} names its samples by index only; a webdataset stage matches keys:"
                " use the quarantine.json (or the scan index) of a scan with --webdataset PATTERN"
            )
        self.quarantine = quarantine
        self._keys = frozenset(k for k in quarantine.keys if k is not None)
        self.skipped = 0

    def keep(self, sample: Mapping[str, Any]) -> bool:
        """False for a quarantined sample; the shard path is matched from its end (mounts differ)."""
        if not self._keys:
            return True
        key = sample.get("__key__")
        url = str(sample.get("__url__", ""))
        parts = [part for part in url.replace("\\", "/").split("/") if part]
        for depth in range(1, len(parts) + 1):
            shard = "/".join(parts[-depth:])
            if f"{shard}/{key}" in self._keys:
                return False
        return True

    def __call__(self, samples: Iterable[Mapping[str, Any]]) -> Iterator[Mapping[str, Any]]:
        for sample in samples:
            if self.keep(sample):
                yield sample
            else:
                self.skipped += 1


def skip_quarantined(list_or_url: ListSource) -> QuarantineStage:
    """The stage for `WebDataset(...).compose(...)` or `DataPipeline(...)`; `.keep` for `.select`."""
    return QuarantineStage(load_list(list_or_url))


class _RowFilter:
    """`datasets.Dataset.filter(..., with_indices=True)`: keep row i unless it is quarantined."""

    def __init__(self, quarantine: Quarantine) -> None:
        self.indices = np.asarray(quarantine.indices)

    def _good(self, rows: npt.ArrayLike) -> npt.NDArray[np.bool_]:
        wanted = np.asarray(rows, dtype=np.int64)
        at = np.searchsorted(self.indices, wanted).clip(0, max(len(self.indices) - 1, 0))
        if not len(self.indices):
            return np.ones(len(wanted), dtype=np.bool_)
        found: npt.NDArray[np.bool_] = self.indices[at] == wanted
        return ~found

    def __call__(self, example: Any, index: int | Sequence[int]) -> bool | list[bool]:
        if isinstance(index, int):
            return bool(self._good([index])[0])
        return self._good(list(index)).tolist()  # batched=True: one answer per row of the batch


def hf_filter(list_or_url: ListSource) -> _RowFilter:
    """A function for `dataset.filter(fn, with_indices=True)` (batched or not) that drops quarantined rows."""
    return _RowFilter(load_list(list_or_url))


def arrow_mask(list_or_url: ListSource, num_rows: int, offset: int = 0) -> npt.NDArray[np.bool_]:
    """True for the rows [offset, offset + num_rows) to keep; `table.filter(mask)` takes it as it is."""
    return _RowFilter(load_list(list_or_url))._good(np.arange(offset, offset + num_rows))
