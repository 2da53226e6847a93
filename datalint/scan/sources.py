"""Sources: what the scan engine measures, one sample at a time.

The engine never sees a dataset object across a process boundary. A worker receives a small
picklable `SourceDescription` (kind + spec string + options), builds the source once per process
with `build_source()`, and for each index calls `source.measure(index)`, which returns plain data
(the probe results, keyed by the `samples` columns) or raises for that sample's own error.
`len(source)` and `source.key(index)` give the length and stable keys.

`SOURCE_KINDS` is the registry of source kinds: kind -> "module:attribute" of a callable that takes
a `SourceDescription` and returns a source. Entries are import strings so this module stays light
and a kind's heavy imports happen only when that kind is scanned.
"""

from __future__ import annotations

import importlib
import os
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from datalint.errors import UsageError
from datalint.index import keys
from datalint.index.keys import key_function
from datalint.scan import probes
from datalint.scan.specs import SpecError, innermost_user_frame, resolve_spec
from datalint.scan.stderr_capture import StderrCapture

_perf_counter = time.perf_counter  # bound once: a sample replacing time.perf_counter times only itself

SOURCE_KINDS: dict[str, str] = {
    "dataset": "datalint.scan.dataset_readers:dataset_source",  # which reader reads the dataset
    "images": "datalint.scan.images:ImageFilesSource",
    "webdataset": "datalint.scan.webdataset:WebDatasetSource",
    "parquet": "datalint.scan.parquet:ParquetSource",
}


class ScanWarning(UserWarning):
    """Something the user should know that does not stop the scan (the CLI prints it plainly)."""


@dataclass(frozen=True)
class SourceDescription:
    """What to scan, small and picklable: a source kind, a spec string and options."""

    kind: str
    spec: str
    options: tuple[tuple[str, Any], ...] = ()

    @classmethod
    def make(cls, kind: str, spec: str, **options: Any) -> SourceDescription:
        return cls(kind, spec, tuple(sorted((name, _frozen(value)) for name, value in options.items())))

    def option(self, name: str, default: Any = None) -> Any:
        return dict(self.options).get(name, default)


@runtime_checkable
class Source(Protocol):
    """A map-style collection of samples the engine can measure one by one."""

    description: SourceDescription

    def __len__(self) -> int: ...

    def key(self, index: int) -> str | None:
        """A stable name for the sample (a file path), or None when the source cannot name it."""
        ...

    def measure(self, index: int) -> dict[str, Any]:
        """Probe results for one sample as plain data; raises for the sample's own error.

        Keys are `samples` columns (`nbytes`, `signature`, `non_finite`, `requires_grad`,
        `non_cpu`, `labels`, `info`, optionally `duration`), plus an optional
        `"findings": [{"kind": ..., "detail": ...}]` decided from this sample alone.
        """
        ...


@runtime_checkable
class StreamSource(Protocol):
    """A source that can only be iterated (an IterableDataset): samples are keyed by position."""

    description: SourceDescription
    is_stream: bool

    def stream(self) -> Iterator[Callable[[], dict[str, Any]]]:
        """Yields, per position, a function that fetches the next sample and measures it."""
        ...


# Sources built in this process, so a worker (or a forked copy of the parent) builds each once.
_BUILT: dict[SourceDescription, Any] = {}


def build_source(description: SourceDescription) -> Any:
    """The source for a description, built once per process."""
    source = _BUILT.get(description)
    if source is None:
        source = _source_factory(description.kind)(description)
        _BUILT[description] = source
    return source


def hold_source(description: SourceDescription, source: Any) -> None:
    """Make `build_source` return `source` for this description until `forget_source`."""
    _BUILT[description] = source


def is_built(description: SourceDescription) -> bool:
    """Whether this process already holds the source (built here, or a dataset object handed over)."""
    return description in _BUILT


def forget_source(description: SourceDescription) -> None:
    """Drop a built source, so the next scan of it in this process lists its samples again.

    A dataset object handed to the API is kept: it cannot be built from its description.
    """
    if description.option("object_id") is None:
        _BUILT.pop(description, None)


def _source_factory(kind: str) -> Callable[[SourceDescription], Any]:
    target = SOURCE_KINDS.get(kind)
    if target is None:
        raise UsageError(f"unknown source kind {kind!r}; known kinds: {', '.join(sorted(SOURCE_KINDS))}")
    module_name, _, attribute = target.partition(":")
    factory: Callable[[SourceDescription], Any] = getattr(importlib.import_module(module_name), attribute)
    return factory


def fingerprint(source: Any, on_key: Callable[[int], None] | None = None) -> str | None:
    """The index's fingerprint of the source's keys (`datalint.index.keys.fingerprint`); None for a
    stream, which is never listed whole.

    `on_key(i)` is called before key `i` is read (the isolated set-up step names a key that hangs)."""
    if getattr(source, "is_stream", False):
        return None
    return keys.fingerprint(len(source), source.key, on_key)


# ----------------------------------------------------------------------------------------------
# Datasets named by a spec


class DatasetSource:
    """A map-style dataset (or an IterableDataset, scanned as a stream) named by a spec."""

    def __init__(self, description: SourceDescription, dataset: Any = None) -> None:
        self.description = description
        self.dataset = resolve_spec(description.spec) if dataset is None else dataset
        self.labels: tuple[str, ...] = tuple(description.option("labels", ()))
        self.scores = bool(description.option("scores", True))  # --no-scores: no image scores
        self.is_stream = _is_iterable_dataset(self.dataset)
        self.limit: int | None = description.option("limit")  # --limit: a stream stops after that many
        self.declared_length: int | None = None  # a stream's own __len__, compared with what it yields
        if not self.is_stream:
            if self.limit is not None:
                raise UsageError(
                    f"--limit caps a stream (an IterableDataset); {description.spec} is a map-style dataset, "
                    "whose every sample is scanned"
                )
            _check_map_style(description.spec, self.dataset)
            self._length = _length(description.spec, self.dataset)
        else:
            self.declared_length = _declared_length(self.dataset)
        self._keys = key_function(self.dataset)
        self._capture: StderrCapture | None = None
        self._capture_pid = 0
        _reset_load_truncated_images(description.spec)

    def __len__(self) -> int:
        if self.is_stream:
            raise TypeError("a stream has no length until it has been read")
        return self._length

    def key(self, index: int) -> str | None:
        if self._keys is None:
            return None
        try:
            return str(self._keys(index))
        except KeyboardInterrupt:
            raise
        except BaseException:  # a key the dataset cannot give (SystemExit too) is no reason to stop the scan
            return None

    def measure(self, index: int) -> dict[str, Any]:
        started = _perf_counter()
        with self._stderr().capturing() as said:
            sample = self.dataset[index]
        duration = _perf_counter() - started
        return self._described(sample, duration, said.text)

    def _stderr(self) -> StderrCapture:
        # What the decoders print while a sample is produced is that sample's (a libjpeg warning is
        # the only sign of a truncated JPEG that cv2.imread returns). One capture per process: a
        # forked worker must not share its parent's file.
        if self._capture is None or self._capture_pid != os.getpid():
            self._capture, self._capture_pid = StderrCapture(echo=True), os.getpid()
        return self._capture

    def _described(self, sample: Any, duration: float, said: str) -> dict[str, Any]:
        measured = {**probes.describe(sample, self.labels, scores=self.scores), "duration": duration}
        if said:
            from datalint.scan.images import classify_native_stderr  # only once a sample printed

            findings = [{"kind": f.kind, "detail": f.detail} for f in classify_native_stderr(said)]
            if findings:
                measured["findings"] = findings
        return measured

    def stream(self) -> Iterator[Callable[[], dict[str, Any]]]:
        iterator: Iterator[Any] | None = None
        exhausted = False

        def fetch_and_measure() -> dict[str, Any]:
            nonlocal exhausted, iterator
            started = _perf_counter()
            if iterator is None:
                # `iter()` is the dataset's own code: it runs inside position 0's measurement, so a
                # failure there is position 0's error (or crash), never an empty stream that passes.
                exhausted = True
                iterator = _start_iteration(self.dataset)
                exhausted = False
            try:
                with self._stderr().capturing() as said:
                    sample = next(iterator)
            except StopIteration:
                exhausted = True
                raise
            duration = _perf_counter() - started
            return self._described(sample, duration, said.text)

        fetched = 0
        while not exhausted and (self.limit is None or fetched < self.limit):
            yield fetch_and_measure
            fetched += 1


def _start_iteration(dataset: Any) -> Iterator[Any]:
    iterator = iter(dataset)
    if not callable(getattr(type(iterator), "__next__", None)):
        raise TypeError(
            f"iter() of the dataset returned a {type(iterator).__name__}, not an iterator: "
            f"{type(dataset).__name__}.__iter__ must return an iterator (or be a generator)"
        )
    return iterator


def _is_iterable_dataset(dataset: Any) -> bool:
    torch_data = sys.modules.get("torch.utils.data")
    iterable_class = getattr(torch_data, "IterableDataset", None)
    if iterable_class is not None and isinstance(dataset, iterable_class):
        return True
    return hasattr(dataset, "__iter__") and not hasattr(dataset, "__getitem__")


def _check_map_style(spec: str, dataset: Any) -> None:
    if isinstance(dataset, type):
        raise SpecError(
            f"dataset spec {spec!r} names the class {dataset.__qualname__}, not a dataset; "
            "call it in the spec, e.g. module:ClassName(...) or a factory function"
        )
    missing = [name for name in ("__len__", "__getitem__") if not hasattr(dataset, name)]
    if missing:
        raise SpecError(
            f"dataset spec {spec!r} gives a {type(dataset).__name__}, not a map-style dataset: it has no "
            f"{' and no '.join(missing)} (an IterableDataset is scanned by iteration instead)"
        )


def _declared_length(dataset: Any) -> int | None:
    """What a stream's `__len__` says (None: it has none, or it raises): an IterableDataset may
    declare one, which `len(loader)`, progress bars and schedules then trust."""
    if not hasattr(type(dataset), "__len__"):
        return None
    try:
        return len(dataset)
    except KeyboardInterrupt:
        raise
    except BaseException:  # the dataset's own code: a failing __len__ is no reason to stop the scan
        return None


def _length(spec: str, dataset: Any) -> int:
    try:
        length = len(dataset)
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # the user's __len__ failed: say so, exit 2
        where = innermost_user_frame(exc)
        raise SpecError(
            f"dataset spec {spec!r}: len() raised {type(exc).__name__}: {exc}"
            + (f" (at {where})" if where else "")
        ) from None
    return int(length)


def _reset_load_truncated_images(spec: str) -> None:
    # A truncated JPEG must fail the scan, not be padded with grey and pass as clean.
    image_file: Any = sys.modules.get("PIL.ImageFile")
    if image_file is not None and getattr(image_file, "LOAD_TRUNCATED_IMAGES", False):
        warnings.warn(
            f"{spec}: PIL.ImageFile.LOAD_TRUNCATED_IMAGES was True; datalint scans with it False so that "
            "truncated images are reported instead of silently padded",
            ScanWarning,
            stacklevel=2,
        )
        image_file.LOAD_TRUNCATED_IMAGES = False


def _frozen(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return tuple(_frozen(item) for item in value)
    if isinstance(value, dict):
        return tuple(sorted((key, _frozen(item)) for key, item in value.items()))
    return value
