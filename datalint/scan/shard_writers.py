"""Per-shard index files, each written by the process that measured its shard (docs/distributed.md).

One SQLite writer needs ~14 h for 1e9 rows. With `--shard-index on` (or `auto` on a large sharded
source) the scanner writes no sample row of a shard itself:

* Each shard of a `--webdataset` or `--parquet` source is measured by one shard writer: on the
  local engine a process forked from the scanner, on dask the dask task. The writer runs the local
  engine over its shard with one forked child that measures the samples (the writer is that
  child's watchdog, as a dask worker is), and writes the rows into
  `<index>.shards/.<first>-<last>.db.<pid>.part`: one writer per file, never two. Once complete
  the file is fsynced and renamed to `<first>-<last>.db`, and only counts go back to the scanner.
* Each writer also keeps its file's population summary inside the file (datalint/scan/summaries.py).
  The scanner merges the finished files into the index at the end (`merge_shard_indexes`) and
  their summaries into one (a tree reduce; on dask, on the cluster), which the index keeps. The
  findings come from it (datalint/scan/summary_findings.py: limits from the summary, the rows
  judged part by part): they equal a single-writer scan's, without reading the index whole.
* Resume is per shard. A scan killed at any moment leaves finished files, which the next scan
  merges before it plans (so their samples are not measured again), and `.part` files, which it
  discards (their samples are measured again).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import sqlite3
import traceback
import warnings
from collections import Counter, deque
from collections.abc import Generator, Iterable, Iterator, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection, Pipe, wait
from pathlib import Path
from typing import Any

from datalint.errors import UsageError
from datalint.index import read, store
from datalint.index.shards import KEEP_RUN_IDS, merge_shard_indexes
from datalint.scan import runner, summaries
from datalint.scan.progress import outcome
from datalint.scan.runner import EngineError, RunnerOptions
from datalint.scan.shards import SHARDED_KINDS, split_by_shard
from datalint.scan.sources import ScanWarning, SourceDescription, build_source

MODES = ("auto", "on", "off")
# `auto` writes shard files from this many samples to measure on (and at least two shards): below
# it one writer keeps up with any scan this machine runs (benchmarks/README.md, "LAION scale").
AUTO_FROM_SAMPLES = 1_000_000
AUTO_FROM_SHARDS = 2
MAX_ATTEMPTS = 2  # a shard whose writer process dies is written again once, then the scan stops
FINISHED_SUFFIX = ".db"
PART_SUFFIX = ".part"


def folder_of(index_path: str | Path) -> Path:
    """Where the shard files of an index are written: `<index>.shards/` beside it."""
    path = Path(index_path)
    return path.with_name(path.name + ".shards")


def check_mode(mode: str, description: SourceDescription, workers: int) -> None:
    """Usage errors of `--shard-index`, before the index is touched."""
    if mode not in MODES:
        raise UsageError(f"unknown --shard-index {mode!r}; choose one of: {', '.join(MODES)}")
    if mode != "on":
        return
    if description.kind not in SHARDED_KINDS:
        raise UsageError(
            f"--shard-index on writes one index file per shard of a --webdataset or --parquet source; "
            f"{description.spec} has no shards: use --shard-index auto or off"
        )
    if workers == 0:
        raise UsageError(
            "--shard-index on needs worker processes to write the shard files; it cannot be combined "
            "with --workers 0"
        )


def wanted(mode: str, description: SourceDescription, workers: int, samples: int, shards: int) -> bool:
    """Whether a scan of `samples` samples in `shards` shards writes shard files (the `auto` rule)."""
    if mode == "off" or workers == 0 or description.kind not in SHARDED_KINDS:
        return False
    return mode == "on" or (samples >= AUTO_FROM_SAMPLES and shards >= AUTO_FROM_SHARDS)


@dataclass(frozen=True)
class ShardFile:
    """A shard file a writer finished: where it is, its rows' outcomes and their measuring time."""

    path: str
    samples: int
    outcomes: dict[str, int]
    seconds: float  # the sum of the samples' durations


def file_name(indices: Sequence[int]) -> str:
    return f"{indices[0]:012d}-{indices[-1]:012d}{FINISHED_SUFFIX}"


def part_name(indices: Sequence[int], pid: int) -> str:
    return f".{file_name(indices)}.{pid}{PART_SUFFIX}"


# ----------------------------------------------------------------------------------------------
# The writer: one shard through the local engine, into one new file


def write_shard(
    description: SourceDescription,
    indices: Sequence[int],
    options: RunnerOptions,
    folder: str | Path,
    run_id: int,
) -> ShardFile:
    """Measure `indices` (all in one shard) with the local engine and write their rows into one new
    shard file; it appears under its final name only once complete."""
    source = build_source(description)
    final = Path(folder) / file_name(indices)
    part = final.with_name(part_name(indices, os.getpid()))
    outcomes: Counter[str] = Counter()
    samples, seconds = 0, 0.0
    counter = summaries.Summarizer()  # the file's population summary, counted as its rows are written
    db = store.open_shard_file(part)
    try:
        for rows in runner.run(description, list(indices), len(indices), options):
            if not rows:
                continue
            stamp = store.utc_now()
            for row in rows:
                if "key" not in row:  # rows the engine made itself (a crash, a timeout) are keyed here
                    row["key"] = source.key(row["idx"])
                row["measured_at"] = stamp
                row["run_id"] = run_id
                outcomes[outcome(row)] += 1
                seconds += float(row.get("duration") or 0.0)
            values = [store.sample_values(row) for row in rows]
            store.write_samples(db, values)
            counter.add_values(values)
            samples += len(rows)
        summaries.write_summary(db.conn, _checked(counter, db.conn))
        db.conn.close()
        # SQLite wrote the part through its connection, so there are no bytes to hand to
        # `files.write_atomically`: the same steps (fsync, rename, fsync the folder) by hand
        _fsync(part)
        os.replace(part, final)
        _fsync(final.parent)
    except BaseException:
        db.conn.close()
        with contextlib.suppress(OSError):
            part.unlink()
        raise
    return ShardFile(str(final), samples, dict(outcomes), seconds)


def _checked(counter: summaries.Summarizer, connection: Any) -> summaries.PopulationSummary:
    """The counted summary, or, where a sample's row was written twice (replaced), the file's own."""
    rows = store.count_samples(connection)
    return counter.summary() if rows == counter.samples else summaries.summarize(connection)


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# ----------------------------------------------------------------------------------------------
# The scanner's side: recover what a killed scan left, merge at the end


@dataclass(frozen=True)
class MergedFiles:
    """Shard files merged into the index: how many, their samples, and their merged summary."""

    files: int = 0
    samples: int = 0
    summary: summaries.PopulationSummary = dataclasses.field(default_factory=summaries.PopulationSummary)


@dataclass(frozen=True)
class FilesSummary:
    """The merged summary of some finished shard files, reduced where they were written (dask)."""

    paths: frozenset[str]
    summary: summaries.PopulationSummary


def recover(index_path: str | Path, *, rescan: bool) -> MergedFiles:
    """Before a scan plans: merge the finished shard files a killed scan left and discard its
    half-written ones. A `--rescan` discards them all."""
    folder = folder_of(index_path)
    if not folder.is_dir():
        return MergedFiles()
    discard_parts(folder)
    if rescan:
        for path in finished_files(folder):
            path.unlink()
        with contextlib.suppress(OSError):
            folder.rmdir()
        return MergedFiles()
    for path in finished_files(folder):
        if not _readable(path):  # finished, then damaged (a power loss before the disk had it all)
            path.unlink()  # its samples are measured again, as a half-written file's are
    # A merge cut short may have copied some of them already: the same rows are replaced, not refused.
    return merge_finished(index_path, run_id=KEEP_RUN_IDS, replace=True)


def _readable(path: Path) -> bool:
    try:
        with contextlib.closing(read.connect(path)) as db:
            store.count_samples(db)
            return bool(db.execute("PRAGMA user_version").fetchone()[0] == store.SCHEMA_VERSION)
    except sqlite3.DatabaseError:
        return False


def merge_finished(
    index_path: str | Path, *, run_id: int, replace: bool = False, known: FilesSummary | None = None
) -> MergedFiles:
    """Merge every finished shard file into the index, then remove them and the parts of writers
    that died (the scan is over: nobody writes them any more).

    A row of another run already in the index for one of their samples (the training guard's) is
    replaced, as the single writer replaces it. The files' summaries are merged too: `known` is
    the summary of some of them reduced already; the others' are read from the files here (or
    computed from their rows where a file has none). The index keeps the result added to the
    summary it kept (`summaries.keep_in_index`): an interrupted scan resumed, or a later command,
    judges from it while it covers every row."""
    folder = folder_of(index_path)
    files = finished_files(folder)
    samples = 0
    summary = summaries.PopulationSummary()
    if files:
        summary = _summary_of(files, known)
        was_empty = summaries.is_empty(index_path)
        samples = merge_shard_indexes(
            index_path, files, run_id=run_id, replace=replace, supersede=True
        ).samples
        summaries.keep_in_index(index_path, summary, was_empty=was_empty)
    for path in files:  # only now: a scan killed during the merge merges them again (replace=True)
        path.unlink()
    if folder.is_dir():
        discard_parts(folder)
        with contextlib.suppress(OSError):
            folder.rmdir()
    return MergedFiles(len(files), samples, summary)


def _summary_of(files: Sequence[Path], known: FilesSummary | None) -> summaries.PopulationSummary:
    names = {path.name for path in files}
    covered = {Path(path).name for path in known.paths} if known is not None else set()
    if known is None or not covered <= names:  # it names a file that is gone: read them all here
        return summaries.merge_all([summaries.summary_of_file(path) for path in files])
    rest = [summaries.summary_of_file(path) for path in files if path.name not in covered]
    return summaries.merge_all([known.summary, *rest])


def finished_files(folder: Path) -> list[Path]:
    if not folder.is_dir():
        return []
    names = (path for path in folder.iterdir() if not path.name.startswith("."))
    return sorted(path for path in names if path.name.endswith(FINISHED_SUFFIX))


def discard_parts(folder: Path) -> None:
    for path in folder.glob(f".*{PART_SUFFIX}"):
        with contextlib.suppress(OSError):
            path.unlink()


def forget_file(folder: str | Path, indices: Sequence[int]) -> None:
    """A writer that died may have finished its file just before: it is written again, not twice."""
    with contextlib.suppress(OSError):
        (Path(folder) / file_name(indices)).unlink()


# ----------------------------------------------------------------------------------------------
# The local engine: shard writer processes forked from the scanner


def run_local(
    description: SourceDescription,
    todo: Iterable[int],
    options: RunnerOptions,
    folder: Path,
    run_id: int,
    shard_starts: Sequence[int],
) -> Generator[list[ShardFile], None, None]:
    """Measure `todo` with `options.workers` shard writers at a time, one whole shard each, yielding
    the finished files as they come (an empty list at least every ~0.1 s)."""
    pool = _WriterPool(description, options, folder, run_id)
    yield from pool.run(split_by_shard(todo, shard_starts))


@dataclass
class _Writer:
    pid: int
    results: Connection
    indices: list[int]
    attempt: int

    def describe(self) -> str:
        return f"samples {self.indices[0]}..{self.indices[-1]}"


class _WriterPool:
    def __init__(self, description: SourceDescription, options: RunnerOptions, folder: Path, run_id: int):
        self.description = description
        self.shard_options = dataclasses.replace(options, workers=1)  # one measuring child per writer
        self.size = max(1, options.workers)
        self.folder = folder
        self.run_id = run_id
        self.writers: dict[int, _Writer] = {}  # by pid
        self.again: deque[tuple[list[int], int]] = deque()  # (indices, attempt) of writers that died

    def run(self, shards: Iterator[list[int]]) -> Iterator[list[ShardFile]]:
        try:
            while True:
                self._start(shards)
                if not self.writers:
                    return
                yield self._collect()
        finally:
            self._stop_all()

    def _start(self, shards: Iterator[list[int]]) -> None:
        while len(self.writers) < self.size:
            if self.again:
                indices, attempt = self.again.popleft()
            else:
                indices, attempt = next(shards, []), 0
                if not indices:
                    return
            self._fork(indices, attempt)

    def _fork(self, indices: list[int], attempt: int) -> None:
        reader, sender = Pipe(duplex=False)
        parent = os.getpid()
        pid = runner.fork_flushed("a shard writer")
        if pid == 0:
            code = 0
            try:
                reader.close()
                for other in self.writers.values():
                    other.results.close()
                _become_writer(parent)
                done = write_shard(self.description, indices, self.shard_options, self.folder, self.run_id)
                sender.send(("done", done))
            except BaseException as exc:  # the writer's last resort: the scanner hears why
                code = 70
                with contextlib.suppress(BaseException):
                    sender.send(("failed", f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}"))
            finally:
                os._exit(code)
        sender.close()
        self.writers[pid] = _Writer(pid, reader, indices, attempt)

    def _collect(self) -> list[ShardFile]:
        by_connection: dict[Any, _Writer] = {writer.results: writer for writer in self.writers.values()}
        done: list[ShardFile] = []
        for ready in wait(list(by_connection), timeout=0.1):
            writer = by_connection[ready]
            connection = writer.results
            message: Any = None
            with contextlib.suppress(EOFError, OSError):
                message = connection.recv()
            del self.writers[writer.pid]
            connection.close()
            status = runner.reap(writer.pid)
            if message is None:
                self._died(writer, status)
            elif message[0] == "failed":
                raise EngineError(
                    f"the process writing the shard file of {writer.describe()} failed: {message[1]}"
                )
            else:
                done.append(message[1])
        return done

    def _died(self, writer: _Writer, status: int) -> None:
        with contextlib.suppress(OSError):
            (self.folder / part_name(writer.indices, writer.pid)).unlink()
        forget_file(self.folder, writer.indices)
        name = runner.status_name(status)
        if writer.attempt + 1 >= MAX_ATTEMPTS:
            raise EngineError(
                f"the process writing the shard file of {writer.describe()} died {MAX_ATTEMPTS} times "
                f"(last: {name}; {runner.crash_cause(status)}); the shards finished so far are kept: "
                "run the same command again to resume, or scan with --shard-index off"
            )
        warnings.warn(
            f"the process writing the shard file of {writer.describe()} died ({name}); writing it again",
            ScanWarning,
            stacklevel=2,
        )
        self.again.append((writer.indices, writer.attempt + 1))

    def _stop_all(self) -> None:
        # A normal end has no writer left; any other (an error, Ctrl-C) stops them and drops their parts.
        for writer in list(self.writers.values()):
            runner.send_signal(writer.pid, signal.SIGKILL)
            runner.reap(writer.pid)
            writer.results.close()
            with contextlib.suppress(OSError):
                (self.folder / part_name(writer.indices, writer.pid)).unlink()
        self.writers.clear()


def _become_writer(parent: int) -> None:
    # Ctrl-C is the scanner's to handle (it stops the writers); a writer dies with the scanner, and
    # its measuring child with it (each forked process dies with its parent).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    runner.die_with_parent(parent)
