"""Isolated execution: whatever a sample does to its process becomes an outcome for that sample.

A sample may raise (any BaseException), segfault, abort, call os._exit, be SIGKILLed (what the OOM
killer does) or hang, in Python or in C with the GIL held. The engine turns each of those into one
row for that one sample and keeps scanning the others.

How (see docs/scan.md, "The engine"):

* Workers are forked from the scanning process, like a DataLoader's, so the dataset is never
  pickled. Each worker takes chunks of indices from its own pipe and sends rows back in small
  batches (every `flush_rows` rows or `flush_interval` seconds).
* Before each sample a worker writes (sequence, index, start time, output offset) into its slot of
  a shared-memory journal: no system call, under a microsecond.
* When a worker dies the parent reads its slot: the index in flight is the culprit, its exit status
  names the signal, and the worker's own output file holds the faulthandler dump. Only that worker
  is replaced (one fork, ~10 ms even with torch imported); the other workers never notice, and the
  culprit's unfinished chunk-mates are handed out again.
* The parent is the watchdog: a sample running past the timeout gets SIGUSR1 (faulthandler dumps
  the hung stack, even from C code holding the GIL), then SIGKILL.
* Workers die with the scanner (PR_SET_PDEATHSIG, or a watcher thread where that is missing), raise
  their own oom_score_adj so the OOM killer picks a worker, and ignore SIGINT (Ctrl-C stops the
  scanner, which stops them).
"""

from __future__ import annotations

import contextlib
import ctypes
import faulthandler
import json
import mmap
import os
import re
import resource
import signal
import struct
import sys
import sysconfig
import tempfile
import threading
import time
import traceback
from collections import deque
from collections.abc import Generator, Iterable, Iterator
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, Pipe, wait
from pathlib import Path
from typing import IO, Any

from datalint.errors import DatalintError
from datalint.scan.probes import open_fd_count
from datalint.scan.sources import SourceDescription, build_source

Row = dict[str, Any]

_PACKAGE_DIR = str(Path(__file__).resolve().parent.parent)
MAX_TEXT = 20_000  # characters of a traceback / dump kept per sample
MAX_MESSAGE = 2_000
MAX_STREAM_FAILURES = 100  # errors in a row after which a stream is taken to be broken for good

CRASH_CAUSES = {
    "SIGKILL": "killed by SIGKILL: most likely out of memory (the kernel's OOM killer sends SIGKILL)",
    "SIGBUS": "bus error: shared memory (/dev/shm) exhausted, or a memory-mapped file shrank underneath",
    "SIGSEGV": "segmentation fault in native code: a native decoder or extension, or a handle "
    "(HDF5, LMDB, database connection) opened before the fork and shared across processes",
    "SIGABRT": "aborted by native code (a failed C/C++ assertion or heap corruption), or a handle "
    "shared across fork",
    "SIGFPE": "arithmetic fault in native code",
    "SIGILL": "illegal instruction: a native library built for another CPU",
}


class EngineError(DatalintError):
    """The engine itself cannot go on (workers die outside any sample, fork fails)."""


@dataclass(frozen=True)
class RunnerOptions:
    """How samples are executed. `workers=0` runs them in this process and isolates nothing."""

    workers: int
    timeout: float = 60.0
    chunk_size: int | None = None  # None: sized from measured durations (~50 ms of work per chunk)
    dump_grace: float = 0.5  # seconds from the hung-stack dump to SIGKILL
    flush_rows: int = 64
    flush_interval: float = 0.02
    max_unattributed_deaths: int = 3


def run(
    description: SourceDescription, todo: Iterable[int], total: int, options: RunnerOptions
) -> Generator[list[Row], None, None]:
    """Measure the samples in `todo`, yielding batches of rows as they come (an empty batch at least
    every ~0.1 s, so the caller can refresh its progress and flush its writes)."""
    source = build_source(description)
    stream = bool(getattr(source, "is_stream", False))
    if options.workers <= 0:
        for rows in _run_in_process(source, todo, stream):
            for row in rows:
                if row["status"] == "ok" and float(row.get("duration") or 0.0) > options.timeout:
                    late_row(row, options.timeout)
            yield rows
    else:
        yield from _Pool(description, options, stream).run(iter(todo), total)


# ----------------------------------------------------------------------------------------------
# One sample -> one row (runs in a worker, or in-process with --workers 0)


def measure_outcome(source: Any, index: int, *, catch_interrupt: bool = True) -> Row:
    """Row for one sample: its probe results, or the error it raised (any BaseException)."""
    started = time.perf_counter()
    try:
        result = source.measure(index)
    except KeyboardInterrupt as exc:
        if not catch_interrupt:
            raise
        return error_row(index, exc, time.perf_counter() - started)
    except BaseException as exc:  # isolation boundary: the sample's own failure, SystemExit included
        return error_row(index, exc, time.perf_counter() - started)
    row = {"idx": index, "status": "ok", **result}
    row.setdefault("duration", time.perf_counter() - started)
    return row


def _measure_next(fetch: Any, index: int, *, catch_interrupt: bool = True) -> Row | None:
    """Like measure_outcome for the next sample of a stream; None when the stream is exhausted."""
    started = time.perf_counter()
    try:
        result = fetch()
    except StopIteration:
        return None
    except KeyboardInterrupt as exc:
        if not catch_interrupt:
            raise
        return error_row(index, exc, time.perf_counter() - started)
    except BaseException as exc:  # isolation boundary, as above
        return error_row(index, exc, time.perf_counter() - started)
    row = {"idx": index, "status": "ok", **result}
    row.setdefault("duration", time.perf_counter() - started)
    return row


def error_row(index: int, exc: BaseException, duration: float) -> Row:
    where = _innermost_user_frame(traceback.extract_tb(exc.__traceback__))
    return {
        "idx": index,
        "status": "error",
        "duration": duration,
        "error_type": _exception_name(exc),
        "error_message": _truncate(str(exc), MAX_MESSAGE),
        "traceback": _truncate(_user_traceback(exc), MAX_TEXT, keep="tail"),
        "info": {"where": where} if where else None,
    }


def late_row(row: Row, timeout: float, dump: str = "") -> None:
    """A sample that did finish, but after the timeout, is a timeout all the same (the DataLoader's
    `timeout=` would have failed the batch). The stack dump, when one was taken, says where it was."""
    where = innermost_dumped_frame(dump)
    message = f"took {row['duration']:.2f} s, over the {timeout:g} s timeout" + (
        f"; was in {where}" if where else ""
    )
    info = row.get("info") or {}
    info = dict(json.loads(info) if isinstance(info, str) else info)
    if where:
        info["where"] = where
    row.update(
        status="timeout",
        error_type="Timeout",
        error_message=message,
        traceback=dump or None,
        info=info or None,
    )


def _exception_name(exc: BaseException) -> str:
    cls = type(exc)
    return cls.__qualname__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"


def _user_traceback(exc: BaseException) -> str:
    # The frames of datalint's own loop say nothing about the sample; drop them.
    summary = traceback.TracebackException.from_exception(exc)
    summary.stack = traceback.StackSummary.from_list(
        [frame for frame in summary.stack if not frame.filename.startswith(_PACKAGE_DIR)]
    )
    return "".join(summary.format())


def _innermost_user_frame(frames: Iterable[traceback.FrameSummary]) -> str | None:
    located = [(frame.filename, frame.lineno, frame.name) for frame in reversed(list(frames))]
    return _pick_user_frame(located)


def _pick_user_frame(frames: list[tuple[str, Any, str]]) -> str | None:
    """`file:line in function` of the innermost frame in the user's own code: not datalint, not the
    standard library, not an installed package (unless nothing else is there)."""
    outside_datalint = [f for f in frames if not f[0].startswith(_PACKAGE_DIR) and not f[0].startswith("<")]
    for filename, line, name in outside_datalint:
        if not filename.startswith(_LIBRARY_DIRS):
            return f"{filename}:{line} in {name}"
    if outside_datalint:
        filename, line, name = outside_datalint[0]
        return f"{filename}:{line} in {name}"
    return None


_LIBRARY_DIRS = tuple(
    {
        str(Path(p).resolve())
        for key, p in sysconfig.get_paths().items()
        if key in ("stdlib", "purelib", "platlib")
    }
)


_DUMP_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+) in (?P<name>\S+)', re.MULTILINE)


def innermost_dumped_frame(dump: str) -> str | None:
    """The innermost user frame of a faulthandler dump (it lists the most recent call first)."""
    return _pick_user_frame([(m["file"], m["line"], m["name"]) for m in _DUMP_FRAME.finditer(dump)])


def _truncate(text: str, limit: int, keep: str = "head") -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + " ..." if keep == "head" else "... " + text[-limit:]


# ----------------------------------------------------------------------------------------------
# In-process (--workers 0): a plain loop, for debugging with pdb; isolates nothing


def _run_in_process(source: Any, todo: Iterable[int], stream: bool) -> Iterator[list[Row]]:
    batch: list[Row] = []
    last = time.monotonic()
    for row in _in_process_rows(source, todo, stream):
        row["worker"] = os.getpid()
        batch.append(row)
        if len(batch) >= 64 or time.monotonic() - last > 0.1:
            yield batch
            batch, last = [], time.monotonic()
    yield batch


def _in_process_rows(source: Any, todo: Iterable[int], stream: bool) -> Iterator[Row]:
    if not stream:
        for index in todo:
            yield measure_outcome(source, index, catch_interrupt=False)
        return
    for position, fetch in enumerate(source.stream()):
        row = _measure_next(fetch, position, catch_interrupt=False)
        if row is None:
            return
        yield row


# ----------------------------------------------------------------------------------------------
# The journal: one slot per worker in anonymous shared memory


@dataclass(frozen=True)
class JournalEntry:
    sequence: int  # samples started by this worker so far
    index: int  # the sample in flight, or -1 between samples
    started: float  # time.monotonic() when it started (CLOCK_MONOTONIC is system-wide on Linux)
    output_offset: int  # size of the worker's output file when it started


class Journal:
    RECORD = struct.Struct("<qqdq")

    def __init__(self, slots: int) -> None:
        self._map = mmap.mmap(-1, self.RECORD.size * max(1, slots))  # MAP_SHARED | MAP_ANONYMOUS

    def write(self, slot: int, sequence: int, index: int, started: float, output_offset: int) -> None:
        self.RECORD.pack_into(self._map, slot * self.RECORD.size, sequence, index, started, output_offset)

    def read(self, slot: int) -> JournalEntry:
        return JournalEntry(*self.RECORD.unpack_from(self._map, slot * self.RECORD.size))

    def clear(self, slot: int) -> None:
        self.write(slot, 0, -1, 0.0, 0)


# ----------------------------------------------------------------------------------------------
# Worker side


def _worker_main(
    source: Any, slot: int, journal: Journal, tasks: Connection, results: Connection, options: RunnerOptions
) -> None:
    sequence = 0
    fd_state: tuple[int, int | None] | None = None
    while True:
        try:
            message = tasks.recv()
        except EOFError:
            return
        if message is None:
            return
        _reset_load_truncated_images()
        batch: list[Row] = []
        flushed = time.monotonic()
        stream = message == "stream"
        positions = _stream_positions(source) if stream else ((i, None) for i in message)
        # A stream cannot hand out a lost sample again, so each row leaves as soon as it is measured.
        flush_rows = 1 if stream else options.flush_rows
        failures_in_a_row = 0
        for index, fetch in positions:
            sequence += 1
            journal.write(slot, sequence, index, time.monotonic(), os.lseek(1, 0, os.SEEK_CUR))
            if fetch is None:
                row = measure_outcome(source, index)
            else:
                stream_row = _measure_next(fetch, index)
                failures_in_a_row = (
                    failures_in_a_row + 1 if stream_row and stream_row["status"] != "ok" else 0
                )
                if stream_row is None or failures_in_a_row > MAX_STREAM_FAILURES:
                    break  # exhausted, or an iterator that only raises any more
                row = stream_row
            fd_state, row["fd_delta"] = _fd_delta(fd_state)
            batch.append(_encode_json_columns(row))
            if len(batch) >= flush_rows or time.monotonic() - flushed >= options.flush_interval:
                journal.write(
                    slot, sequence, -1, time.monotonic(), 0
                )  # a death while sending blames no sample
                results.send((batch, False))
                batch, flushed = [], time.monotonic()
        journal.write(slot, sequence, -1, time.monotonic(), 0)
        results.send((batch, True))


def _encode_json_columns(row: Row) -> Row:
    # JSON is made here, in parallel, so the single writer only binds strings.
    if "findings" in row:
        row["reported"] = row.pop("findings") or None
    for column in ("signature", "labels", "info", "reported"):
        value = row.get(column)
        if value is not None and not isinstance(value, str):
            row[column] = json.dumps(value, separators=(",", ":"), default=str)
    return row


def _stream_positions(source: Any) -> Iterator[tuple[int, Any]]:
    return enumerate(source.stream())


def _fd_delta(previous: tuple[int, int | None] | None) -> tuple[tuple[int, int | None], int | None]:
    """(new state, descriptors the last sample left open). State: (lowest free fd, open count).

    A descriptor left open takes the lowest free number, so the lowest free number rises; while
    it stays put (nearly always) nothing leaked and the exact count (a directory listing, ~15x
    dearer) is skipped. The count after one sample is the count before the next. The first sample
    of a worker is not judged: opening a handle lazily once per worker is fine.
    """
    probe = os.dup(1)
    os.close(probe)
    if previous is not None and previous[0] == probe:
        return previous, 0
    count = open_fd_count()
    if previous is None or count is None or previous[1] is None:
        return (probe, count), None
    return (probe, count), count - previous[1]


def _become_worker(parent_pid: int, output_fd: int) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the scanner's to handle; it stops us
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    _die_with_parent(parent_pid)
    _prefer_for_oom_killer()
    _no_core_files()
    # The sample's prints, warnings and native libraries' messages, and faulthandler's dumps, all go
    # to this worker's own file: the parent reads the part written during a sample that crashed.
    os.dup2(output_fd, 1)
    os.dup2(output_fd, 2)
    sys.stdout = open(1, "w", buffering=1, closefd=False, errors="backslashreplace")  # noqa: SIM115
    sys.stderr = open(2, "w", buffering=1, closefd=False, errors="backslashreplace")  # noqa: SIM115
    faulthandler.enable(file=2, all_threads=True)
    faulthandler.register(signal.SIGUSR1, file=2, all_threads=True)
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(1)  # as a DataLoader worker does: N workers must not each use all cores


def _reset_load_truncated_images() -> None:
    image_file: Any = sys.modules.get("PIL.ImageFile")
    if image_file is not None:
        image_file.LOAD_TRUNCATED_IMAGES = False


_PR_SET_PDEATHSIG = 1


def _die_with_parent(parent_pid: int) -> None:
    prctl = _prctl()
    if prctl is not None and prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) == 0:
        if os.getppid() != parent_pid:  # the parent died before prctl took effect
            os._exit(70)
        return

    def watch_parent() -> None:  # where prctl is missing (macOS): notice within half a second
        while os.getppid() == parent_pid:
            time.sleep(0.5)
        os._exit(70)

    threading.Thread(target=watch_parent, name="datalint-parent-watch", daemon=True).start()


_PRCTL: list[Any] = []


def _prctl() -> Any:
    if not _PRCTL:
        try:
            _PRCTL.append(ctypes.CDLL(None, use_errno=True).prctl)
        except (OSError, AttributeError):
            _PRCTL.append(None)
    return _PRCTL[0]


def _no_core_files() -> None:
    # A crashing sample is expected here; a core file per crash would litter the working directory.
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_CORE, (0, resource.getrlimit(resource.RLIMIT_CORE)[1]))


def _prefer_for_oom_killer() -> None:
    # Raising one's own oom_score_adj needs no privilege; the OOM killer then takes a worker (whose
    # sample becomes a "crash" row), not the scanner holding the index.
    with contextlib.suppress(OSError):
        Path("/proc/self/oom_score_adj").write_text("1000")


# ----------------------------------------------------------------------------------------------
# Parent side


@dataclass
class _Dump:
    """A hung sample whose stack was requested; SIGKILL follows unless it finishes first."""

    sequence: int
    index: int
    requested: float
    output_offset: int
    killed: bool = False


@dataclass
class _Worker:
    pid: int
    slot: int
    tasks: Connection
    results: Connection
    output: IO[bytes]
    outstanding: dict[int, None] = field(default_factory=dict)  # handed out, no row yet (ordered)
    chunks: int = 0  # chunks handed out and not finished
    dump: _Dump | None = None
    stopping: bool = False
    lost: bool = False  # a message to it failed: it is dead, and _collect buries it like any other death

    def close(self) -> None:
        for closable in (self.tasks, self.results, self.output):
            with contextlib.suppress(OSError):
                closable.close()


class _Pool:
    """Workers forked from this process; one dead worker is replaced alone."""

    def __init__(self, description: SourceDescription, options: RunnerOptions, stream: bool) -> None:
        self.description = description
        self.options = options
        self.stream = stream
        self.size = 1 if stream else max(1, options.workers)
        self.journal = Journal(self.size)
        self.workers: dict[int, _Worker] = {}  # by pid
        self.requeued: deque[int] = deque()
        self.chunk = options.chunk_size or 4
        self.mean_duration: float | None = None
        self.unattributed_deaths = 0
        self.remaining = 0

    # -- the loop

    def run(self, todo: Iterator[int], total: int) -> Iterator[list[Row]]:
        self.todo = todo
        self.remaining = total
        if total <= 0 and not self.stream:
            return
        try:
            for slot in range(min(self.size, max(1, total))):
                self._spawn(slot)
            if self.stream:
                self._start_stream()
            while self.workers:
                self._hand_out()
                rows = self._collect()
                rows.extend(self._watch())
                yield rows
        finally:
            self._shutdown()

    def _start_stream(self) -> None:
        worker = next(iter(self.workers.values()))
        if self._send(worker, "stream"):
            worker.chunks = 1

    def _hand_out(self) -> None:
        for worker in list(self.workers.values()):
            if worker.stopping or worker.lost:
                continue
            while worker.chunks < 2 and not self.stream:
                chunk = self._next_chunk()
                if not chunk:
                    break
                if not self._send(worker, chunk):
                    # Its chunk-mates go first to whichever worker asks next (a replacement included).
                    self.requeued.extendleft(reversed(chunk))
                    break
                worker.outstanding.update(dict.fromkeys(chunk))
                worker.chunks += 1
            if worker.chunks == 0 and not worker.lost:
                self._stop(worker)

    def _send(self, worker: _Worker, message: Any) -> bool:
        """Hand a worker a message; False when it has died since the last look (its pipe is broken).

        A worker can die (a segfault in its next sample) between `_collect` seeing it alive and this
        send. It is not buried here: rows it sent before dying may still wait in its results pipe, so
        `_collect` drains them and then buries it as usual, blaming the sample its journal names.
        """
        try:
            worker.tasks.send(message)
        except OSError:  # BrokenPipeError, ConnectionResetError: nobody reads its tasks any more
            worker.lost = True
            return False
        return True

    def _next_chunk(self) -> list[int]:
        size = self._chunk_size()
        chunk: list[int] = []
        while self.requeued and len(chunk) < size:
            chunk.append(self.requeued.popleft())
        for index in self.todo:
            chunk.append(index)
            if len(chunk) >= size:
                break
        return chunk

    def _chunk_size(self) -> int:
        if self.options.chunk_size:
            return self.options.chunk_size
        if self.mean_duration is not None:
            self.chunk = int(min(512, max(1, 0.05 / max(self.mean_duration, 1e-6))))
        # Near the end, small chunks keep every worker busy until the last sample.
        share = max(1, self.remaining // (4 * self.size))
        return max(1, min(self.chunk, share))

    def _collect(self) -> list[Row]:
        rows: list[Row] = []
        by_connection: dict[Any, _Worker] = {worker.results: worker for worker in self.workers.values()}
        for connection in wait(list(by_connection), timeout=0.1):
            worker = by_connection[connection]
            if not self._drain(worker, rows):
                rows.extend(self._bury(worker))
        for worker in list(self.workers.values()):  # a death the pipe did not show (a grandchild holds it)
            if worker.pid in self.workers and _exited(worker.pid):
                self._drain(worker, rows)
                rows.extend(self._bury(worker, reaped=True))
        return rows

    def _drain(self, worker: _Worker, rows: list[Row]) -> bool:
        """Read every message waiting from a worker; False once its pipe is closed (it died or left)."""
        try:
            while worker.results.poll(0):
                batch, finished = worker.results.recv()
                self._received(worker, batch, rows)
                if finished:
                    worker.chunks -= 1
        except (EOFError, OSError):
            return False
        return True

    def _received(self, worker: _Worker, batch: list[Row], rows: list[Row]) -> None:
        pid = worker.pid
        for row in batch:
            row["worker"] = pid
            worker.outstanding.pop(row["idx"], None)
            if row["status"] == "ok" and float(row.get("duration") or 0.0) > self.options.timeout:
                dump = worker.dump if worker.dump is not None and worker.dump.index == row["idx"] else None
                late_row(
                    row, self.options.timeout, _read_from(worker.output, dump.output_offset) if dump else ""
                )
            rows.append(row)
        self.remaining -= len(batch)
        if batch:
            mean = sum(float(row.get("duration") or 0.0) for row in batch) / len(batch)
            self.mean_duration = mean if self.mean_duration is None else 0.8 * self.mean_duration + 0.2 * mean

    # -- the watchdog

    def _watch(self) -> list[Row]:
        now = time.monotonic()
        for worker in list(self.workers.values()):
            entry = self.journal.read(worker.slot)
            dump = worker.dump
            if dump is None:
                if entry.index >= 0 and now - entry.started > self.options.timeout:
                    offset = os.fstat(worker.output.fileno()).st_size
                    worker.dump = _Dump(entry.sequence, entry.index, now, offset)
                    _signal(worker.pid, signal.SIGUSR1)  # faulthandler writes the hung stack
            elif not dump.killed and now - dump.requested >= self.options.dump_grace:
                if entry.sequence == dump.sequence and entry.index == dump.index:
                    dump.killed = True
                    _signal(worker.pid, signal.SIGKILL)
                else:
                    worker.dump = None  # it finished during the grace period: not a timeout
        return []

    # -- deaths

    def _bury(self, worker: _Worker, reaped: bool = False) -> list[Row]:
        """Turn a dead worker into at most one row (its sample in flight) and requeue the rest."""
        del self.workers[worker.pid]
        status = _reap(worker.pid) if not reaped else _REAPED.pop(worker.pid, 0)
        entry = self.journal.read(worker.slot)
        rows: list[Row] = []
        if worker.stopping and entry.index < 0 and not worker.outstanding:
            worker.close()
            return rows  # a normal exit after "stop"
        dump = worker.dump
        if dump is not None and dump.killed and entry.sequence == dump.sequence:
            rows.append(self._timeout_row(worker, dump))
        elif entry.index >= 0:
            rows.append(self._crash_row(worker, entry, status))
        else:
            self._unattributed_death(worker, status)
        worker.close()
        culprit = rows[0]["idx"] if rows else None
        self.remaining -= len(rows)
        if self.stream:
            return rows  # a stream cannot be resumed past the sample that killed it
        self.requeued.extend(index for index in worker.outstanding if index != culprit)
        if self.requeued or self.remaining > 0:
            self._spawn(worker.slot)
        return rows

    def _crash_row(self, worker: _Worker, entry: JournalEntry, status: int) -> Row:
        name = _status_name(status)
        text = _read_from(worker.output, entry.output_offset)
        cause = CRASH_CAUSES.get(name) or (
            f"the process exited with status {os.waitstatus_to_exitcode(status)} in the middle of the sample "
            "(os._exit(), or a C library calling exit())"
            if os.WIFEXITED(status)
            else f"killed by {name}"
        )
        where = innermost_dumped_frame(text)
        return {
            "idx": entry.index,
            "status": "crash",
            "duration": time.monotonic() - entry.started,
            "error_type": name,
            "error_message": cause,
            "traceback": _truncate(text, MAX_TEXT, keep="tail") or None,
            "worker": worker.pid,
            "info": {"where": where} if where else None,
        }

    def _timeout_row(self, worker: _Worker, dump: _Dump) -> Row:
        text = _read_from(worker.output, dump.output_offset)
        where = innermost_dumped_frame(text)
        message = f"no result within {self.options.timeout:g} s" + (f"; hung in {where}" if where else "")
        return {
            "idx": dump.index,
            "status": "timeout",
            "duration": self.options.timeout,
            "error_type": "Timeout",
            "error_message": message,
            "traceback": _truncate(text, MAX_TEXT, keep="tail") or None,
            "worker": worker.pid,
            "info": {"where": where} if where else None,
        }

    def _unattributed_death(self, worker: _Worker, status: int) -> None:
        self.unattributed_deaths += 1
        if self.unattributed_deaths > self.options.max_unattributed_deaths:
            output = _read_from(worker.output, 0)[-2000:]
            raise EngineError(
                f"scan workers keep dying outside any sample ({_status_name(status)}); last output:\n{output}"
            )

    # -- processes

    def _spawn(self, slot: int) -> None:
        tasks_reader, tasks_writer = Pipe(duplex=False)
        results_reader, results_writer = Pipe(duplex=False)
        output = tempfile.TemporaryFile(prefix="datalint-worker-")  # noqa: SIM115 (closed by _Worker.close)
        self.journal.clear(slot)
        source = build_source(self.description)
        prctl = _prctl()  # looked up before forking, so the child does not pay for it
        parent_pid = os.getpid()
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        try:
            pid = os.fork()
        except OSError as exc:
            raise EngineError(f"cannot start a scan worker: {exc}") from exc
        if pid == 0:  # the worker
            code = 0
            try:
                for other in self.workers.values():
                    other.close()
                tasks_writer.close()
                results_reader.close()
                del prctl
                _become_worker(parent_pid, output.fileno())
                _worker_main(source, slot, self.journal, tasks_reader, results_writer, self.options)
            except BaseException:  # the last resort of a worker: say why, with a status the parent sees
                code = 70
                with contextlib.suppress(BaseException):
                    traceback.print_exc()
                    sys.stderr.flush()
            finally:
                os._exit(code)
        tasks_reader.close()
        results_writer.close()
        self.workers[pid] = _Worker(pid, slot, tasks_writer, results_reader, output)

    def _stop(self, worker: _Worker) -> None:
        worker.stopping = True
        with contextlib.suppress(OSError):
            worker.tasks.send(None)

    def _shutdown(self) -> None:
        # Normal end: workers were told to stop and exit by themselves. Any other end (an error, Ctrl-C,
        # the caller abandoning the generator): kill them now, never leave one behind.
        for worker in list(self.workers.values()):
            _signal(worker.pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(worker.pid, 0)
            worker.close()
        self.workers.clear()


_REAPED: dict[int, int] = {}


def _exited(pid: int) -> bool:
    try:
        reaped, status = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return True
    if reaped == 0:
        return False
    _REAPED[pid] = status
    return True


def _reap(pid: int) -> int:
    try:
        return os.waitpid(pid, 0)[1]
    except ChildProcessError:
        return _REAPED.pop(pid, 0)


def _signal(pid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signum)


def _status_name(status: int) -> str:
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        try:
            return signal.Signals(number).name
        except ValueError:
            return f"SIGNAL({number})"
    return f"EXIT({os.waitstatus_to_exitcode(status)})"


def _read_from(output: IO[bytes], offset: int) -> str:
    try:
        size = os.fstat(output.fileno()).st_size
        start = max(offset, size - 4 * MAX_TEXT)  # the tail is what explains a crash
        data = os.pread(output.fileno(), size - start, start)
    except (OSError, ValueError):
        return ""
    return data.decode("utf-8", "backslashreplace").strip()
