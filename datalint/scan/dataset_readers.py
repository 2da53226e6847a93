"""Which reader reads a dataset: the source kind "dataset" (`--dataset SPEC`, `datalint.scan(ds)`).

A folder of LitData chunks is read by `streaming_shards.LitDataSource`, a Hugging Face `Dataset`
(a spec giving one, or a `save_to_disk` folder) by `hf_datasets.HFDatasetSource`, anything else by
`sources.DatasetSource` (`__getitem__`, or iteration for a stream). The Hugging Face and LitData
readers, and the image judging they use, are imported only for such a dataset. This module sits
above the readers: they know nothing of each other, nor of it.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from datalint.errors import UsageError
from datalint.scan.sources import DatasetSource, SourceDescription, hold_source
from datalint.scan.specs import resolve_spec


def dataset_source(description: SourceDescription) -> Any:
    """The source of kind "dataset": a Hugging Face Dataset (a spec giving one, or a save_to_disk
    folder) is read by `hf_datasets.HFDatasetSource`, anything else by `DatasetSource`."""
    spec = description.spec
    if os.path.isfile(os.path.join(spec, "index.json")):  # litdata's chunks: scan/streaming_shards.py
        from datalint.scan.streaming_shards import LitDataSource

        return LitDataSource(description)
    if is_saved_dataset(spec):
        from datalint.scan.hf_datasets import saved_dataset

        return source_for(description, saved_dataset(spec))
    return source_for(description, resolve_spec(spec))


def source_for(description: SourceDescription, dataset: Any) -> Any:
    """The source that reads `dataset` (resolved from the description's spec, or handed to the API).
    The Hugging Face reader (and the image judging it uses) is imported only for such a dataset."""
    if is_hf_dataset(dataset):
        from datalint.scan.hf_datasets import HFDatasetSource

        return HFDatasetSource(description, dataset)
    if description.option("key_column") is not None:
        raise UsageError(
            "--key-column is for a Hugging Face dataset (or --parquet, or a folder of LitData chunks);"
            f" {description.spec} gives a {type(dataset).__name__}, whose keys come from its datalint_key(i)"
            " method or samples list"
        )
    return DatasetSource(description, dataset)


def is_hf_dataset(dataset: Any) -> bool:
    """A `datasets.Dataset`, told without importing `datasets` (a spec that gives one imported it)."""
    module = sys.modules.get("datasets")
    dataset_class = getattr(module, "Dataset", None)
    return isinstance(dataset_class, type) and isinstance(dataset, dataset_class)


def is_saved_dataset(spec: str) -> bool:
    """Whether `spec` is a folder `save_to_disk` wrote (a Dataset's, or a DatasetDict's)."""
    folder = Path(spec)
    return folder.is_dir() and ((folder / "state.json").is_file() or (folder / "dataset_dict.json").is_file())


def adopt_dataset(dataset: Any, labels: tuple[str, ...] = ()) -> SourceDescription:
    """Describe a dataset object handed to the Python API and keep it for this process.

    Forked workers inherit it; it is never pickled. Only engines that fork can scan such an object.
    """
    spec = f"<{type(dataset).__module__}.{type(dataset).__qualname__} object>"
    description = SourceDescription.make("dataset", spec, labels=labels, object_id=id(dataset))
    hold_source(description, source_for(description, dataset))
    return description
