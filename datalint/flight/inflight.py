"""The sample each process of a recorded training is reading, kept where a crash cannot erase it.

`datalint run` makes a directory and names it in `DATALINT_RUN_INFLIGHT` for the command it runs.
A `GuardedDataset` in any process of that training (the main one or a DataLoader worker) maps one
small file there, `<pid>.sample`, once, and then writes each sample's index and key into it before
reading the sample and marks it done after: two writes to shared memory a sample, no system call,
no fsync. The mapped pages belong to the kernel's page cache, so what the process wrote is still
there after a SIGKILL, a segfault or an abort; when the recorder sees a process die it reads that
process's file, and the sample in flight is the one the process was reading.

A process that makes its record says so with one byte into the directory's `news` FIFO, which wakes
the recorder: it learns of a new worker at once without listing the directory 50 times a second.

Standard library only: the recorder imports this module too.
"""

from __future__ import annotations

import mmap
import os
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ENVIRONMENT = "DATALINT_RUN_INFLIGHT"
SUFFIX = ".sample"
NEWS = "news"  # the FIFO a new record is announced on
MAGIC = b"DLS1"
KEY_BYTES = 240  # a longer key is cut
LONG_SAMPLE_SECONDS = 0.5  # a death this long into a sample says how long

# magic, the DataLoader worker's number (torch's, -1: not a worker), sequence, index in flight (-1:
# between samples), last finished (-1: none yet), time.time() at its start, key length, key,
# sequence again: a record whose two sequences differ was being written when the process died.
RECORD = struct.Struct(f"<4siQqqdH{KEY_BYTES}sQ")
HEADER = struct.Struct("<4si")  # written once, when the file is made
SAMPLE_OFFSET = HEADER.size
_pack_sample = struct.Struct(f"<QqqdH{KEY_BYTES}sQ").pack_into  # the rest, at each sample
DONE = struct.Struct("<qq")  # (index in flight, last finished), written over the record's fields
DONE_OFFSET = 4 + 4 + 8  # after magic, worker and the first sequence


@dataclass(frozen=True)
class SampleInFlight:
    """What a process's record says at the moment it was read (after its death, for the recorder)."""

    index: int | None  # the sample it was reading, None between samples
    last: int | None  # the last sample it finished, None before its first
    key: str | None  # the key of `index`, or of `last` between samples
    started: float | None  # time.time() when `index` started
    torn: bool = False  # the process died while writing the record: `index` may be the one before
    worker: int | None = None  # torch's number for the DataLoader worker, None for another process


class SampleSlot:
    """One process's record, written by that process alone."""

    __slots__ = ("_depth", "_last", "_map", "_sequence", "_worker")

    def __init__(self, mapping: mmap.mmap, worker: int) -> None:
        self._map = mapping
        self._worker = worker
        self._sequence = 0
        self._last = -1
        self._depth = 0  # a guarded dataset inside another: the outer sample is the one in flight

    def begin(self, index: int, keys: Callable[[int], str] | None) -> None:
        """Sample `index` is being read; its key is `keys(index)` (the dataset's own code, so a key
        that cannot be read leaves the index alone)."""
        self._depth += 1
        if self._depth > 1:
            return
        self._sequence += 1
        try:
            data = keys(index).encode("utf-8", "backslashreplace") if keys is not None else b""
        except Exception:  # a broken key reader must not fail the sample
            data = b""
        if len(data) > KEY_BYTES:  # cut at a character's boundary
            data = data[:KEY_BYTES].decode("utf-8", "ignore").encode()
        seq = self._sequence
        _pack_sample(self._map, SAMPLE_OFFSET, seq, index, self._last, time.time(), len(data), data, seq)

    def end(self, index: int) -> None:
        self._depth -= 1
        if self._depth > 0:
            return
        self._last = index
        DONE.pack_into(self._map, DONE_OFFSET, -1, index)


def open_slot(directory: str | os.PathLike[str], worker: int = -1) -> SampleSlot | None:
    """This process's record in `directory` (created, its worker number written at once so that the
    recorder knows the process before its first sample ends), or None where it cannot be made (a
    training that outlived its `datalint run`, a read-only directory): naming the sample is a courtesy."""
    path = os.path.join(directory, f"{os.getpid()}{SUFFIX}")
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.ftruncate(fd, RECORD.size)
            mapping = mmap.mmap(fd, RECORD.size)
        finally:
            os.close(fd)
    except (OSError, ValueError):
        return None
    RECORD.pack_into(mapping, 0, MAGIC, worker, 0, -1, -1, 0.0, 0, b"", 0)  # the header, and no sample yet
    announce(directory)
    return SampleSlot(mapping, worker)


def announce(directory: str | os.PathLike[str]) -> None:
    """Wake the recorder: a new record is in `directory`. Never blocks; nobody listening (no FIFO,
    no reader, a full pipe that will wake it anyway) is no error."""
    try:
        fd = os.open(os.path.join(directory, NEWS), os.O_WRONLY | os.O_NONBLOCK)
    except OSError:
        return
    try:
        os.write(fd, b"+")
    except OSError:
        pass
    finally:
        os.close(fd)


def open_news(directory: Path) -> tuple[int, int] | None:
    """The recorder's end of the news FIFO: (read fd, a write fd held so that the read end never
    sees end-of-file between announcements), or None where no FIFO can be made there."""
    path = directory / NEWS
    try:
        os.mkfifo(path, 0o600)
        reader = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        return reader, os.open(path, os.O_WRONLY | os.O_NONBLOCK)
    except OSError:
        os.close(reader)
        return None


_process: tuple[int, SampleSlot | None] | None = None


def process_slot(worker: int = -1) -> SampleSlot | None:
    """This process's record when it runs under `datalint run`, opened on first use; a forked
    worker opens its own (the environment is read once per process, here at the edge). `worker`
    is torch's number for this DataLoader worker (-1: not one)."""
    global _process
    pid = os.getpid()
    if _process is None or _process[0] != pid:
        directory = os.environ.get(ENVIRONMENT)
        _process = (pid, open_slot(directory, worker) if directory else None)
    return _process[1]


def parse(data: bytes) -> SampleInFlight | None:
    """A record's bytes as what they say; None for a file that holds no record."""
    if len(data) < RECORD.size:
        return None
    magic, worker, first, index, last, started, length, key, second = RECORD.unpack_from(data)
    if magic != MAGIC:
        return None
    text = key[:length].decode("utf-8", "replace") if length else None
    return SampleInFlight(
        index=index if index >= 0 else None,
        last=last if last >= 0 else None,
        key=text,
        started=started if index >= 0 else None,
        torn=first != second,
        worker=worker if worker >= 0 else None,
    )


def read(directory: Path, pid: int) -> SampleInFlight | None:
    """What process `pid` was reading, from its record in `directory`; None where it kept none
    (no `GuardedDataset` in that process)."""
    try:
        data = (directory / f"{pid}{SUFFIX}").read_bytes()
    except OSError:
        return None
    return parse(data)


def forget(directory: Path, pid: int) -> None:
    """Remove a dead process's record once read."""
    (directory / f"{pid}{SUFFIX}").unlink(missing_ok=True)


def pids(directory: Path) -> list[int]:
    """The processes that keep a record in `directory` (one listing: cheap enough for the recorder's
    50 Hz poll, so a worker that dies within its first second is still seen)."""
    try:
        names = os.listdir(directory)
    except OSError:
        return []
    stems = (name.removesuffix(SUFFIX) for name in names if name.endswith(SUFFIX))
    return [int(stem) for stem in stems if stem.isdigit()]


def describe(sample: SampleInFlight, died: float | None = None) -> str:
    """'while reading sample 1234 (key cats/1.jpg)', with for how long when it was a while (a
    sample that allocates until the OOM killer acts), or what it read last."""
    key = f" (key {sample.key})" if sample.key else ""
    if sample.index is not None:
        maybe = " (the record was being written: it may be the sample before)" if sample.torn else ""
        took = died - sample.started if died is not None and sample.started is not None else 0.0
        duration = f", {took:.1f}s into it" if took >= LONG_SAMPLE_SECONDS else ""
        return f"while reading sample {sample.index}{key}{duration}{maybe}"
    if sample.last is not None:
        return f"between samples (the last it read: sample {sample.last}{key})"
    return "before reading its first sample"
