"""`--backend dask`: the same scan, its shards run on a dask cluster (docs/distributed.md).

* Shards of indices go out through `distributed.Client.submit` and come back through
  `as_completed`, dask's native API: joblib's dask backend waits forever once a worker dies, and
  its ray backend cannot stream results.
* On the dask worker, a shard runs the local engine (`runner.run`) with one forked child: the
  child measures the samples and the dask worker is its watchdog (journal, stack dump, SIGKILL),
  the in-worker watchdog a parent on another machine cannot be. A sample that segfaults, aborts,
  is OOM-killed or hangs therefore becomes the same row as with `--backend local`, and the dask
  worker itself lives on.
* A dask worker that dies anyway (killed, its node preempted, a sample killing its parent) fails
  its shards with `KilledWorker`. A failed shard becomes a suspect: suspects run alone on the
  cluster, one at a time; one that dies alone is halved, and a single sample that dies alone is
  named (`crash`, `KilledWorker`). Innocent shards that shared the dead worker come back whole.
  The cluster the scan starts has `allowed-failures` 0, so the scheduler reports the first death
  instead of trying a poisoned shard on four workers.
* Rows come back per shard; the scanning process stays the only writer of the index. With shard
  files (`--shard-index`, datalint/scan/shard_writers.py) the task writes its shard's rows into a
  file of its own instead and only counts come back; the scanner merges the files at the end.

Only the standard library is imported here at module level: `distributed` is an optional extra.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import logging
import threading
import time
import uuid
import warnings
from collections import deque
from collections.abc import Generator, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from datalint.errors import UsageError
from datalint.scan import runner, shard_writers, summaries
from datalint.scan.runner import EngineError, Row, RunnerOptions
from datalint.scan.shards import SHARDED_KINDS, shard_starts_of, split_by_shard
from datalint.scan.sources import ScanWarning, SourceDescription, build_source

BACKENDS = ("local", "dask")
INSTALL_HINT = "pip install 'torch-datalint[dask]'  (or: pip install 'dask[distributed]')"
CONNECT_TIMEOUT = 30.0  # seconds to reach a scheduler
WORKERS_TIMEOUT = 120.0  # seconds to wait for --workers N workers to join a scheduler
SHARD_SECONDS = 2.0  # work per shard once sample durations are known: dispatch stays negligible
FIRST_SHARD = 16  # samples per shard until then
MAX_SHARD = 10_000
CAPACITY_REFRESH = 2.0  # seconds between asking the scheduler how many threads it has
MAX_NAMED_DEATHS = 10  # samples named for killing their dask worker before the scan gives up


def check_options(backend: str, scheduler: str | None, workers: int | None) -> None:
    """Usage errors in the choice of backend, before anything is opened or started."""
    if backend not in BACKENDS:
        raise UsageError(f"unknown backend {backend!r}; choose one of: {', '.join(BACKENDS)}")
    if scheduler is not None and backend != "dask":
        raise UsageError("--scheduler ADDRESS runs the scan on a dask cluster: add --backend dask")
    if backend == "dask" and workers == 0:
        raise UsageError(
            "--workers 0 measures samples in this process; it cannot be combined with --backend dask"
        )


def check_source(description: SourceDescription, stream: bool) -> None:
    """What cannot travel to a cluster, said before the index is touched; also checks dask is there."""
    if description.option("object_id") is not None:
        raise UsageError(
            "a dataset object cannot travel to a dask cluster: pass a spec string instead "
            "(e.g. 'mymod:ds'), which every worker imports for itself"
        )
    if stream:
        raise UsageError(
            f"{description.spec} is an IterableDataset: it is read in order by one worker, so it "
            "cannot be split across a cluster; scan it with --backend local"
        )
    _import_distributed()


def _import_distributed() -> Any:
    try:
        import distributed
    except ImportError as exc:
        raise UsageError(
            f"--backend dask needs dask.distributed, which cannot be imported ({exc}): {INSTALL_HINT}"
        ) from None
    return distributed


# ----------------------------------------------------------------------------------------------
# Parent side: connect, dispatch shards, settle what comes back


def run(
    description: SourceDescription,
    todo: Iterable[int],
    total: int,
    options: RunnerOptions,
    *,
    scheduler: str | None,
    workers: int,
    length: int,
    shard_folder: str | None = None,
    run_id: int | None = None,
) -> Generator[list[Any], None, None]:
    """Measure `todo` on a dask cluster, yielding rows as shards finish (an empty batch at least every
    0.1 s). Without `scheduler`, a LocalCluster of `workers` processes is started and stopped here.

    With `shard_folder` (a folder every worker can write), each task writes its rows into a shard
    file of `run_id` there and the batches hold `shard_writers.ShardFile`s, plus the rows the
    scanner makes itself (a sample that killed its dask worker)."""
    if total <= 0:
        return
    # A sharded source is listed here once (headers or footers only) to learn where its shards begin.
    starts = shard_starts_of(build_source(description)) if description.kind in SHARDED_KINDS else None
    with _connect(scheduler, workers) as client:
        dispatcher = _Dispatcher(client, description, options, length, starts)
        if shard_folder is not None:
            assert run_id is not None
            dispatcher.write_files(shard_folder, run_id)
        yield from dispatcher.run(iter(todo), total)
        if dispatcher.files:
            reduced = reduce_summaries(client, dispatcher.files)
            if reduced is not None:
                yield [reduced]


def reduce_summaries(client: Any, paths: list[str]) -> shard_writers.FilesSummary | None:
    """The population summaries of the shard files the tasks wrote, read and merged on the cluster
    pairwise, level by level (a tree reduce): one summary comes back, not one per shard. None when
    the cluster could not (the scanner then reads the files itself)."""
    try:
        level = client.map(summaries.summary_of_file, paths, pure=False)
        while len(level) > 1:
            level = [
                client.submit(summaries.merge_pair, *level[n : n + 2], pure=False)
                for n in range(0, len(level), 2)
            ]
        return shard_writers.FilesSummary(frozenset(paths), level[0].result())
    except Exception as exc:  # the cluster's boundary: any failure there costs only this shortcut
        _warn(f"the shard files' summaries could not be merged on the cluster ({exc}); merging them here")
        return None


@contextlib.contextmanager
def _connect(scheduler: str | None, workers: int) -> Iterator[Any]:
    distributed = _import_distributed()
    if scheduler is None:
        with local_cluster(workers) as cluster, distributed.Client(cluster) as client:
            yield client
        return
    try:
        client = distributed.Client(scheduler, timeout=CONNECT_TIMEOUT)
    except (OSError, TimeoutError, ValueError) as exc:
        raise UsageError(
            f"cannot reach the dask scheduler at {scheduler} ({exc}): check the address "
            "(e.g. tcp://10.0.0.5:8786) and that the scheduler is running"
        ) from None
    with client:
        try:
            client.wait_for_workers(max(1, workers), timeout=WORKERS_TIMEOUT)
        except (OSError, TimeoutError) as exc:
            raise UsageError(
                f"fewer than {max(1, workers)} dask worker(s) joined the scheduler at {scheduler} within "
                f"{WORKERS_TIMEOUT:g} s ({exc}): start workers (dask worker {scheduler}), or lower --workers"
            ) from None
        yield client


@contextlib.contextmanager
def local_cluster(workers: int) -> Iterator[Any]:
    """A LocalCluster of `workers` single-threaded processes, set up as a scan needs it (and as
    docs/distributed.md advises for an existing cluster); closed, workers and all, on exit."""
    import dask

    distributed = _import_distributed()
    # The scheduler reads allowed-failures when it starts: 0 reports a dead worker's shards at once
    # (we decide what to run again), where the default 3 would kill four workers per poisoned shard.
    with dask.config.set({"distributed.scheduler.allowed-failures": 0}):
        try:
            cluster = distributed.LocalCluster(
                n_workers=workers,
                threads_per_worker=1,
                processes=True,
                dashboard_address=None,
                silence_logs=logging.CRITICAL,  # worker deaths are reported by the scan, not logged
            )
        except Exception as exc:  # isolation boundary: whatever stops a local cluster from starting
            raise EngineError(
                f"cannot start a local dask cluster of {workers} worker(s): {exc}. Its workers are new "
                "interpreters that import the main module: a script that scans through the Python API "
                'must do so under `if __name__ == "__main__":`'
            ) from exc
    with cluster:
        yield cluster


@dataclass(frozen=True)
class Shard:
    """Indices measured by one dask task. A suspect's last run ended with its worker's death."""

    indices: tuple[int, ...]
    suspect: bool = False

    def describe(self) -> str:
        if len(self.indices) == 1:
            return f"sample {self.indices[0]}"
        return f"{len(self.indices)} samples ({self.indices[0]}..{self.indices[-1]})"

    def halves(self) -> tuple[Shard, Shard]:
        middle = len(self.indices) // 2
        return Shard(self.indices[:middle], True), Shard(self.indices[middle:], True)


class _Dispatcher:
    """Keeps the cluster busy with shards; turns each finished task into rows."""

    def __init__(
        self,
        client: Any,
        description: SourceDescription,
        options: RunnerOptions,
        length: int,
        shard_starts: tuple[int, ...] | None = None,
    ):
        from distributed import as_completed
        from distributed.scheduler import KilledWorker

        from datalint import __version__

        self.client = client
        self.killed_worker = KilledWorker
        self.description = description
        self.shard_options = dataclasses.replace(options, workers=1)  # one child per dask thread
        self.length = length
        self.version = __version__
        # Its own client's loop: the process may hold other clients (the user's), any of them the default.
        self.completed = as_completed(loop=client.loop, with_results=True, raise_errors=False)
        self.in_flight: dict[str, tuple[Any, Shard]] = {}  # task key -> (future, shard)
        self.suspects: deque[Shard] = deque()
        self.run_id = uuid.uuid4().hex[:8]
        self.submitted = 0
        self.mean_duration: float | None = None
        self.remaining = 0
        self.capacity = 0
        self.capacity_at = float("-inf")
        self.named_deaths = 0
        self.shard_starts = shard_starts  # a sharded source: one task per whole shard
        self.shard_folder: str | None = None  # set by write_files: tasks write shard files there
        self.files: list[str] = []  # the shard files the tasks finished
        self.index_run = 0

    def write_files(self, folder: str, run_id: int) -> None:
        """Tasks write their rows into shard files in `folder` (credited to `run_id`), not back here."""
        self.shard_folder, self.index_run = folder, run_id

    def run(self, todo: Iterator[int], total: int) -> Iterator[list[Any]]:
        self.todo = todo
        self.by_shard = split_by_shard(todo, self.shard_starts) if self.shard_starts else None
        self.remaining = total
        try:
            last_yield = time.monotonic()
            while True:
                self._submit()
                if not self.in_flight:
                    return
                finished = self.completed.next_batch(block=False)
                if not finished:
                    time.sleep(0.02)
                    if time.monotonic() - last_yield >= 0.1:
                        last_yield = time.monotonic()
                        yield []
                    continue
                rows: list[Any] = []
                for future, result in finished:
                    rows.extend(self._settle(future, result))
                last_yield = time.monotonic()
                yield rows
        finally:
            self._cancel()

    # -- handing out

    def _submit(self) -> None:
        if self.suspects or any(shard.suspect for _, shard in self.in_flight.values()):
            # A suspect runs alone, so that its worker's death can only be its own doing.
            if self.suspects and not self.in_flight:
                self._send(self.suspects.popleft())
            return
        while len(self.in_flight) < self._capacity():
            shard = self._next_shard()
            if shard is None:
                return
            self._send(shard)

    def _send(self, shard: Shard) -> None:
        self.submitted += 1
        key = f"datalint-shard-{self.run_id}-{self.submitted}"
        task: tuple[Any, ...] = (scan_shard,)
        if self.shard_folder is not None:
            task = (write_shard_file, self.shard_folder, self.index_run)
        future = self.client.submit(
            task[0],
            self.description,
            list(shard.indices),
            self.shard_options,
            self.length,
            self.version,
            *task[1:],
            key=key,
            pure=False,
        )
        self.in_flight[key] = (future, shard)
        self.completed.add(future)

    def _next_shard(self) -> Shard | None:
        if self.by_shard is not None:  # the source's own shards: a task never crosses two files
            whole = next(self.by_shard, None)
            return Shard(tuple(whole)) if whole else None
        indices = tuple(itertools.islice(self.todo, self._shard_size()))
        return Shard(indices) if indices else None

    def _shard_size(self) -> int:
        if self.shard_options.chunk_size:
            return self.shard_options.chunk_size
        size = FIRST_SHARD
        if self.mean_duration is not None:
            size = int(min(MAX_SHARD, max(1, SHARD_SECONDS / max(self.mean_duration, 1e-6))))
        # Near the end, smaller shards keep every worker busy until the last sample.
        return max(1, min(size, self.remaining // (2 * self._capacity())))

    def _capacity(self) -> int:
        """Shards in flight: two per worker thread, so a thread never waits for the next one."""
        now = time.monotonic()
        if now - self.capacity_at >= CAPACITY_REFRESH:
            self.capacity = max(2, 2 * sum(self.client.nthreads().values()))
            self.capacity_at = now
        return self.capacity

    # -- settling

    def _settle(self, future: Any, result: Any) -> list[Any]:
        _, shard = self.in_flight.pop(future.key)
        if future.status == "finished" and isinstance(result, shard_writers.ShardFile):
            self._learn_file(result)
            self.files.append(result.path)
            return [result]
        if future.status == "finished":
            rows: list[Row] = result
            self._learn(rows)
            return rows
        if future.status == "error":
            exception = result[1]
            if isinstance(exception, self.killed_worker):
                return self._died(shard, getattr(exception, "last_worker", None))
            raise EngineError(
                f"a dask task failed outside any sample, on {shard.describe()} of {self.description.spec}: "
                f"{type(exception).__name__}: {exception}. Every worker needs datalint {self.version} and "
                "the dataset's code installed, and the files the spec names at the same paths"
            )
        if self.client.status != "running":
            raise EngineError(
                "lost the connection to the dask scheduler; the samples measured so far are in the "
                "index: run the same command again to resume"
            )
        return self._died(shard, None)  # cancelled behind our back (a cluster restart): run it again

    def _learn(self, rows: list[Row]) -> None:
        self.remaining -= len(rows)
        durations = [float(row.get("duration") or 0.0) for row in rows]
        if durations:
            mean = sum(durations) / len(durations)
            self.mean_duration = mean if self.mean_duration is None else 0.7 * self.mean_duration + 0.3 * mean

    def _learn_file(self, done: shard_writers.ShardFile) -> None:
        self.remaining -= done.samples
        if done.samples:
            mean = done.seconds / done.samples
            self.mean_duration = mean if self.mean_duration is None else 0.7 * self.mean_duration + 0.3 * mean

    def _died(self, shard: Shard, worker: Any) -> list[Row]:
        where = getattr(worker, "address", None) or "a dask worker"
        if self.shard_folder is not None:  # a file it finished just before dying is written again
            shard_writers.forget_file(self.shard_folder, shard.indices)
        if not shard.suspect:
            _warn(f"{where} died while measuring {shard.describe()}; running them again, alone")
            self.suspects.append(dataclasses.replace(shard, suspect=True))
            return []
        if len(shard.indices) > 1:
            _warn(f"{where} died again, running {shard.describe()} alone; halving them to find the sample")
            self.suspects.extend(shard.halves())
            return []
        self.named_deaths += 1
        if self.named_deaths > MAX_NAMED_DEATHS:
            raise EngineError(
                f"dask workers keep dying ({self.named_deaths} samples each killed their worker while "
                "running alone): the workers themselves are failing, not the samples; see the workers' "
                "logs. The rows measured so far are in the index: run the same command again to resume"
            )
        self.remaining -= 1
        return [killed_worker_row(shard.indices[0], where)]

    def _cancel(self) -> None:
        futures = [future for future, _ in self.in_flight.values()]
        self.in_flight.clear()
        if futures and self.client.status == "running":
            with contextlib.suppress(Exception):  # a scheduler already gone has nothing left to cancel
                self.client.cancel(futures)


def killed_worker_row(index: int, worker: str) -> Row:
    return {
        "idx": index,
        "status": "crash",
        "duration": None,
        "error_type": "KilledWorker",
        "error_message": (
            f"the dask worker ({worker}) died while measuring this sample alone on the cluster: the "
            "sample kills the worker process itself, not only the child that measures it (or the "
            "worker was killed from outside at that moment; see its log)"
        ),
        "traceback": None,
        "worker": None,
        "info": None,
    }


def _warn(message: str) -> None:
    warnings.warn(message, ScanWarning, stacklevel=3)


# ----------------------------------------------------------------------------------------------
# Worker side: one shard through the local engine


def scan_shard(
    description: SourceDescription, indices: list[int], options: RunnerOptions, length: int, version: str
) -> list[Row]:
    """Runs on a dask worker: the local engine over one shard, with one forked child per task."""
    _check_worker(description, length, version)
    rows: list[Row] = []
    for batch in runner.run(description, indices, len(indices), options):
        rows.extend(batch)
    return rows


def write_shard_file(
    description: SourceDescription,
    indices: list[int],
    options: RunnerOptions,
    length: int,
    version: str,
    folder: str,
    run_id: int,
) -> shard_writers.ShardFile:
    """Runs on a dask worker: one shard through the local engine, its rows into a shard file that
    this task alone writes; only the counts travel back."""
    _check_worker(description, length, version)
    return shard_writers.write_shard(description, indices, options, folder, run_id)


def _check_worker(description: SourceDescription, length: int, version: str) -> None:
    """This worker runs the scanner's datalint and sees the scanner's dataset, or the task fails."""
    from datalint import __version__

    where = _worker_address()
    if version != __version__:
        raise EngineError(
            f"dask worker {where} has datalint {__version__}, the scanner {version}: install the same "
            "version on every worker"
        )
    _allow_fork_from_threads()
    try:
        source = build_source(description)
        found = len(source)
    except Exception as exc:  # isolation boundary: the dataset as this worker sees it
        raise EngineError(f"dask worker {where} cannot build {description.spec}: {exc}") from None
    if found != length:
        raise EngineError(
            f"dask worker {where} sees {found} samples in {description.spec}, the scanner {length}: every "
            "worker must see the same dataset (same code, same files at the same paths)"
        )


def _worker_address() -> str:
    try:
        from distributed import get_worker

        return str(get_worker().address)
    except (ImportError, ValueError):
        return "(not a dask worker)"


_FORK_FILTER = threading.Lock()
_FORK_FILTER_SET: list[bool] = []


def _allow_fork_from_threads() -> None:
    # Python 3.12+ warns on fork() in a process with threads; a dask worker always has some. The
    # child only measures samples and leaves with os._exit, so the warning would only be noise.
    with _FORK_FILTER:
        if not _FORK_FILTER_SET:
            warnings.filterwarnings(
                "ignore", message=r".*use of fork\(\) may lead to deadlocks", category=DeprecationWarning
            )
            _FORK_FILTER_SET.append(True)
