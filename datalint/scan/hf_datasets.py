"""A Hugging Face `datasets.Dataset` as a scan source: `datalint scan --dataset SPEC [--key-column id]`.

`--dataset` takes a spec that gives a `datasets.Dataset` (`mypkg.data:train`,
`mypkg.data:make(split='train')`) or the folder `Dataset.save_to_disk` wrote. Either is read here
instead of through `__getitem__`, because a row of such a dataset is not what training sees of a
file: its images live in `Image()` columns as encoded bytes (or a path), and `datasets` decodes
them with Pillow on access, which would hide a truncated or unsupported file behind a decode error
with no name. Each `Image()` column is read raw (Arrow, undecoded) and judged as an image file is
(`datalint docs images`: corrupt, truncated, unsupported, decompression bombs, and the quality
scores the policy turns into dark, blurry, near_duplicate...). The other columns are measured as a
dataset's sample is (labels with `--label`, sizes, NaN).

Keys: the values of `--key-column` (an id column), or `FINGERPRINT#ROW`, the row's position tied to
the dataset's `_fingerprint`, so a list by position is never applied to another version of the
dataset (`datalint.hf.drop_quarantined` checks it). Only a folder or a spec that gives a `Dataset`
comes here (`dataset_readers.dataset_source` decides): every other dataset keeps `DatasetSource`.
"""

from __future__ import annotations

import importlib
import os
import time
from pathlib import Path
from typing import Any

from datalint.errors import UsageError
from datalint.scan import probes
from datalint.scan.images import (
    DEFAULT_MAX_PIXELS,
    ImageFinding,
    ImageOptions,
    ImageProbe,
    judged_fields_facts,
    probe_image_bytes,
    probe_image_file,
    warm_up_decoders,
)
from datalint.scan.sources import SourceDescription
from datalint.scan.stderr_capture import StderrCapture

ROW_SEPARATOR = "#"  # the key of a row without an id column: FINGERPRINT#ROW


def row_key(fingerprint: str, row: int) -> str:
    """The key of row `row` of a dataset with this `_fingerprint` when no id column names it."""
    return f"{fingerprint}{ROW_SEPARATOR}{row}"


def saved_dataset(spec: str) -> Any:
    """The Dataset a save_to_disk folder holds (a DatasetDict's folder is refused, naming its splits)."""
    from datalint.extras import require

    require("hf", "scanning a saved Hugging Face dataset")
    folder = Path(spec)
    if not (folder / "state.json").is_file():
        splits = sorted(entry.name for entry in folder.iterdir() if (entry / "state.json").is_file())
        raise UsageError(
            f"{spec} holds a DatasetDict (splits: {', '.join(splits) or 'none'}): scan one split, e.g."
            f" --dataset {folder / (splits[0] if splits else 'train')}"
        )
    return _datasets().load_from_disk(str(folder))



def _datasets() -> Any:
    """The `datasets` package, imported only here (it ships no type information)."""
    return importlib.import_module("datasets")


class HFDatasetSource:
    """A `datasets.Dataset` (see the module docstring). Options: `key_column`, `labels`, `scores`,
    `max_pixels`, `all_frames`."""

    def __init__(self, description: SourceDescription, dataset: Any) -> None:
        image_type = _datasets().Image
        self.description = description
        self.dataset = dataset
        self.labels: tuple[str, ...] = tuple(description.option("labels", ()))
        features = dataset.features.items()
        self.image_columns = tuple(name for name, kind in features if isinstance(kind, image_type))
        self.fingerprint = str(dataset._fingerprint)
        self.options = ImageOptions(
            max_pixels=int(description.option("max_pixels", DEFAULT_MAX_PIXELS)),
            all_frames=bool(description.option("all_frames", False)),
            quality=bool(description.option("scores", True)),
        )
        self._rows = dataset.with_format("arrow")  # images stay encoded: judged here, not by datasets
        self._keys = self._read_keys(description.option("key_column"))
        self._capture: StderrCapture | None = None
        self._capture_pid = 0
        if self.image_columns and len(dataset):
            warm_up_decoders()

    def _read_keys(self, column: str | None) -> list[str] | None:
        if column is None:
            return None
        if column not in self.dataset.column_names:
            raise UsageError(
                f"{self.description.spec} has no column {column!r} for --key-column; its columns:"
                f" {', '.join(self.dataset.column_names)}"
            )
        values = self._rows[column].to_pylist()
        named = enumerate(values)
        return [str(value) if value is not None else row_key(self.fingerprint, row) for row, value in named]

    def __len__(self) -> int:
        return len(self.dataset)

    def key(self, index: int) -> str:
        return self._keys[index] if self._keys is not None else row_key(self.fingerprint, index)

    def measure(self, index: int) -> dict[str, Any]:
        started = time.perf_counter()
        row = self._rows[index].to_pylist()[0]
        judged = [(name, self._judge(row.pop(name))) for name in self.image_columns]
        measured = probes.describe(row, self.labels, scores=False)
        info, findings = judged_fields_facts(dict(measured["info"] or {}), judged, "column")
        measured.update(info=info or None, duration=time.perf_counter() - started)
        if findings:
            measured["findings"] = findings
        return measured

    def _judge(self, value: Any) -> ImageProbe:
        """One `Image()` value judged as a file: its bytes, else the file its path names."""
        if self._capture is None or self._capture_pid != os.getpid():
            self._capture, self._capture_pid = StderrCapture(), os.getpid()
        data = value.get("bytes") if isinstance(value, dict) else None
        path = value.get("path") if isinstance(value, dict) else None
        if data:
            extension = Path(path or "").suffix.lower()  # only decides extension_mismatch
            return probe_image_bytes(bytes(data), extension, self.options, self._capture)
        if path:
            return probe_image_file(path, self.options, self._capture)
        return ImageProbe(0, (ImageFinding("empty", "the image is null or empty (no bytes, no path)"),))
