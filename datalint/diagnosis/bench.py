"""`datalint bench`: the real DataLoader at several worker counts, measured, then soaked.

Each worker count runs the same batches after the same warm-up while a monitor thread samples the
main process and its workers from /proc (RSS, PSS, open fds, CPU time) and `/dev/shm` (statvfs).
The recommendation is the fastest run that fits the limits `datalint doctor` reads, with headroom.
The soak runs one config for many epochs or steps, recording throughput, memory and fd trends,
samples that raise (through the guard) and, when a worker dies, the kernel's verdict on it.
torch is imported inside the functions that need it, never at module level.
"""

from __future__ import annotations

import contextlib
import gc
import itertools
import os
import re
import signal
import struct
import tempfile
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from datalint.diagnosis.doctor import HEADROOM, Limits, shm_fix
from datalint.errors import UsageError
from datalint.host.processes import child_pids, read_process
from datalint.host.shm import shm_usage
from datalint.text import exception_text
from datalint.units import human_bytes

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
# A run this much faster than the best smaller worker count is worth its extra workers.
WORTHWHILE_GAIN = 0.10
# Prefer fewer workers when they are within this fraction of the fastest: less memory, same speed.
NEAR_FASTEST = 0.05
# Growth below this over a soak is noise from allocator arenas and caches, not a leak.
LEAK_MIN_BYTES = 16 << 20
SOAK_SEGMENTS = 10  # readings taken over a --steps soak
MIN_CPU_WINDOW_S = 0.5
MAX_FILL_WAIT_S = 5.0  # longest pause for the prefetch queue to fill before the timed batches


# --- measuring processes: see datalint.host.processes ----------------------------------------


@dataclass(frozen=True)
class Peaks:
    rss: int  # main process plus workers, summed at one instant
    pss: int | None
    shm: int  # above what /dev/shm held before the run
    fds: int  # main process
    fds_all: int  # main process plus workers
    processes: int


class Monitor:
    """Samples this process and its children every `interval` seconds on a background thread.

    RSS, fds, CPU time and /dev/shm are read every time; PSS, which is costly to read, every
    `pss_interval` seconds and whenever `sample()` is called directly (at the moments that matter:
    the prefetch queue full, the end of a run or of a soak segment).
    """

    def __init__(self, shm_path: str = "/dev/shm", interval: float = 0.05, pss_interval: float = 1.0) -> None:
        self.shm_path = shm_path
        self.interval = interval
        self.pss_interval = pss_interval
        self._pss_at = 0.0
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._loop, name="datalint-bench-monitor", daemon=True)
        self._shm_base = shm_usage(shm_path)[0] or 0
        self._cpu: dict[int, int] = {}
        self._cpu_mark: dict[int, int] = {}
        self._peaks = Peaks(0, None, 0, 0, 0, 0)
        self.last_total = 0  # PSS (or RSS) of the main process and workers at the last sample
        self.last_fds = 0  # the main process's open fds at the last sample

    def __enter__(self) -> Monitor:
        self.sample()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample(with_pss=time.monotonic() - self._pss_at >= self.pss_interval)

    def sample(self, with_pss: bool = True) -> None:
        me = os.getpid()
        if with_pss:
            self._pss_at = time.monotonic()
        pids = [me, *child_pids(me)]
        readings = [r for r in (read_process(pid, with_pss) for pid in pids) if r is not None]
        shm = self.shm_now()
        rss = sum(r.rss for r in readings)
        pss_known = with_pss and all(r.pss is not None for r in readings)
        pss = sum(r.pss or 0 for r in readings) if pss_known else None
        with self._lock:
            for r in readings:
                self._cpu[r.pid] = r.cpu_ticks
            old = self._peaks
            self._peaks = Peaks(
                rss=max(old.rss, rss),
                pss=max(old.pss or 0, pss) if pss is not None else old.pss,
                shm=max(old.shm, shm),
                fds=max(old.fds, readings[0].fds if readings else 0),
                fds_all=max(old.fds_all, sum(r.fds for r in readings)),
                processes=max(old.processes, len(readings)),
            )
            if with_pss:  # a full reading: what a soak segment reports
                self.last_total = pss if pss is not None else rss
            self.last_fds = readings[0].fds if readings else 0

    def shm_now(self) -> int:
        """/dev/shm use above the baseline, read now."""
        return max(0, (shm_usage(self.shm_path)[0] or 0) - self._shm_base)

    def mark(self) -> None:
        """Start of the measured window, for CPU time."""
        self.sample()
        with self._lock:
            self._cpu_mark = dict(self._cpu)

    def cpu_seconds(self) -> float:
        """CPU seconds used by the main process and its workers since `mark()`."""
        self.sample()
        with self._lock:
            ticks = sum(t - self._cpu_mark.get(pid, 0) for pid, t in self._cpu.items())
        return ticks / CLOCK_TICKS

    def peaks(self) -> Peaks:
        with self._lock:
            return self._peaks


# --- what killed a worker ---------------------------------------------------------------------


@dataclass(frozen=True)
class Diagnosis:
    signal: str | None  # SIGKILL, SIGBUS, ...; None when the loader failed without a dead worker
    cause: str
    fix: str
    message: str  # the loader's own words, first line
    pids: tuple[int, ...] = ()


# strsignal() text, as torch quotes it ("is killed by signal: Killed."), -> signal name
_SIGNAL_TEXT: dict[str, str] = {
    text: sig.name for sig in signal.Signals if (text := signal.strsignal(sig) or "") and sig.name.isupper()
}
_NATIVE_FIX = (
    "`datalint scan` names the sample in isolation; `datalint check` flags handles opened in __init__"
)
# What to do about each way a worker dies; the causes are the scan engine's (one wording for both).
SIGNAL_FIXES: dict[str, str] = {
    "SIGKILL": "lower num_workers, prefetch_factor or batch size, or raise the memory limit; "
    "`dmesg | grep -i oom` (on the host) shows the kill",
    "SIGBUS": shm_fix(),
    "SIGSEGV": _NATIVE_FIX,
    "SIGABRT": _NATIVE_FIX,
    "SIGFPE": _NATIVE_FIX,
    "SIGILL": "install a build of the library for this CPU",
}
SHM_CAUSE = "shared memory: /dev/shm has no room for the batches in flight"
# How a worker's death surfaces when the main process notices it mid-handover (file_descriptor
# sharing fetches each batch's fds from the worker): no signal in the message, so ask the process.
_HANDOVER_ERRORS = (ConnectionError, EOFError)


def _signal_cause(name: str) -> tuple[str, str]:
    from datalint.scan.runner import CRASH_CAUSES

    return CRASH_CAUSES.get(name, f"killed by {name}"), SIGNAL_FIXES.get(name, "rerun with num_workers=0")


def _error_text(exc: BaseException) -> str:
    """The error and everything it was raised from: torch puts the signal in the cause."""
    parts: list[str] = []
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        parts.append(exception_text(current))
        current = current.__cause__ or current.__context__
    return "\n".join(parts)


def _worker_pids(text: str) -> tuple[int, ...]:
    """The pids torch names: "worker (pid 123)" or "worker (pid(s) 123, 456)"."""
    groups = re.findall(r"\(pid(?:\(s\))? ([\d, ]+)\)", text)
    return tuple(dict.fromkeys(int(p) for group in groups for p in re.findall(r"\d+", group)))


def _signal_named(text: str, exit_codes: Mapping[int, int]) -> str | None:
    killed = re.search(r"killed by signal: ([^.\n]+)", text)
    if killed:
        words = killed.group(1).strip()
        return _SIGNAL_TEXT.get(words, words)
    for code in exit_codes.values():
        if code < 0:
            with contextlib.suppress(ValueError):
                return signal.Signals(-code).name
    return None


def diagnose(text: str, exit_codes: Mapping[int, int] | None = None, printed: str = "") -> Diagnosis:
    """What a DataLoader failure means, from the message torch raised (and its causes), where the
    message names no signal the exit codes of the workers that died (pid -> code), and where the
    loader only timed out, what its workers printed (`printed`: their stderr).

    The last is how a full /dev/shm often shows: the image batch fits, then the worker's queue
    feeder thread fails to move a small tensor (the labels) into shared memory as it sends the
    batch; multiprocessing prints that traceback and drops the batch, and the loader waits for it
    until its timeout (or forever, without one)."""
    exit_codes = exit_codes or {}
    first = text.strip().splitlines()[0] if text.strip() else ""
    pids = _worker_pids(text) or tuple(pid for pid, code in exit_codes.items() if code != 0)
    timed_out = "timed out after" in text
    if _out_of_shm(text) or (timed_out and _out_of_shm(printed)):
        fix = SIGNAL_FIXES["SIGBUS"]
        return Diagnosis("SIGBUS" if "Bus error" in text else None, SHM_CAUSE, fix, first, pids)
    name = _signal_named(text, exit_codes)
    if name:
        return Diagnosis(name, *_signal_cause(name), first, pids)
    if "Too many open files" in text:
        return Diagnosis(
            None, "too many open files under the file_descriptor sharing strategy",
            "`ulimit -n` higher, or torch.multiprocessing.set_sharing_strategy('file_system')", first, pids,
        )
    if timed_out:
        return Diagnosis(None, "a worker hung (no batch within the timeout)",
                         "`datalint scan ... --timeout S` finds the sample that hangs", first, pids)
    if "exited unexpectedly" in text or any(code > 0 for code in exit_codes.values()):
        return Diagnosis(None, "a worker exited without a signal (os._exit or sys.exit in the dataset)",
                         "search the dataset and its libraries for exit calls", first, pids)
    if _COLLATE_FAILURE.search(text):
        return Diagnosis(None, "a batch could not be collated: its samples differ in shape or type (or one "
                         "is None), which GuardedDataset cannot replace since no sample raised",
                         f"{SAMPLE_FIX} (the scan reports shape_mismatch and missing fields); or a "
                         "collate_fn that pads", first, pids)
    caught = re.search(r"Caught (\w+) in DataLoader worker process (\d+)", text)
    if caught:
        return Diagnosis(None, f"a sample raised {caught.group(1)} in worker {caught.group(2)}",
                         "wrap the dataset in datalint.torch.GuardedDataset, or quarantine the sample "
                         "with `datalint scan`", first, pids)
    return Diagnosis(None, "the loader failed", "rerun with num_workers=0 to see the sample's traceback",
                     first, pids)


# default_collate's words when the samples of a batch do not stack (torch 2.x)
_COLLATE_FAILURE = re.compile(
    r"stack expects each tensor to be equal size|default_collate: batch must contain tensors|"
    r"each element in list of batch should be of equal size|\bin (?:default_)?collate\b"
)
SAMPLE_FIX = ("`datalint scan --dataset SPEC` names every sample that fails, and "
              "`datalint bench --dataset SPEC --batch-size B --quarantine LIST` leaves them out of the "
              "measurement")


def not_again(diagnosis: Diagnosis, workers: int, config: BenchConfig | None) -> Diagnosis:
    """The diagnosis without advice to do what this run already did: rerun with num_workers=0 when
    it ran with 0 (the traceback is then the sample's own), wrap in GuardedDataset when it was."""
    fix = diagnosis.fix
    if workers == 0 and "num_workers=0" in fix:
        fix = f"the error above is the sample's own (num_workers=0 loads in this process): {SAMPLE_FIX}"
    if config is not None and config.guarded and "GuardedDataset" in fix:
        fix = ("GuardedDataset only replaces samples that raise; one that loads but does not collate "
               f"(another shape, a None) gets through it: {SAMPLE_FIX}")
    if config is not None and config.skip and "--quarantine" in fix:
        fix = fix.replace(SAMPLE_FIX, "`datalint scan --dataset SPEC` again: this list does not name "
                                      "the sample (the dataset or the files changed since it was made)")
    return diagnosis if fix == diagnosis.fix else replace(diagnosis, fix=fix)


def _out_of_shm(text: str) -> bool:
    return "unable to allocate shared memory" in text or "No space left on device" in text


def dead_workers(batches: Any, wait: float = 1.0) -> dict[int, int]:
    """pid -> exit code of the loader's workers that have died (negative: killed by that signal).

    Reads the iterator's worker processes; a worker that just died may need a moment to be reaped.
    """
    workers = getattr(batches, "_workers", None) or []
    deadline = time.monotonic() + wait
    while True:
        dead = {w.pid: w.exitcode for w in workers if not w.is_alive() and w.exitcode not in (None, 0)}
        if dead or time.monotonic() >= deadline or not workers:
            return dead
        time.sleep(0.05)


def diagnose_failure(exc: BaseException, batches: Any, printed: str = "") -> Diagnosis:
    """The diagnosis of a loader that raised, asking its workers only when the message is silent
    (`printed`: what they wrote to stderr, for `diagnose`).

    When the first error is a broken handover, torch's SIGCHLD handler raises the worker's death
    again moments later, wherever the main thread then is: here. That second error is the one that
    names the signal, so it is kept and the diagnosis starts over.
    """
    errors: list[BaseException] = [exc]
    for _ in range(3):
        try:
            text = "\n".join(_error_text(error) for error in errors)
            silent = isinstance(exc, _HANDOVER_ERRORS) or not re.search(r"signal|Caught|pid", text)
            return diagnose(text, dead_workers(batches) if silent else None, printed)
        except RuntimeError as late:
            errors.insert(0, late)
    return diagnose("\n".join(_error_text(error) for error in errors), printed=printed)


# --- which sample each worker was on ----------------------------------------------------------

_JOURNAL = struct.Struct("<q")


class JournaledDataset:
    """Writes the index in progress to `<dir>/<pid>` before each sample (one 8-byte pwrite).

    When the kernel kills a worker, nothing is raised inside it; the journal still names the sample
    it was on. Module-level and holding only picklable state, so spawn and forkserver work too.
    """

    def __init__(self, dataset: Any, journal_dir: str) -> None:
        self.dataset = dataset
        self.journal_dir = journal_dir
        self._fd: int | None = None
        self._pid = 0

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, index: int) -> Any:
        if self._pid != os.getpid():  # first sample in this process (forked workers copy self)
            self._pid = os.getpid()
            path = os.path.join(self.journal_dir, str(self._pid))
            self._fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
        assert self._fd is not None
        os.pwrite(self._fd, _JOURNAL.pack(index), 0)
        return self.dataset[index]

    def __getstate__(self) -> dict[str, Any]:
        return {"dataset": self.dataset, "journal_dir": self.journal_dir, "_fd": None, "_pid": 0}


def index_in_flight(journal_dir: str, pid: int) -> int | None:
    try:
        with open(os.path.join(journal_dir, str(pid)), "rb") as handle:
            raw = handle.read(_JOURNAL.size)
    except OSError:
        return None
    return _JOURNAL.unpack(raw)[0] if len(raw) == _JOURNAL.size else None


# --- the sweep --------------------------------------------------------------------------------


@dataclass(frozen=True)
class BenchConfig:
    batch_size: int
    batches: int
    workers: tuple[int, ...] = (0, 1, 2, 4)
    prefetch_factor: int = 2
    pin_memory: bool = False
    persistent_workers: bool = False
    warmup: int | None = None  # batches before the clock starts; default: one per worker, at least 1
    timeout: float = 60.0  # seconds a worker may take for one batch
    interval: float = 0.05  # monitor sampling period
    shm_path: str = "/dev/shm"
    skip: frozenset[int] = frozenset()  # the samples a quarantine list keeps out (`--quarantine`)
    guarded: bool = False  # the dataset is wrapped in GuardedDataset (`--guard`)

    @property
    def warmup_batches(self) -> int:
        # The same warm-up for every worker count, so every run times exactly the same batches.
        return self.warmup if self.warmup is not None else max(1, *self.workers)

    @property
    def loaded_batches(self) -> int:
        """Batches in the sampler: after the warm-up, enough left for every prefetch slot to fill."""
        return self.warmup_batches + max(self.batches, max(self.workers) * self.prefetch_factor)


@dataclass(frozen=True)
class Run:
    num_workers: int
    samples_per_s: float | None
    first_batch_s: float | None
    measured_s: float | None
    rss_bytes: int
    pss_bytes: int | None
    shm_peak_bytes: int
    fds: int
    fds_all: int
    cpu_percent: float | None  # 100 = one CPU busy for the whole measured window
    error: str | None = None
    diagnosis: Diagnosis | None = None
    note: str = ""

    @property
    def memory_bytes(self) -> int:
        """What the run really costs: PSS when the kernel offers it (RSS counts shared pages per process)."""
        return self.pss_bytes if self.pss_bytes is not None else self.rss_bytes


@dataclass(frozen=True)
class Recommendation:
    num_workers: int | None
    reason: str
    config: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class BenchResult:
    config: BenchConfig
    runs: tuple[Run, ...]
    recommended: Recommendation
    limits: Limits
    usable_cpus: int | None


def bench_indices(
    length: int, batch_size: int, batches: int, skip: frozenset[int] = frozenset()
) -> list[int]:
    """The sample order every run uses, without the samples in `skip` (a quarantine list's); wraps
    around a dataset shorter than the run."""
    allowed = (i for i in range(length) if i not in skip) if skip else range(length)
    return list(itertools.islice(itertools.cycle(allowed), batch_size * batches))


def epoch_indices(length: int, skip: frozenset[int] = frozenset()) -> Sequence[int]:
    """One pass over the dataset, without the samples in `skip`."""
    return [i for i in range(length) if i not in skip] if skip else range(length)


@contextlib.contextmanager
def quiet_worker_count() -> Iterator[None]:
    """Silence torch's "more workers than CPUs" warning: the table notes it, next to the figures."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="This DataLoader will create", category=UserWarning)
        yield


def make_loader(dataset: Any, indices: Sequence[int], config: BenchConfig, workers: int) -> Any:
    from torch.utils.data import DataLoader

    with quiet_worker_count():
        return DataLoader(
            dataset,
            batch_size=config.batch_size,
            sampler=indices,  # a plain sequence of indices is a valid sampler
            num_workers=workers,
            prefetch_factor=config.prefetch_factor if workers else None,
            pin_memory=config.pin_memory,
            persistent_workers=config.persistent_workers and workers > 0,
            timeout=config.timeout if workers else 0,
        )


def _failed_run(workers: int, exc: BaseException, batches: Any, peaks: Peaks, printed: str,
                config: BenchConfig | None = None) -> Run:
    diagnosis = not_again(diagnose_failure(exc, batches, printed), workers, config)
    return Run(
        workers, None, None, None, peaks.rss, peaks.pss, peaks.shm, peaks.fds, peaks.fds_all, None,
        error=diagnosis.message, diagnosis=diagnosis,
    )


def fill_prefetch_queue(
    monitor: Monitor, workers: int, prefetch_factor: int, batch_bytes: int, first_batch_s: float
) -> None:
    """Pause the consumer until the workers have filled every prefetch slot, and read the peak then.

    The timed loop takes batches as fast as they come, so few wait in /dev/shm; in training the step
    is usually slower than loading and all num_workers x prefetch_factor batches wait there. That
    worst case is the one a shm limit must hold, so it is what the shm peak reports. The pause ends
    when /dev/shm holds that many batches, or after the time the slots need to fill (each worker
    fills its prefetch_factor slots one batch after another, side by side with the others; the
    first batch, start-up included, bounds one batch's time).
    """
    target = 0.95 * workers * prefetch_factor * batch_bytes
    # Twice the expected time, for a loaded machine; the loop leaves as soon as the slots are full.
    deadline = time.monotonic() + min(MAX_FILL_WAIT_S, 0.5 + 2 * prefetch_factor * first_batch_s)
    while time.monotonic() < deadline and monitor.shm_now() < target:
        time.sleep(0.02)
    monitor.sample()


def run_once(
    dataset: Any, config: BenchConfig, workers: int, printed: Callable[[], str] = lambda: ""
) -> Run:
    """One worker count: warm up, then time `config.batches` batches while the monitor samples.
    `printed` returns what the workers have written to stderr so far, read only if the loader fails."""
    from datalint.scan.probes import nbytes

    indices = bench_indices(len(dataset), config.batch_size, config.loaded_batches, config.skip)
    loader = make_loader(dataset, indices, config, workers)
    batches: Iterator[Any] = iter(())
    with Monitor(config.shm_path, config.interval) as monitor, quiet_worker_count():
        # torch raises a worker's death from its SIGCHLD handler, at whatever line the main thread
        # is on; so everything up to the workers' shutdown stays inside the try.
        try:
            start = time.perf_counter()
            batches = iter(loader)
            batch_bytes = nbytes(next(batches))
            first_batch_s = time.perf_counter() - start
            for _ in range(config.warmup_batches - 1):
                next(batches)
            if workers:
                fill_prefetch_queue(monitor, workers, config.prefetch_factor, batch_bytes, first_batch_s)
            monitor.mark()
            start = time.perf_counter()
            for _ in range(config.batches):
                next(batches)
            measured_s = time.perf_counter() - start
            cpu = monitor.cpu_seconds()
            batches = iter(())  # shuts the workers down before the next run starts its own
        except Exception as exc:  # isolation boundary: one worker count; the sweep goes on
            return _failed_run(workers, exc, batches, monitor.peaks(), printed(), config)
    peaks = monitor.peaks()
    return Run(
        num_workers=workers,
        samples_per_s=config.batches * config.batch_size / measured_s if measured_s > 0 else None,
        first_batch_s=first_batch_s,
        measured_s=measured_s,
        rss_bytes=peaks.rss,
        pss_bytes=peaks.pss,
        shm_peak_bytes=peaks.shm,
        fds=peaks.fds,
        fds_all=peaks.fds_all,
        # CPU time comes in clock ticks (10 ms): over a shorter window the figure would be noise.
        cpu_percent=100 * cpu / measured_s if measured_s >= MIN_CPU_WINDOW_S else None,
    )


def run_isolated(dataset: Any, config: BenchConfig, workers: int) -> Run:
    """`run_once` in a forked child: a sample that kills the main process kills only this config.

    With num_workers=0 the samples load in the main process, so a segfaulting sample would end the
    whole sweep. The child sends its `Run` back through a pipe; its stderr (torch's and
    multiprocessing's worker tracebacks) goes to a file, so it never reaches the terminal and its
    last line explains a child that died.
    """
    import pickle

    with tempfile.TemporaryFile() as log:
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: measure, report, and leave without running the parent's cleanup
            try:
                os.close(read_end)
                os.dup2(log.fileno(), 2)
                data = pickle.dumps(run_once(dataset, config, workers, lambda: _tail(log.fileno())))
                with os.fdopen(write_end, "wb") as out:
                    out.write(data)
            finally:
                os._exit(0)
        os.close(write_end)
        with os.fdopen(read_end, "rb") as result:
            data = result.read()
        _, status = os.waitpid(pid, 0)
        if data:
            with contextlib.suppress(Exception):
                return pickle.loads(data)
        log.seek(0)
        return _dead_run(workers, status, log.read().decode("utf-8", "backslashreplace"))


def _tail(fd: int, size: int = 64 << 10) -> str:
    """The last `size` bytes of a file, read without moving its offset (the file is its writer's stderr)."""
    length = os.fstat(fd).st_size
    return os.pread(fd, size, max(0, length - size)).decode("utf-8", "backslashreplace")


def _dead_run(workers: int, status: int, stderr: str) -> Run:
    """The Run of a configuration whose process died before it could report."""
    lines = [line for line in stderr.splitlines() if line.strip()]
    said = f" (its last words: {lines[-1].strip()[:200]})" if lines else ""
    if os.WIFSIGNALED(status):
        name = signal.Signals(os.WTERMSIG(status)).name
        cause, fix = _signal_cause(name)
        where = "the main process (a sample crashed it)" if workers == 0 else "the benchmark process"
        message = f"{where} was killed by {name}: {cause}{said}"
        diagnosis = Diagnosis(name, cause, fix, message)
    else:
        message = f"the benchmark process exited with status {os.waitstatus_to_exitcode(status)}{said}"
        diagnosis = Diagnosis(None, "the process exited", "search the dataset for exit calls", message)
    return Run(workers, None, None, None, 0, None, 0, 0, 0, None, error=message, diagnosis=diagnosis)


def mark_returns(runs: Sequence[Run], usable_cpus: int | None) -> list[Run]:
    """Note where more workers stop paying: slower than a smaller count, or under 10% faster."""
    marked: list[Run] = []
    best: float | None = None
    for run in sorted(runs, key=lambda r: r.num_workers):
        notes: list[str] = []
        speed = run.samples_per_s
        if speed is not None and best is not None:
            if speed < best:
                notes.append("slower")
            elif speed < best * (1 + WORTHWHILE_GAIN):
                notes.append("diminishing returns")
        if usable_cpus is not None and run.num_workers > usable_cpus:
            notes.append(f"more workers than {usable_cpus} CPUs")
        if run.error:
            notes.append("failed")
        if speed is not None:
            best = max(best or 0.0, speed)
        marked.append(replace(run, note=", ".join(notes)))
    return marked


def fits(run: Run, limits: Limits) -> tuple[bool, str]:
    """Whether a run stays within the limits' headroom; the reason when it does not."""
    if run.error:
        return False, f"failed: {run.diagnosis.cause if run.diagnosis else run.error}"
    if limits.memory_bytes is not None and run.memory_bytes > HEADROOM * limits.memory_bytes:
        return False, (
            f"{human_bytes(run.memory_bytes)} of memory is over {HEADROOM:.0%} of "
            f"{human_bytes(limits.memory_bytes)} ({limits.memory_source})"
        )
    if limits.shm_bytes is not None and run.shm_peak_bytes > HEADROOM * limits.shm_bytes:
        return False, (
            f"{human_bytes(run.shm_peak_bytes)} of /dev/shm is over {HEADROOM:.0%} of "
            f"{human_bytes(limits.shm_bytes)} ({limits.shm_source})"
        )
    return True, ""


def recommend(runs: Sequence[Run], limits: Limits, config: BenchConfig) -> Recommendation:
    """The fastest run that fits with headroom; fewer workers when they are within 5% of it."""
    fitting = [r for r in runs if r.samples_per_s is not None and fits(r, limits)[0]]
    if not fitting:
        reasons = "; ".join(f"{r.num_workers} workers: {fits(r, limits)[1]}" for r in runs)
        return Recommendation(None, f"no run fits within the limits ({reasons})")
    fastest = max(fitting, key=lambda r: r.samples_per_s or 0.0)
    top = fastest.samples_per_s or 0.0
    chosen = min((r for r in fitting if (r.samples_per_s or 0.0) >= top * (1 - NEAR_FASTEST)),
                 key=lambda r: r.num_workers)
    reason = f"{chosen.num_workers} workers: {chosen.samples_per_s:.0f} samples/s"
    if chosen is not fastest:
        saved = fastest.memory_bytes - chosen.memory_bytes
        reason += (
            f", within {NEAR_FASTEST:.0%} of the fastest ({fastest.num_workers} workers, "
            f"{top:.0f}/s) with {fastest.num_workers - chosen.num_workers} fewer workers"
            + (f" and {human_bytes(saved)} less memory" if saved > 0 else "")
        )
    else:
        reason += ", the fastest run"
    reason += (
        f"; peak memory {human_bytes(chosen.memory_bytes)} of {human_bytes(limits.memory_bytes)}, "
        f"/dev/shm {human_bytes(chosen.shm_peak_bytes)} of {human_bytes(limits.shm_bytes)} "
        f"(kept within {HEADROOM:.0%})"
    )
    rejected = [f"{r.num_workers} workers {fits(r, limits)[1]}" for r in runs if not fits(r, limits)[0]]
    if rejected:
        reason += "; left out: " + "; ".join(rejected)
    chosen_config = {
        "batch_size": config.batch_size,
        "num_workers": chosen.num_workers,
        "prefetch_factor": config.prefetch_factor if chosen.num_workers else None,
        "pin_memory": config.pin_memory,
        "persistent_workers": config.persistent_workers and chosen.num_workers > 0,
    }
    return Recommendation(chosen.num_workers, reason, chosen_config)


def sweep(
    dataset: Any,
    config: BenchConfig,
    limits: Limits,
    usable_cpus: int | None = None,
    progress: Callable[[Run], None] | None = None,
) -> BenchResult:
    """Run every worker count in turn and recommend one."""
    runs: list[Run] = []
    for workers in config.workers:
        run = run_isolated(dataset, config, workers)
        gc.collect()  # drop the last run's batches before the next one is measured
        runs.append(run)
        if progress:
            progress(run)
    marked = mark_returns(runs, usable_cpus)
    return BenchResult(config, tuple(marked), recommend(marked, limits, config), limits, usable_cpus)


# --- the soak ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Segment:
    """One epoch (or one tenth of a --steps soak)."""

    number: int
    steps: int
    samples: int
    seconds: float
    samples_per_s: float
    memory_bytes: int  # main process plus workers (PSS where available) at the end of the segment
    fds: int  # main process, at the end of the segment


@dataclass(frozen=True)
class Trend:
    slope_bytes: float  # per segment, least squares
    growth_bytes: int
    leak: bool
    detail: str


@dataclass(frozen=True)
class SampleFailure:
    index: int
    error: str


@dataclass(frozen=True)
class WorkerDeath:
    diagnosis: Diagnosis
    segment: int
    step: int
    indices: tuple[int, ...]  # what the dead worker(s) were loading, from the journal


@dataclass(frozen=True)
class SoakResult:
    num_workers: int
    segments: tuple[Segment, ...]
    memory: Trend
    fd_growth: int
    failures: tuple[SampleFailure, ...]
    death: WorkerDeath | None
    guarded: bool
    peak_memory_bytes: int = 0
    peak_shm_bytes: int = 0


def memory_trend(values: Sequence[int], unit: str = "epoch") -> Trend:
    """A leak is a steady climb: positive slope, mostly rising, and more than noise in total.

    The first reading holds the warm-up's allocations, so it is left out when there are enough others.
    """
    series = list(values[1:]) if len(values) >= 4 else list(values)
    if len(series) < 3:
        return Trend(0.0, 0, False, f"too few readings to judge a trend (soak for 3 {unit}s or more)")
    n = len(series)
    mean_x, mean_y = (n - 1) / 2, sum(series) / n
    slope = sum((x - mean_x) * (y - mean_y) for x, y in enumerate(series)) / sum(
        (x - mean_x) ** 2 for x in range(n)
    )
    growth = series[-1] - series[0]
    rises = sum(b > a for a, b in itertools.pairwise(series))
    threshold = max(LEAK_MIN_BYTES, series[0] // 20)
    leak = slope > 0 and growth > threshold and rises >= 0.7 * (n - 1)
    detail = (
        f"{human_bytes(growth)} over the last {n} {unit}s ({human_bytes(slope)} per {unit})"
        + (": a steady climb, likely a leak (per-worker caches, Python lists copied on read)" if leak else "")
    )
    return Trend(slope, growth, leak, detail)


def _guard(dataset: Any, record: str) -> tuple[Any, bool]:
    """Wrap in the training guard when it is available: raising samples are recorded and replaced."""
    try:
        from datalint.torch import GuardedDataset
    except ImportError:
        return dataset, False
    return GuardedDataset(dataset, record=record), True


def guard_failures(record: str) -> list[SampleFailure]:
    import sqlite3

    from datalint.index import read

    if not os.path.exists(record):
        return []
    try:
        with read.reading(record) as db:
            failed = read.failed_samples(db)
    except sqlite3.DatabaseError:
        return []
    return [SampleFailure(f.index, f"{f.error_type}: {f.message}" if f.message else str(f.error_type))
            for f in failed]


@dataclass(frozen=True)
class Leg:
    """One planned segment: how many batches, how many samples they hold, and whether to restart."""

    steps: int
    samples: int
    new_epoch: bool


def soak_plan(length: int, batch_size: int, epochs: int | None, steps: int | None) -> list[Leg]:
    """An epoch is one pass over the dataset; a --steps soak is one long pass cut into ten readings."""
    if epochs:
        return [Leg(-(-length // batch_size), length, True)] * epochs
    total = steps or 0
    size = max(1, -(-total // SOAK_SEGMENTS))
    return [
        Leg(min(size, total - done), min(size, total - done) * batch_size, done == 0)
        for done in range(0, total, size)
    ]


def soak(
    dataset: Any,
    config: BenchConfig,
    workers: int,
    epochs: int | None = None,
    steps: int | None = None,
    record: str | None = None,
    progress: Callable[[Segment], None] | None = None,
) -> SoakResult:
    """Run one config for `epochs` passes (or `steps` batches) and report what drifts or dies."""
    with tempfile.TemporaryDirectory(prefix="datalint-soak-") as scratch:
        record_path = record or os.path.join(scratch, "guard.db")
        guarded, is_guarded = (dataset, True) if config.guarded else _guard(dataset, record_path)
        journaled = JournaledDataset(guarded, scratch)
        indices: Sequence[int] = (
            epoch_indices(len(dataset), config.skip) if epochs
            else bench_indices(len(dataset), config.batch_size, steps or 0, config.skip)
        )
        plan = soak_plan(len(indices) if epochs else len(dataset), config.batch_size, epochs, steps)
        loader = make_loader(journaled, indices, config, workers)
        segments, death, peaks = _soak_loop(loader, plan, config, progress, scratch)
        failures = guard_failures(record_path) if is_guarded else []
    memory = memory_trend([s.memory_bytes for s in segments], "epoch" if epochs else "segment")
    fd_growth = segments[-1].fds - segments[0].fds if segments else 0
    return SoakResult(
        workers, tuple(segments), memory, fd_growth, tuple(failures), death, is_guarded,
        peaks.pss if peaks.pss is not None else peaks.rss, peaks.shm,
    )


def _soak_loop(
    loader: Any,
    plan: Sequence[Leg],
    config: BenchConfig,
    progress: Callable[[Segment], None] | None,
    journal_dir: str,
) -> tuple[list[Segment], WorkerDeath | None, Peaks]:
    segments: list[Segment] = []
    death: WorkerDeath | None = None
    batches: Iterator[Any] = iter(())
    number = done = 0
    with Monitor(config.shm_path, config.interval) as monitor, quiet_worker_count():
        # As in run_once: a worker's death can be raised at any line while its iterator lives.
        try:
            for number, leg in enumerate(plan, start=1):
                start, done = time.perf_counter(), 0
                if leg.new_epoch:
                    batches = iter(loader)
                for _ in range(leg.steps):
                    next(batches)
                    done += 1
                segment = _segment(number, leg, time.perf_counter() - start, monitor)
                segments.append(segment)
                if progress:
                    progress(segment)
            batches = iter(())
        except Exception as exc:  # isolation boundary: a dead worker ends the soak, with a verdict
            diagnosis = diagnose_failure(exc, batches)
            death = WorkerDeath(diagnosis, number, done, _lost_indices(journal_dir, diagnosis.pids))
        return segments, death, monitor.peaks()


def _lost_indices(journal_dir: str, pids: Sequence[int]) -> tuple[int, ...]:
    in_flight = (index_in_flight(journal_dir, pid) for pid in pids)
    return tuple(i for i in in_flight if i is not None)


def _segment(number: int, leg: Leg, seconds: float, monitor: Monitor) -> Segment:
    monitor.sample()
    return Segment(
        number, leg.steps, leg.samples, seconds, leg.samples / seconds if seconds > 0 else 0.0,
        monitor.last_total, monitor.last_fds,
    )


# The report's chart styles, for an SVG that stands alone (the report page carries them in its CSS).
_PLOT_STYLE = """
svg { font-family: system-ui, sans-serif; font-size: 11px; background: #fff; }
.chart-title { font-size: 13px; font-weight: 600; fill: #1d2433; }
.chart-empty, .tick-label, .bar-value { fill: #5b6475; }
.bar-label { fill: #1d2433; }
.bar { fill: #5b8bd6; }
.bar.best { fill: #2e8b57; }
.bar.other { fill: #9aa3b2; }
"""


def plot_svg(result: BenchResult) -> str:
    """Throughput and memory against the worker count, drawn with the report's own SVG bar charts."""
    from datalint.report.charts import Bar, bar_chart, format_bytes

    runs = [r for r in result.runs if r.samples_per_s is not None]

    def css(run: Run) -> str:
        return "bar best" if run.num_workers == result.recommended.num_workers else "bar"

    charts = [
        bar_chart(
            [Bar(f"{r.num_workers} workers", r.samples_per_s or 0.0, css(r)) for r in runs],
            title=f"samples/s, batch_size={result.config.batch_size} (green: recommended)",
            fmt=lambda value: f"{value:,.0f}",
        ),
        bar_chart(
            [Bar(f"{r.num_workers} workers", float(r.memory_bytes), css(r)) for r in runs],
            title="peak memory, main process + workers (PSS where available)",
            fmt=format_bytes,
        ),
        bar_chart(
            [Bar(f"{r.num_workers} workers", float(r.shm_peak_bytes or 0), css(r)) for r in runs],
            title="peak /dev/shm",
            fmt=format_bytes,
        ),
    ]
    heights = [int(re.search(r'height="(\d+)"', chart)[1]) for chart in charts]  # type: ignore[index]
    width = int(re.search(r'width="(\d+)"', charts[0])[1])  # type: ignore[index]
    offsets = list(itertools.accumulate([0, *heights[:-1]]))
    placed = "".join(
        f'<g transform="translate(0,{y})">{chart}</g>' for chart, y in zip(charts, offsets, strict=True)
    )
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{sum(heights)}" '
        f'viewBox="0 0 {width} {sum(heights)}"><style>{_PLOT_STYLE}</style>{placed}</svg>\n'
    )


def check_plot_path(path: str | os.PathLike[str]) -> None:
    """Refuse, before the sweep, a --plot file that cannot be written or would not be an SVG."""
    target = os.fspath(path)
    if not target.lower().endswith(".svg"):
        raise UsageError(f"--plot {target}: the plot is an SVG file (the report's charts); name it .svg")
    folder = os.path.dirname(os.path.abspath(target))
    if not os.path.isdir(folder):
        raise UsageError(f"--plot {target}: no such folder {folder}")
    if not os.access(folder, os.W_OK):
        raise UsageError(f"--plot {target}: the folder {folder} is not writable")


def plot(result: BenchResult, path: str | os.PathLike[str]) -> None:
    """Write `plot_svg(result)` to `path`: a file any browser or image viewer opens."""
    with open(path, "w", encoding="utf-8") as file:
        file.write(plot_svg(result))
