"""The guard behind `datalint.torch`: a dataset wrapper that records failing samples instead of dying.

Imports torch at module level: reach it through `datalint.torch`, which names the [torch] extra when
torch is missing.
"""

from __future__ import annotations

import logging
import os
import platform
import sys
import time
import traceback
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch
from torch.utils.data import Dataset, default_collate, get_worker_info

from datalint import __version__
from datalint.errors import DatalintError
from datalint.flight import inflight
from datalint.text import exception_text, printable, safe_str, shown_name
from datalint.training import remote
from datalint.training.fit import KeyReader, key_reader
from datalint.training.record import Failure, record_failure, start_guard_run, utc_now
from datalint.training.samplers import QuarantineSource, resolve_quarantine

logger = logging.getLogger("datalint.torch")

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
    # Under `datalint run`: where this process writes the sample it is reading (flight/inflight.py)
    sample_slot: inflight.SampleSlot | None = None
    sample_keys: KeyReader | None = None


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
        self._avoid = frozenset() if quarantine is None else (
            resolve_quarantine(quarantine, dataset, strict).index_set()
        )
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
            return self._read(index)
        except Exception as exc:  # the isolation boundary: one sample, whatever it raised
            self._note(index, exc, time.perf_counter() - started)
            return _Failed(exc)

    def _read(self, index: int) -> Any:
        """`dataset[index]`, and under `datalint run` the sample in flight written where the recorder
        reads it if this process dies mid-sample (a segfault, an abort, the OOM killer)."""
        state = self._state or self._process_state()
        slot = state.sample_slot
        if slot is None:
            return self.dataset[index]
        slot.begin(index, state.sample_keys)
        try:
            return self.dataset[index]
        finally:
            slot.end(index)

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
            self._state = self._new_process_state()
        return self._state

    def _new_process_state(self) -> _ProcessState:
        slot = inflight.process_slot(_torch_worker_number())
        keys = key_reader(self.dataset) if slot is not None else None  # resolved once, read per sample
        return _ProcessState(pid=os.getpid(), sample_slot=slot, sample_keys=keys)

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


def _torch_worker_number() -> int:
    info = get_worker_info()
    return info.id if info is not None else -1


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
