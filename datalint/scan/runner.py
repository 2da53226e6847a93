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
* Each worker runs under a keeper process (its parent, in its own process group) that ignores the
  signals a sample might send its parent and leaves with the worker's exit status; the scanner
  kills a dead worker's whole group, so what a sample started does not outlive it.
* Workers die with the scanner (PR_SET_PDEATHSIG, or a watcher thread where that is missing), raise
  their own oom_score_adj so the OOM killer picks a worker, and ignore SIGINT (Ctrl-C stops the
  scanner, which stops them).
"""

from __future__ import annotations

import _thread
import contextlib
import ctypes
import faulthandler
import json
import mmap
import os
import re
import resource
import select
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
from datalint.scan.shards import shard_of, shard_starts_of, split_by_shard
from datalint.scan.sources import SourceDescription, build_source
from datalint.text import safe_str

Row = dict[str, Any]

# Bound once: a sample that replaces time.monotonic or time.perf_counter (a patched clock, a test
# double left in place) must not change how the engine times every later sample.
_monotonic = time.monotonic
_perf_counter = time.perf_counter
_time = time.time

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
        yield from _Pool(description, options, stream, shard_starts_of(source)).run(iter(todo), total)


# ----------------------------------------------------------------------------------------------
# One sample -> one row (runs in a worker, or in-process with --workers 0)


def measure_outcome(source: Any, index: int, *, catch_interrupt: bool = True) -> Row:
    """Row for one sample: its probe results, or the error it raised (any BaseException)."""
    started = _perf_counter()
    try:
        result = source.measure(index)
    except KeyboardInterrupt as exc:
        if not catch_interrupt:
            raise
        return error_row(index, exc, _perf_counter() - started)
    except BaseException as exc:  # isolation boundary: the sample's own failure, SystemExit included
        return error_row(index, exc, _perf_counter() - started)
    row = {"idx": index, "status": "ok", **result}
    row.setdefault("duration", _perf_counter() - started)
    return row


def _measure_next(fetch: Any, index: int, *, catch_interrupt: bool = True) -> Row | None:
    """Like measure_outcome for the next sample of a stream; None when the stream is exhausted."""
    started = _perf_counter()
    try:
        result = fetch()
    except StopIteration:
        return None
    except KeyboardInterrupt as exc:
        if not catch_interrupt:
            raise
        return error_row(index, exc, _perf_counter() - started)
    except BaseException as exc:  # isolation boundary, as above
        return error_row(index, exc, _perf_counter() - started)
    row = {"idx": index, "status": "ok", **result}
    row.setdefault("duration", _perf_counter() - started)
    return row


def error_row(index: int, exc: BaseException, duration: float) -> Row:
    where = _innermost_user_frame(traceback.extract_tb(exc.__traceback__))
    return {
        "idx": index,
        "status": "error",
        "duration": duration,
        "error_type": _exception_name(exc),
        "error_message": _truncate(safe_str(exc), MAX_MESSAGE),  # a sample's __str__ may raise too
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
    last = _monotonic()
    for row in _in_process_rows(source, todo, stream):
        row["worker"] = os.getpid()
        batch.append(row)
        if len(batch) >= 64 or _monotonic() - last > 0.1:
            yield batch
            batch, last = [], _monotonic()
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
    started: float  # _monotonic() when it started (CLOCK_MONOTONIC is system-wide on Linux)
    output_offset: int  # size of the worker's output file when it started
    suspect: int = -1  # a sample that started a thread still running in this worker, or -1
    cause: int = 0  # CAUSE_*: what the worker found wrong after the sample, when it left for that reason


CAUSE_CHANNELS = 1  # the sample closed or replaced the descriptors the worker talks to the scanner on


class Journal:
    RECORD = struct.Struct("<qqdqqq")

    PID = struct.Struct("<q")

    def __init__(self, slots: int) -> None:
        self.slots = max(1, slots)
        # MAP_SHARED | MAP_ANONYMOUS: one record per slot, then one pid per slot (the worker's, written
        # by its keeper once; the records are the worker's own).
        self._map = mmap.mmap(-1, (self.RECORD.size + self.PID.size) * self.slots)

    def set_pid(self, slot: int, pid: int) -> None:
        self.PID.pack_into(self._map, self.RECORD.size * self.slots + slot * self.PID.size, pid)

    def pid(self, slot: int) -> int:
        return int(self.PID.unpack_from(self._map, self.RECORD.size * self.slots + slot * self.PID.size)[0])

    def write(
        self,
        slot: int,
        sequence: int,
        index: int,
        started: float,
        output_offset: int,
        suspect: int = -1,
        cause: int = 0,
    ) -> None:
        self.RECORD.pack_into(
            self._map, slot * self.RECORD.size, sequence, index, started, output_offset, suspect, cause
        )

    def read(self, slot: int) -> JournalEntry:
        return JournalEntry(*self.RECORD.unpack_from(self._map, slot * self.RECORD.size))

    def clear(self, slot: int) -> None:
        self.write(slot, 0, -1, 0.0, 0)
        self.set_pid(slot, 0)


# ----------------------------------------------------------------------------------------------
# Worker side


def _worker_main(
    source: Any, slot: int, journal: Journal, tasks: Connection, results: Connection, options: RunnerOptions
) -> None:
    os.register_at_fork(after_in_child=_note_forked)
    channels = _Channels((tasks.fileno(), results.fileno(), 1, 2))
    threads = _LingeringThreads()
    children = _StrayChildren()
    state = _ProcessState()
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
        flushed = _monotonic()
        stream = message == "stream"
        positions = _stream_positions(source) if stream else ((i, None) for i in message)
        # A stream cannot hand out a lost sample again, so each row leaves as soon as it is measured.
        flush_rows = 1 if stream else options.flush_rows
        failures_in_a_row = 0
        for index, fetch in positions:
            sequence += 1
            started, offset = _monotonic(), _output_offset()
            journal.write(slot, sequence, index, started, offset, threads.suspect)
            if fetch is None:
                row = measure_outcome(source, index)
                row["key"] = _key_of(source, index)  # user code too: measured under the same watch
            else:
                stream_row = _measure_next(fetch, index)
                failures_in_a_row = (
                    failures_in_a_row + 1 if stream_row and stream_row["status"] != "ok" else 0
                )
                if stream_row is None or failures_in_a_row > MAX_STREAM_FAILURES:
                    _leave_if_a_copy()
                    break  # exhausted, or an iterator that only raises any more
                row = stream_row
            _leave_if_a_copy()
            if not channels.open():
                # Nothing can reach the scanner any more; the journal says which sample did it.
                journal.write(slot, sequence, index, started, offset, threads.suspect, CAUSE_CHANNELS)
                os._exit(EXIT_CHANNELS)
            threads.after(index)
            side_effects = [*state.restore(), *children.after()]
            if side_effects:
                found = {"kind": "side_effect", "detail": "; ".join(side_effects)}
                row["findings"] = [*(row.get("findings") or ()), found]
            row["started"] = started
            fd_state, row["fd_delta"] = _fd_delta(fd_state)
            batch.append(_encode_json_columns(row))
            if len(batch) >= flush_rows or _monotonic() - flushed >= options.flush_interval:
                if not channels.intact():  # closed and reopened on another file: this sample, most likely
                    journal.write(slot, sequence, index, started, offset, threads.suspect, CAUSE_CHANNELS)
                    os._exit(EXIT_CHANNELS)
                # a death while sending blames no sample (but a thread's suspect stays named)
                journal.write(slot, sequence, -1, _monotonic(), 0, threads.suspect)
                results.send((batch, False))
                batch, flushed = [], _monotonic()
        journal.write(slot, sequence, -1, _monotonic(), 0, threads.suspect)
        results.send((batch, True))


EXIT_CHANNELS = 75  # the worker left because a sample closed or replaced its channels
OUTPUT_LIMIT = 1 << 20  # bytes of a worker's output kept between samples (a crash needs the last ones)


def leave_if_forked(worker_pid: int) -> None:
    # A sample that forks and returns in both processes hands its copy back to this loop; the copy
    # would read the worker's tasks and answer on its pipe. It leaves at once, touching nothing.
    if _FORKED or os.getpid() != worker_pid:
        os._exit(0)


# Set in a process os.fork() made from a worker: the check after each sample is a list read, where a
# getpid() would be a system call. leave_if_forked also compares pids (forks made outside Python).
_FORKED: list[bool] = []


def _note_forked() -> None:
    _FORKED.append(True)


def _leave_if_a_copy() -> None:
    if _FORKED:
        os._exit(0)


def _key_of(source: Any, index: int) -> str | None:
    try:
        return source.key(index)
    except BaseException:  # a key the dataset cannot give (even SystemExit) is no reason to stop
        return None


def _output_offset() -> int:
    """Where this sample's output starts; the file is emptied first once it has grown past the limit."""
    offset = os.lseek(1, 0, os.SEEK_CUR)
    if offset <= OUTPUT_LIMIT:
        return offset
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os.ftruncate(1, 0)  # fds 1 and 2 share one open file: one offset, one size
    os.lseek(1, 0, os.SEEK_SET)
    return 0


class _Channels:
    """The descriptors a worker needs: its two pipes and its output (stdout, stderr).

    A sample that closes descriptors it does not own (`os.closerange(3, 4096)`) leaves the worker
    unable to report. One poll() after each sample (about a microsecond) sees a closed one; before
    each send, fstat also catches one closed and reopened on another file. Either way the loss is
    that sample's crash, not a silent death.
    """

    def __init__(self, fds: tuple[int, ...]) -> None:
        self.fds = fds
        self.identities = tuple(self._identity(fd) for fd in fds)
        self.poller = select.poll()
        for fd in fds:
            self.poller.register(fd, 0)  # no events asked for: only POLLNVAL (closed) and errors come back

    @staticmethod
    def _identity(fd: int) -> tuple[int, int] | None:
        try:
            info = os.fstat(fd)
        except OSError:
            return None
        return info.st_dev, info.st_ino

    def open(self) -> bool:
        return not any(events & select.POLLNVAL for _, events in self.poller.poll(0))

    def intact(self) -> bool:
        return self.open() and all(
            self._identity(fd) == known for fd, known in zip(self.fds, self.identities, strict=True)
        )


class _LingeringThreads:
    """The sample that left a Python thread running in this worker (it may kill the worker later).

    `_thread._count()` is a read of one counter. While a thread some sample started is alive, that
    sample stays the suspect the journal names, so a later death is not simply pinned on whichever
    sample happened to be in flight.
    """

    def __init__(self) -> None:
        self.baseline = _thread_count()
        self.suspect = -1

    def after(self, index: int) -> None:
        count = _thread_count()
        if count <= self.baseline:
            self.suspect = -1
        elif self.suspect < 0:
            self.suspect = index


class _ProcessState:
    """What a sample can change in its worker that would make later, innocent samples fail there:
    the working directory, sys.stdout / sys.stderr (replaced or closed), a pending alarm (SIGALRM
    would kill the worker in some later sample). Put back after each sample, for about 2 us."""

    def __init__(self) -> None:
        self.cwd = _cwd()
        self.stdout, self.stderr = sys.stdout, sys.stderr

    def restore(self) -> list[str]:
        restored = []
        if self.cwd is not None and _cwd() != self.cwd:
            with contextlib.suppress(OSError):
                os.chdir(self.cwd)
                restored.append(f"changed the working directory (put back to {self.cwd})")
        if (
            sys.stdout is not self.stdout
            or sys.stderr is not self.stderr
            or self.stdout.closed
            or self.stderr.closed
        ):
            if self.stdout.closed or self.stderr.closed:
                self.stdout, self.stderr = _worker_streams()
            sys.stdout, sys.stderr = self.stdout, self.stderr
            restored.append("replaced or closed sys.stdout / sys.stderr (put back)")
        if signal.getitimer(signal.ITIMER_REAL)[0]:
            signal.setitimer(signal.ITIMER_REAL, 0)
            restored.append("left an alarm pending (cancelled)")
        if (
            time.monotonic is not _monotonic
            or time.perf_counter is not _perf_counter
            or time.time is not _time
        ):
            time.monotonic, time.perf_counter, time.time = _monotonic, _perf_counter, _time
            restored.append("replaced time.monotonic, time.perf_counter or time.time (put back)")
        return restored


def _cwd() -> str | None:
    try:
        return os.getcwd()
    except OSError:
        return None


def _worker_streams() -> tuple[Any, Any]:
    return (
        open(1, "w", buffering=1, closefd=False, errors="backslashreplace"),
        open(2, "w", buffering=1, closefd=False, errors="backslashreplace"),
    )


class _StrayChildren:
    """Processes a sample started (fork, subprocess) and left behind: running, or exited unreaped.

    One waitid() per sample answers "no children" in the common case; only then is /proc read to
    name them. Exited ones are reaped here; running ones end with the worker's process group.
    """

    def __init__(self) -> None:
        self.known: set[int] = set()

    def after(self) -> list[str]:
        try:
            os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            self.known.clear()
            return []
        described = []
        for pid in _child_pids():
            if pid in self.known:
                continue
            exited = _reap_if_exited(pid)
            if not exited:
                self.known.add(pid)
            described.append(f"pid {pid} ({'exited, never waited for' if exited else _command_of(pid)})")
        if not described:
            return []
        return [f"left {len(described)} child process(es) behind: {', '.join(described)}"]


def _child_pids() -> list[int]:
    pids: list[int] = []
    try:
        for task in os.listdir("/proc/self/task"):
            with open(f"/proc/self/task/{task}/children") as children:
                pids.extend(int(pid) for pid in children.read().split())
    except OSError:
        return pids
    return pids


def _reap_if_exited(pid: int) -> bool:
    try:
        return os.waitpid(pid, os.WNOHANG)[0] == pid
    except ChildProcessError:
        return True


def _command_of(pid: int) -> str:
    try:
        words = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return "running"
    command = " ".join(word.decode("utf-8", "backslashreplace") for word in words if word)[:120]
    return f"running: {command}" if command else "running"


def _thread_count() -> int:
    counter = getattr(_thread, "_count", None)
    return int(counter()) if counter is not None else threading.active_count()


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


def become_worker(parent_pid: int, output_fd: int, own_group: bool = True) -> None:
    # Its own process group: a sample signalling its group (`os.killpg(0, SIGTERM)`) reaches only its
    # worker and what that worker started, never the scanner, and the scanner can end the whole tree.
    if own_group:
        with contextlib.suppress(OSError):
            os.setpgid(0, 0)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the scanner's to handle; it stops us
    for default in _KEEPER_IGNORES[1:]:  # a keeper ignores them; a worker dies of them as any process
        signal.signal(default, signal.SIG_DFL)
    die_with_parent(parent_pid)
    _no_stdin()
    _prefer_for_oom_killer()
    _no_core_files()
    # The sample's prints, warnings and native libraries' messages, and faulthandler's dumps, all go
    # to this worker's own file: the parent reads the part written during a sample that crashed.
    os.dup2(output_fd, 1)
    os.dup2(output_fd, 2)
    sys.stdout, sys.stderr = _worker_streams()
    faulthandler.enable(file=2, all_threads=True)
    faulthandler.register(signal.SIGUSR1, file=2, all_threads=True)
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(1)  # as a DataLoader worker does: N workers must not each use all cores


# Signals a worker's keeper ignores: a sample that signals its parent (`os.kill(os.getppid(), ...)`)
# reaches the keeper, never the scanner. SIGKILL cannot be ignored: the keeper then dies, its worker
# with it (PR_SET_PDEATHSIG), and the scanner reads the journal as for any other death.
_KEEPER_IGNORES = (
    signal.SIGINT,
    signal.SIGTERM,
    signal.SIGHUP,
    signal.SIGUSR2,
    signal.SIGALRM,
    signal.SIGQUIT,
)


def _keep(worker: int) -> int:
    """Wait for the worker; the exit code to leave with, after dying of the worker's signal if it had one."""
    status = os.waitpid(worker, 0)[1]
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        with contextlib.suppress(OSError, ValueError):  # SIGKILL and SIGSTOP keep their default anyway
            signal.signal(number, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {number})
        os.kill(os.getpid(), number)  # the scanner reads the same status as from the worker itself
        return 128 + number
    return os.waitstatus_to_exitcode(status)


def _reset_load_truncated_images() -> None:
    image_file: Any = sys.modules.get("PIL.ImageFile")
    if image_file is not None:
        image_file.LOAD_TRUNCATED_IMAGES = False


_PR_SET_PDEATHSIG = 1


def fork_flushed(what: str) -> int:
    """`os.fork()` once this process's buffered output is written (else the child would write it
    again); a fork the system refuses is an EngineError naming `what` was being started."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    try:
        return os.fork()
    except OSError as exc:
        raise EngineError(f"cannot start {what}: {exc}") from exc


def die_with_parent(parent_pid: int) -> None:
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


def _no_stdin() -> None:
    # A sample that reads stdin gets end-of-file: a worker outside the terminal's foreground group
    # reading the terminal would be stopped (SIGTTIN) and look hung.
    with contextlib.suppress(OSError):
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)


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

# Two looks of the watchdog are ~0.1 s apart; a gap longer than this means the scanner itself was not
# running (SIGSTOP, Ctrl-Z, a suspended VM or job). Time in such a gap is no sample's time.
STALL_GAP = 1.0
HANGUP_GRACE = 1.0  # seconds a worker whose pipe closed between samples gets to exit by itself
MAX_REMEASURE = 2  # a sample whose timeout a pause may have caused is measured again at most this often


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
    hung_up: float | None = None  # when its results pipe closed while the process lived on
    punched: int = 0  # leading bytes of its output file already handed back to the file system
    stopped: tuple[int, int] | None = None  # (sequence, index) of a sample it was seen stopped in

    def close(self) -> None:
        for closable in (self.tasks, self.results, self.output):
            with contextlib.suppress(OSError):
                closable.close()


@dataclass(frozen=True)
class _Suspicion:
    """A worker died in sample `interrupted` while a thread that sample `suspect` started was running.

    The interrupted sample is measured again alone: if it passes, the death is the suspect's.
    """

    suspect: int
    interrupted: int
    status: int
    text: str
    worker: int
    suspect_had_row: bool  # the suspect's own (ok) row had already arrived


class _Pool:
    """Workers forked from this process; one dead worker is replaced alone."""

    def __init__(
        self,
        description: SourceDescription,
        options: RunnerOptions,
        stream: bool,
        shard_starts: tuple[int, ...] | None = None,
    ) -> None:
        self.description = description
        self.shard_starts = shard_starts  # a sharded source: whole shards are the unit of work
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
        self.last_look = _monotonic()
        self.stalls: list[tuple[float, float]] = []  # (from, to) on CLOCK_MONOTONIC: the scanner was stopped
        self.remeasured: dict[int, int] = {}
        self.suspicions: dict[int, _Suspicion] = {}  # by the interrupted sample

    # -- the loop

    def run(self, todo: Iterator[int], total: int) -> Iterator[list[Row]]:
        self.todo = todo
        self.by_shard = split_by_shard(todo, self.shard_starts) if self.shard_starts else None
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
            if worker.stopping or worker.lost or worker.hung_up is not None:
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
        if self.by_shard is not None:
            return self._next_shard_chunk()
        size = self._chunk_size()
        chunk: list[int] = []
        while self.requeued and len(chunk) < size:
            chunk.append(self.requeued.popleft())
        for index in self.todo:
            chunk.append(index)
            if len(chunk) >= size:
                break
        return chunk

    def _next_shard_chunk(self) -> list[int]:
        """A dead worker's samples first (only those of its shard), else the next whole shard."""
        assert self.by_shard is not None and self.shard_starts is not None
        if self.requeued:
            shard = shard_of(self.shard_starts, self.requeued[0])
            chunk: list[int] = []
            while self.requeued and shard_of(self.shard_starts, self.requeued[0]) == shard:
                chunk.append(self.requeued.popleft())
            return chunk
        return next(self.by_shard, [])

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
        by_connection: dict[Any, _Worker] = {w.results: w for w in self.workers.values() if w.hung_up is None}
        ready = wait(list(by_connection), timeout=0.1)
        self._look()  # before judging any row: a stop of this scanner shows as a gap here
        for connection in ready:
            worker = by_connection[connection]
            if not self._drain(worker, rows):
                worker.hung_up = _monotonic()
        now = _monotonic()
        for worker in list(self.workers.values()):
            if _exited(worker.pid):  # also a death the pipe did not show (a grandchild holds it)
                if worker.hung_up is None:
                    self._drain(worker, rows)
                rows.extend(self._bury(worker))
            elif (
                worker.hung_up is not None
                and now - worker.hung_up > HANGUP_GRACE
                and self.journal.read(worker.slot).index < 0
            ):
                send_signal(
                    self._worker_pid(worker), signal.SIGKILL
                )  # no channel left and no sample running: it cannot go on
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
        pid = self._worker_pid(worker)
        kept: list[Row] = []
        for row in batch:
            started = row.pop("started", None)
            row["worker"] = pid
            index = row["idx"]
            worker.outstanding.pop(index, None)
            if row["status"] == "ok" and float(row.get("duration") or 0.0) > self.options.timeout:
                if self._paused_during(worker, row, started):
                    self.requeued.append(index)  # a pause, not a slow sample: measure it again
                    continue
                dump = worker.dump if worker.dump is not None and worker.dump.index == index else None
                late_row(
                    row, self.options.timeout, read_output(worker.output, dump.output_offset) if dump else ""
                )
            kept.append(row)
        self.remaining -= len(kept)
        rows.extend(kept)
        rows.extend(self._settle_suspicions(kept))
        if kept:
            mean = sum(float(row.get("duration") or 0.0) for row in kept) / len(kept)
            self.mean_duration = mean if self.mean_duration is None else 0.8 * self.mean_duration + 0.2 * mean

    # -- pauses

    def _look(self) -> None:
        now = _monotonic()
        if now - self.last_look > STALL_GAP:
            self.stalls.append((self.last_look, now))
            del self.stalls[:-256]
        self.last_look = now

    def _stalled(self, start: float, end: float) -> float:
        """Seconds of [start, end] during which this scanner was not running."""
        return sum(max(0.0, min(end, to) - max(start, since)) for since, to in self.stalls)

    def _paused_during(self, worker: _Worker, row: Row, started: float | None) -> bool:
        """Whether a late sample's time includes a pause of the scan (then it is measured again)."""
        index = row["idx"]
        if self.stream or self.remeasured.get(index, 0) >= MAX_REMEASURE:
            return False
        seen_stopped = worker.stopped is not None and worker.stopped[1] == index
        duration = float(row.get("duration") or 0.0)
        if not seen_stopped and (started is None or self._stalled(started, started + duration) <= 0.0):
            return False
        self.remeasured[index] = self.remeasured.get(index, 0) + 1
        return True

    # -- the watchdog

    def _watch(self) -> list[Row]:
        self._look()
        now = _monotonic()
        for worker in list(self.workers.values()):
            self._bound_output(worker)
            entry = self.journal.read(worker.slot)
            dump = worker.dump
            if dump is None:
                if entry.index >= 0 and self._overdue(worker, entry, now):
                    offset = os.fstat(worker.output.fileno()).st_size
                    worker.dump = _Dump(entry.sequence, entry.index, now, offset)
                    send_signal(
                        self._worker_pid(worker), signal.SIGUSR1
                    )  # faulthandler writes the hung stack
            elif not dump.killed and now - dump.requested >= self.options.dump_grace:
                if entry.sequence == dump.sequence and entry.index == dump.index:
                    dump.killed = True
                    send_signal(self._worker_pid(worker), signal.SIGKILL)
                else:
                    worker.dump = None  # it finished during the grace period: not a timeout
        return []

    def _overdue(self, worker: _Worker, entry: JournalEntry, now: float) -> bool:
        """Past the timeout, not counting time this scanner or this worker was stopped."""
        if now - entry.started <= self.options.timeout:
            return False
        if now - entry.started - self._stalled(entry.started, now) <= self.options.timeout:
            return False
        if _is_stopped(self._worker_pid(worker)):
            # Stopped on its own (SIGSTOP, a debugger): a pause, not a hang. Its clock starts again
            # when it runs again, and a result that then comes late is measured once more.
            worker.stopped = (entry.sequence, entry.index)
            self.stalls.append((entry.started, now))
            return False
        return True

    def _bound_output(self, worker: _Worker) -> None:
        """Hand back to the file system all but the last OUTPUT_LIMIT bytes of a sample that prints
        without end (the worker itself empties the file between samples)."""
        try:
            size = os.fstat(worker.output.fileno()).st_size
        except (OSError, ValueError):
            return
        if size < worker.punched:
            worker.punched = 0  # the worker emptied it
        if size - worker.punched > 2 * OUTPUT_LIMIT:
            upto = (size - OUTPUT_LIMIT) // 4096 * 4096
            if _punch_hole(worker.output.fileno(), worker.punched, upto - worker.punched):
                worker.punched = upto

    # -- deaths

    def _bury(self, worker: _Worker) -> list[Row]:
        """Turn a dead worker into at most one row (its sample in flight) and requeue the rest."""
        del self.workers[worker.pid]
        end_group(worker.pid)  # what its samples started dies with it; a zombie keeps the group id
        status = reap(worker.pid)
        entry = self.journal.read(worker.slot)
        rows: list[Row] = []
        held: set[int] = set()
        clean_exit = os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
        if (
            worker.stopping
            and entry.index < 0
            and not worker.outstanding
            and (clean_exit or entry.suspect < 0)
        ):
            worker.close()
            return rows  # a normal exit after "stop"
        dump = worker.dump
        if dump is not None and dump.killed and entry.sequence == dump.sequence:
            rows.append(self._timeout_row(worker, dump))
        elif entry.suspect >= 0 and entry.suspect != entry.index and not self.stream:
            rows.extend(self._suspect_death(worker, entry, status, held))
        elif entry.index >= 0:
            rows.append(self._crash_row(worker, entry, status))
        elif self.stream:
            rows.append(self._stream_end_row(worker, entry, status))
        else:
            self._unattributed_death(worker, status)
        worker.close()
        culprits = {row["idx"] for row in rows} | held
        self.remaining -= sum(
            1 for row in rows if row["idx"] in worker.outstanding or row["idx"] == entry.index
        )
        if self.stream:
            return rows  # a stream cannot be resumed past the sample that killed it
        self.requeued.extend(index for index in worker.outstanding if index not in culprits)
        rows.extend(self._settle_suspicions(rows))
        if self.requeued or self.remaining > 0:
            self._spawn(worker.slot)
        return rows

    def _suspect_death(self, worker: _Worker, entry: JournalEntry, status: int, held: set[int]) -> list[Row]:
        """A death while a thread an earlier sample started was running: whose is it?"""
        text = read_output(worker.output, 0)
        had_row = entry.suspect not in worker.outstanding
        if entry.index < 0:  # between samples: nothing else can have done it
            return [self._thread_row(self._worker_pid(worker), entry.suspect, status, text, interrupted=None)]
        held.add(entry.suspect)
        self.suspicions[entry.index] = _Suspicion(
            entry.suspect, entry.index, status, text, self._worker_pid(worker), suspect_had_row=had_row
        )
        return []  # the interrupted sample goes back in the queue and is measured again

    def _settle_suspicions(self, rows: list[Row]) -> list[Row]:
        settled: list[Row] = []
        for row in rows:
            suspicion = self.suspicions.pop(row["idx"], None)
            if suspicion is None:
                continue
            if row["status"] == "ok":  # the interrupted sample is fine alone: the death was the thread's
                settled.append(
                    self._thread_row(
                        suspicion.worker,
                        suspicion.suspect,
                        suspicion.status,
                        suspicion.text,
                        interrupted=suspicion.interrupted,
                    )
                )
                if not suspicion.suspect_had_row:
                    self.remaining -= 1
            elif not suspicion.suspect_had_row:
                self.requeued.append(suspicion.suspect)  # the interrupted sample fails alone: its own fault
        return settled

    def _thread_row(self, pid: int, suspect: int, status: int, text: str, interrupted: int | None) -> Row:
        name = status_name(status)
        when = (
            f"during sample {interrupted}, which passed when measured again in a fresh worker"
            if interrupted is not None
            else "between samples"
        )
        where = innermost_dumped_frame(text)
        return {
            "idx": suspect,
            "status": "crash",
            "duration": None,
            "error_type": name,
            "error_message": f"{crash_cause(status)}; uncertain: the worker died {when}, while a thread "
            "this sample started was still running",
            "traceback": _truncate(text, MAX_TEXT, keep="tail") or None,
            "worker": pid,
            "info": {"uncertain": True, "interrupted": interrupted, **({"where": where} if where else {})},
        }

    def _crash_row(self, worker: _Worker, entry: JournalEntry, status: int) -> Row:
        name = status_name(status)
        text = read_output(worker.output, entry.output_offset)
        cause = crash_cause(status)
        if entry.cause == CAUSE_CHANNELS:
            name = "ClosedChannels"
            cause = (
                "the sample closed or replaced file descriptors its worker needs (the pipes to the scanner, "
                "stdout or stderr), e.g. with os.closerange(); a sample may close only what it opened"
            )
        where = innermost_dumped_frame(text)
        return {
            "idx": entry.index,
            "status": "crash",
            "duration": _monotonic() - entry.started,
            "error_type": name,
            "error_message": cause,
            "traceback": _truncate(text, MAX_TEXT, keep="tail") or None,
            "worker": self._worker_pid(worker),
            "info": {"where": where} if where else None,
        }

    def _stream_end_row(self, worker: _Worker, entry: JournalEntry, status: int) -> Row:
        # The worker died between two positions: the stream cannot go on, and a row says where it ended.
        text = read_output(worker.output, 0)
        suspect = (
            f"; position {entry.suspect} started a thread that was still running"
            if entry.suspect >= 0
            else ""
        )
        return {
            "idx": entry.sequence,
            "status": "crash",
            "duration": None,
            "error_type": status_name(status),
            "error_message": f"{crash_cause(status)}; the stream's worker died between positions, so the "
            f"stream ends here{suspect}",
            "traceback": _truncate(text, MAX_TEXT, keep="tail") or None,
            "worker": self._worker_pid(worker),
            "info": {"uncertain": True},
        }

    def _timeout_row(self, worker: _Worker, dump: _Dump) -> Row:
        text = read_output(worker.output, dump.output_offset)
        where = innermost_dumped_frame(text)
        message = f"no result within {self.options.timeout:g} s" + (f"; hung in {where}" if where else "")
        return {
            "idx": dump.index,
            "status": "timeout",
            "duration": self.options.timeout,
            "error_type": "Timeout",
            "error_message": message,
            "traceback": _truncate(text, MAX_TEXT, keep="tail") or None,
            "worker": self._worker_pid(worker),
            "info": {"where": where} if where else None,
        }

    def _unattributed_death(self, worker: _Worker, status: int) -> None:
        self.unattributed_deaths += 1
        if self.unattributed_deaths > self.options.max_unattributed_deaths:
            output = read_output(worker.output, 0)[-2000:]
            raise EngineError(
                f"scan workers keep dying outside any sample ({status_name(status)}); last output:\n{output}"
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
        pid = fork_flushed("a scan worker")
        if pid == 0:  # the keeper: the worker's parent, waiting for it, so a sample never signals the scanner
            code = 70
            try:
                for other in self.workers.values():
                    other.close()
                tasks_writer.close()
                results_reader.close()
                del prctl
                with contextlib.suppress(OSError):
                    os.setpgid(0, 0)
                for ignored in _KEEPER_IGNORES:
                    signal.signal(ignored, signal.SIG_IGN)
                die_with_parent(parent_pid)
                _no_core_files()
                _prefer_for_oom_killer()  # the OOM killer takes a keeper or its worker, never the scanner
                keeper = os.getpid()
                worker = os.fork()
                if worker == 0:
                    self._work(keeper, slot, source, output, tasks_reader, results_writer)
                self.journal.set_pid(slot, worker)
                for end in (tasks_reader, results_writer, output):
                    end.close()  # the pipes' ends are the worker's alone: its death closes them
                code = _keep(worker)
            except BaseException:  # the keeper's last resort: a status the scanner sees
                code = 70
            finally:
                os._exit(code)
        with contextlib.suppress(OSError):
            os.setpgid(pid, pid)  # also here, so no signal to its group can come before the child's own call
        tasks_reader.close()
        results_writer.close()
        self.workers[pid] = _Worker(pid, slot, tasks_writer, results_reader, output)

    def _work(
        self, keeper: int, slot: int, source: Any, output: IO[bytes], tasks: Connection, results: Connection
    ) -> None:
        code = 0
        try:
            become_worker(keeper, output.fileno(), own_group=False)
            _worker_main(source, slot, self.journal, tasks, results, self.options)
        except BaseException:  # the last resort of a worker: say why, with a status the parent sees
            code = 70
            with contextlib.suppress(BaseException):
                traceback.print_exc()
                sys.stderr.flush()
        finally:
            os._exit(code)

    def _worker_pid(self, worker: _Worker) -> int:
        """The pid of the process running the samples (its keeper's until the keeper has written it)."""
        return self.journal.pid(worker.slot) or worker.pid

    def _stop(self, worker: _Worker) -> None:
        worker.stopping = True
        with contextlib.suppress(OSError):
            worker.tasks.send(None)

    def _shutdown(self) -> None:
        # Normal end: workers were told to stop and exit by themselves. Any other end (an error, Ctrl-C,
        # the caller abandoning the generator): kill them and what they started now, never leave one behind.
        for worker in list(self.workers.values()):
            end_group(worker.pid)
            send_signal(worker.pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(worker.pid, 0)
            worker.close()
        self.workers.clear()


def _exited(pid: int) -> bool:
    """Whether a worker has exited, without reaping it: until it is reaped its process group id cannot
    be reused, so its group can still be ended safely."""
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


def reap(pid: int) -> int:
    try:
        return os.waitpid(pid, 0)[1]
    except ChildProcessError:
        return 0


def end_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def _is_stopped(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_bytes().rpartition(b")")[2].split()[0]
    except (OSError, IndexError):
        return False
    return state in (b"T", b"t")


def send_signal(pid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signum)


def status_name(status: int) -> str:
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        try:
            return signal.Signals(number).name
        except ValueError:
            return f"SIGNAL({number})"
    return f"EXIT({os.waitstatus_to_exitcode(status)})"


def crash_cause(status: int) -> str:
    name = status_name(status)
    known = CRASH_CAUSES.get(name)
    if known:
        return known
    if os.WIFEXITED(status):
        return (
            f"the process exited with status {os.waitstatus_to_exitcode(status)} in the middle of the sample "
            "(os._exit(), or a C library calling exit())"
        )
    return f"killed by {name}"


_FALLOCATE: list[Any] = []
_PUNCH_HOLE = 0x02 | 0x01  # FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE (Linux): offsets stay valid


def _punch_hole(fd: int, offset: int, length: int) -> bool:
    if not _FALLOCATE:
        try:
            function = ctypes.CDLL(None, use_errno=True).fallocate
            function.argtypes = (ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64)
            _FALLOCATE.append(function)
        except (OSError, AttributeError):
            _FALLOCATE.append(None)
    function = _FALLOCATE[0]
    return function is not None and length > 0 and function(fd, _PUNCH_HOLE, offset, length) == 0


def read_output(output: IO[bytes], offset: int) -> str:
    try:
        size = os.fstat(output.fileno()).st_size
        start = max(offset, size - 4 * MAX_TEXT)  # the tail is what explains a crash
        data = os.pread(output.fileno(), size - start, start)
    except (OSError, ValueError):
        return ""
    return data.replace(b"\0", b"").decode("utf-8", "backslashreplace").strip()
