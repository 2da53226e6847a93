"""LitData streaming shards as a scan source: `datalint scan --dataset FOLDER [--key-column id]`.

FOLDER is what litdata's `optimize()` (or its `BinaryWriter`) wrote: an `index.json` naming the
chunk files (`chunk-0-0.bin`, ...) and how many samples each holds. Each sample is read with
litdata's own `StreamingDataset[i]`, so the scan sees what training will. A `bytes` field whose
first bytes announce an image format is judged as an image file is (`datalint docs images`:
corrupt, truncated, unsupported, quality scores); the other fields are measured as a dataset's
sample is (labels with `--label`, sizes, NaN).

Keys: the value of `--key-column` (the sample's own id), which survives the samples being written
again into another number of chunks; else `CHUNK#OFFSET`, the chunk file's name and the sample's
place in it, which a rewrite into other chunks makes stale (`datalint.streaming.drop_quarantined`
then refuses the list rather than dropping other samples).
"""

from __future__ import annotations

import bisect
import importlib
import itertools
import json
import os
import time
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from datalint.errors import UsageError
from datalint.scan import probes
from datalint.scan.images import (
    DEFAULT_MAX_PIXELS,
    ImageOptions,
    ImageProbe,
    judged_fields_facts,
    probe_image_bytes,
    sniff_format,
    warm_up_decoders,
)
from datalint.scan.sources import SourceDescription
from datalint.scan.stderr_capture import StderrCapture

INDEX_FILE = "index.json"
OFFSET_SEPARATOR = "#"  # the key of a sample without an id: CHUNK#OFFSET


@dataclass(frozen=True)
class Chunks:
    """The chunk files of a litdata folder, in the order litdata numbers its samples."""

    names: tuple[str, ...]
    sizes: tuple[int, ...]

    @property
    def length(self) -> int:
        return self.starts[-1] if self.starts else 0

    @cached_property
    def starts(self) -> tuple[int, ...]:
        """The number of each chunk's first sample, and past the end the length."""
        return (0, *itertools.accumulate(self.sizes))

    @cached_property
    def _by_name(self) -> dict[str, int]:
        return {name: at for at, name in enumerate(self.names)}

    def position_key(self, index: int) -> str:
        """`CHUNK#OFFSET` of the sample litdata numbers `index`."""
        if not 0 <= index < self.length:
            raise IndexError(f"sample {index} is outside the chunks' {self.length} samples")
        at = bisect.bisect_right(self.starts, index) - 1
        return f"{self.names[at]}{OFFSET_SEPARATOR}{index - self.starts[at]}"

    def index_of(self, key: str) -> int | None:
        """The sample a `CHUNK#OFFSET` key names here, or None when this folder has no such place."""
        name, separator, offset = key.rpartition(OFFSET_SEPARATOR)
        at = self._by_name.get(name) if separator and offset.isdigit() else None
        if at is None or int(offset) >= self.sizes[at]:
            return None
        return self.starts[at] + int(offset)


def is_litdata_folder(spec: str) -> bool:
    """Whether `spec` is a folder litdata wrote (an index.json with its chunks and config)."""
    try:
        document = json.loads((Path(spec) / INDEX_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(document, dict) and "chunks" in document and "config" in document


def read_chunks(folder: str | os.PathLike[str]) -> Chunks:
    """The chunks `index.json` lists (names and sample counts)."""
    document = json.loads((Path(folder) / INDEX_FILE).read_text(encoding="utf-8"))
    chunks = document["chunks"]
    return Chunks(tuple(str(c["filename"]) for c in chunks), tuple(int(c["chunk_size"]) for c in chunks))


def _streaming_dataset(folder: str) -> Any:
    from datalint.extras import require

    require("streaming", "scanning litdata shards")
    litdata = importlib.import_module("litdata")  # it ships no type information
    return litdata.StreamingDataset(folder)


class LitDataSource:
    """A litdata folder (see the module docstring). Options: `key_column`, `labels`, `scores`,
    `max_pixels`, `all_frames`."""

    def __init__(self, description: SourceDescription) -> None:
        self.description = description
        self.folder = description.spec
        if not is_litdata_folder(self.folder):
            raise UsageError(
                f"{self.folder} has an {INDEX_FILE} that is not litdata's (no chunks and config in it):"
                " --dataset takes a folder litdata's optimize() or BinaryWriter wrote, or a dataset spec"
            )
        self.chunks = read_chunks(self.folder)
        self.labels: tuple[str, ...] = tuple(description.option("labels", ()))
        self.options = ImageOptions(
            max_pixels=int(description.option("max_pixels", DEFAULT_MAX_PIXELS)),
            all_frames=bool(description.option("all_frames", False)),
            quality=bool(description.option("scores", True)),
        )
        self._dataset: Any = None
        self._pid = 0
        self._capture = StderrCapture()
        self._keys = self._read_keys(description.option("key_column"))
        if self.chunks.length:
            warm_up_decoders()

    def _reader(self) -> Any:
        # One StreamingDataset per process: a forked worker opens the chunks itself.
        if self._dataset is None or self._pid != os.getpid():
            self._dataset, self._pid = _streaming_dataset(self.folder), os.getpid()
            self._capture = StderrCapture()
        return self._dataset

    def _read_keys(self, column: str | None) -> list[str] | None:
        """The id column's values, read once in the process that plans the scan (litdata stores rows,
        so every sample is read here; its image bytes are not decoded)."""
        if column is None:
            return None
        keys: list[str] = []
        for index in range(self.chunks.length):
            sample = self._reader()[index]
            if not isinstance(sample, dict) or column not in sample:
                fields = ", ".join(sample) if isinstance(sample, dict) else type(sample).__name__
                raise UsageError(
                    f"{self.folder}: sample {index} has no field {column!r} for --key-column (its fields:"
                    f" {fields})"
                )
            keys.append(str(sample[column]))
        return keys

    def __len__(self) -> int:
        return self.chunks.length

    def key(self, index: int) -> str:
        return self._keys[index] if self._keys is not None else self.chunks.position_key(index)

    def measure(self, index: int) -> dict[str, Any]:
        started = time.perf_counter()
        sample = self._reader()[index]
        fields = dict(sample) if isinstance(sample, dict) else {"sample": sample}
        images = [name for name, value in fields.items() if _is_image_bytes(value)]
        judged = [(name, self._judge(fields.pop(name))) for name in images]
        measured = probes.describe(fields, self.labels, scores=False)
        info, findings = judged_fields_facts(dict(measured["info"] or {}), judged)
        measured.update(info=info or None, duration=time.perf_counter() - started)
        if findings:
            measured["findings"] = findings
        return measured

    def _judge(self, data: bytes) -> ImageProbe:
        return probe_image_bytes(bytes(data), "", self.options, self._capture)


def _is_image_bytes(value: Any) -> bool:
    return isinstance(value, (bytes, bytearray)) and sniff_format(bytes(value[:32])) is not None


