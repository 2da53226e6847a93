"""`datalint doctor`: the limits a DataLoader runs into, read and judged.

Reading and judging are kept apart. `read_host()` gathers plain facts from a `/proc` + `/sys` root
(tests point it at fake trees for cgroup v1, v2 and none; the readers are `datalint.host`'s,
shared with the scan engine and the flight recorder) and from a few syscalls; every check is a
pure function from those facts to a `Check`. With a loader config, `estimate_loader()` turns measured
sample sizes into the shared and host memory a config holds in flight, judged against the limits.
Only the standard library is imported at module level; OpenCV and the scan engine load on demand.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import math
import multiprocessing
import os
import platform
import re
import resource
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from datalint.diagnosis.code_facts import CodeFinding, cache_bound, dataset_findings, left_out
from datalint.extras import install_line
from datalint.host.cgroup import Cgroup, read_cgroup
from datalint.host.container import read_container
from datalint.host.cpus import read_affinity, usable_cpu_count
from datalint.host.memory import memory_left, read_meminfo
from datalint.host.shm import Segment, Shm, read_segments, read_shm
from datalint.index import read
from datalint.units import GiB, MiB, human_bytes

DOCKER_DEFAULT_SHM = 64 * MiB
# Plan to use at most this fraction of a limit: the model, the optimizer and the allocator's slack
# live in the same memory, and a config that fits to the last byte fails on the first larger batch.
HEADROOM = 0.8
# The pitfall catalog's threshold for file_descriptor sharing with workers (each shared tensor in
# flight holds an fd in the main process).
NOFILE_WARN = 4096
# Below this many processes/threads, workers x their threads can hit the pids limit.
PIDS_WARN = 256

OK, WARN, FAIL = "ok", "warn", "fail"
STATUS_ORDER = {OK: 0, WARN: 1, FAIL: 2}

THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "TOKENIZERS_PARALLELISM")
LIBRARIES = ("torch", "numpy", "pillow", "opencv-python-headless", "opencv-python", "tokenizers")
DEFAULT_SHM_GIB = 8  # what to suggest when no estimate says how much is needed


@dataclass(frozen=True)
class Check:
    """One verdict: what was read, what it means, and what to do about it."""

    name: str
    status: str  # ok | warn | fail
    value: str
    detail: str
    fix: str = ""


# --- facts ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class HostFacts:
    """Everything the checks judge; built by `read_host()` or by hand in tests."""

    shm: Shm
    meminfo: Mapping[str, int]  # MemTotal, MemAvailable, SwapTotal, SwapFree, in bytes
    cgroup: Cgroup | None
    cpu_count: int | None
    affinity: int | None
    rlimits: Mapping[str, tuple[int, int]]  # NOFILE, NPROC, AS, MEMLOCK -> (soft, hard); -1 = unlimited
    container: str | None
    python: str
    start_method: str
    sharing_strategy: str
    libraries: Mapping[str, str | None]
    env: Mapping[str, str]
    cv2_threads: int | None = None


# --- readers ----------------------------------------------------------------------------------


def read_rlimits() -> dict[str, tuple[int, int]]:
    limits: dict[str, tuple[int, int]] = {}
    for short in ("NOFILE", "NPROC", "AS", "MEMLOCK"):
        if hasattr(resource, f"RLIMIT_{short}"):
            soft, hard = resource.getrlimit(getattr(resource, f"RLIMIT_{short}"))
            limits[short] = (_rlimit_value(soft), _rlimit_value(hard))
    return limits


def _rlimit_value(value: int) -> int:
    return -1 if value == resource.RLIM_INFINITY else value


def read_start_method() -> str:
    """The start method DataLoader workers get, without fixing it for this process as a side effect."""
    # get_all_start_methods() lists the platform default first (documented).
    return multiprocessing.get_start_method(allow_none=True) or multiprocessing.get_all_start_methods()[0]


def read_libraries() -> dict[str, str | None]:
    versions: dict[str, str | None] = {}
    for name in LIBRARIES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def read_cv2_threads() -> int | None:
    try:
        import cv2
    except ImportError:
        return None
    return int(cv2.getNumThreads())


def read_host(
    root: Path = Path("/"),
    shm_path: Path = Path("/dev/shm"),
    env: Mapping[str, str] | None = None,
    cv2_threads: Callable[[], int | None] = read_cv2_threads,
) -> HostFacts:
    """Read every fact the checks need. `root` is where /proc and /sys are found."""
    env = dict(os.environ if env is None else env)
    return HostFacts(
        shm=read_shm(shm_path, root),
        meminfo=read_meminfo(root),
        cgroup=read_cgroup(root),
        cpu_count=os.cpu_count(),
        affinity=read_affinity(),
        rlimits=read_rlimits(),
        container=read_container(root, env),
        python=platform.python_version(),
        start_method=read_start_method(),
        # torch's default; only the training script can change it (set_sharing_strategy).
        sharing_strategy="file_system" if sys.platform == "darwin" else "file_descriptor",
        libraries=read_libraries(),
        env={k: env[k] for k in THREAD_VARIABLES if k in env},
        cv2_threads=cv2_threads(),
    )


# --- derived quantities -----------------------------------------------------------------------


def usable_cpus(facts: HostFacts) -> int | None:
    """The CPUs this process may really use: the smallest of count, affinity and cgroup quota.

    The rule is `datalint.host.cpus.usable_cpu_count`, the one the scan engine sizes its pool with.
    """
    quota = facts.cgroup.cpu_quota if facts.cgroup else None
    return usable_cpu_count(facts.cpu_count, facts.affinity, quota)


def memory_budget(facts: HostFacts) -> int | None:
    """Bytes a loader can still take before the kernel (or the cgroup's OOM killer) steps in."""
    return memory_left(facts.meminfo, facts.cgroup)


# --- checks -----------------------------------------------------------------------------------


def shm_fix(gib: int = DEFAULT_SHM_GIB) -> str:
    """How to give a container (or a pod) `gib` GiB of /dev/shm."""
    return (
        f"docker run --shm-size={gib}g (or --ipc=host to share the host's /dev/shm); Kubernetes: mount "
        f"an emptyDir {{medium: Memory, sizeLimit: {gib}Gi}} at /dev/shm; or lower num_workers x "
        "prefetch_factor x batch size"
    )


def suggested_shm_gib(need: int) -> int:
    """GiB of /dev/shm that hold `need` with headroom, rounded up to a power of two."""
    gib = max(1, math.ceil(need / HEADROOM / GiB))
    return 1 << (gib - 1).bit_length()


def check_shm(facts: HostFacts) -> Check:
    shm = facts.shm
    fix = shm_fix()
    if shm.total is None:
        return Check(
            "shared memory", FAIL, f"{shm.path} is missing",
            "DataLoader workers pass every batch through shared memory; without it num_workers > 0 fails.",
            fix,
        )
    value = f"{shm.path}: {human_bytes(shm.total)} total, {human_bytes(shm.free)} free"
    if shm.total <= DOCKER_DEFAULT_SHM:
        where = f" (inside {facts.container})" if facts.container else ""
        return Check(
            "shared memory", WARN, value,
            f"64 MiB or less is Docker's default --shm-size{where}: a DataLoader with workers holds "
            "num_workers x prefetch_factor batches here, so two workers with 10 MiB batches already fill "
            "it and die with 'unable to allocate shared memory' or a Bus error.",
            fix,
        )
    if shm.free is not None and shm.free < shm.total // 4:
        return Check(
            "shared memory", WARN, value,
            "Less than a quarter is free: other jobs, or torch_* files left by killed workers, hold "
            "the rest.",
            f"look at `ls -la {shm.path}` and remove stale files of dead jobs; or {fix}",
        )
    return Check("shared memory", OK, value, "Room for the batches workers hand to the main process.")


def check_memory(facts: HostFacts) -> Check:
    info, cg = facts.meminfo, facts.cgroup
    swap = info.get("SwapTotal", 0)
    parts = [
        f"MemAvailable {human_bytes(info.get('MemAvailable'))} of {human_bytes(info.get('MemTotal'))}",
        f"swap {human_bytes(swap) if swap else 'none'}",
    ]
    if cg is not None:
        limit = human_bytes(cg.memory_limit) if cg.memory_limit is not None else "none"
        parts.append(f"cgroup v{cg.version} limit {limit}, usage {human_bytes(cg.memory_usage)}")
    value = "; ".join(parts)
    host_total = info.get("MemTotal")
    if cg and cg.memory_limit is not None:
        used = (cg.memory_usage or 0) / cg.memory_limit
        cache_note = " (v1 usage counts the page cache too)" if cg.version == 1 else ""
        detail = (
            f"This cgroup's limit ({human_bytes(cg.memory_limit)}), not the host's "
            f"{human_bytes(host_total)}, is what the OOM killer enforces: a worker past it is SIGKILLed."
        )
        if used > 0.9:
            return Check(
                "memory", WARN, value, f"{detail} It is {used:.0%} used{cache_note}.",
                "raise the container's memory limit, or lower num_workers, prefetch_factor or batch size",
            )
        return Check("memory", OK, value, detail)
    available = info.get("MemAvailable")
    if host_total and available is not None and available < host_total // 10:
        return Check(
            "memory", WARN, value, "Less than 10% of host memory is available; workers may be OOM-killed.",
            "stop other memory-hungry jobs, or lower num_workers / batch size",
        )
    return Check("memory", OK, value, "No cgroup memory limit: the host's available memory is the budget.")


def check_cpu(facts: HostFacts) -> Check:
    usable = usable_cpus(facts)
    cg = facts.cgroup
    quota = f"{cg.cpu_quota:g}" if cg and cg.cpu_quota else "none"
    value = (
        f"os.cpu_count()={facts.cpu_count}, affinity {facts.affinity}, cgroup quota {quota} "
        f"-> {usable} usable"
    )
    if facts.cpu_count and usable and facts.cpu_count > usable:
        return Check(
            "cpu", WARN, value,
            f"os.cpu_count() reports {facts.cpu_count} CPUs but this process may use {usable}: "
            f"num_workers=os.cpu_count() would start {facts.cpu_count} workers that fight over "
            f"{usable} CPUs.",
            f"base num_workers on {usable} (len(os.sched_getaffinity(0)), or the cgroup quota), "
            "and measure with `datalint bench`",
        )
    return Check(
        "cpu", OK, value,
        f"Base num_workers on {usable}; past the usable CPUs, more workers are usually slower.",
    )


def check_open_files(facts: HostFacts) -> Check:
    soft, hard = facts.rlimits.get("NOFILE", (-1, -1))
    value = (
        f"RLIMIT_NOFILE soft {_limit_text(soft)}, hard {_limit_text(hard)}; "
        f"sharing strategy {facts.sharing_strategy}"
    )
    if facts.sharing_strategy == "file_descriptor" and 0 <= soft < NOFILE_WARN:
        raise_to = _limit_text(hard) if hard < 0 or hard >= NOFILE_WARN else str(hard)
        return Check(
            "open files", WARN, value,
            "torch's file_descriptor strategy keeps an open fd per shared tensor the main process holds; "
            f"with fewer than {NOFILE_WARN} allowed, keeping batches alive ends in 'Too many open files'.",
            f"`ulimit -n {raise_to}` before training, or call "
            "torch.multiprocessing.set_sharing_strategy('file_system') at the start of the script",
        )
    return Check("open files", OK, value, "Enough descriptors for tensors shared by workers.")


def check_processes(facts: HostFacts) -> Check:
    nproc = facts.rlimits.get("NPROC", (-1, -1))[0]
    address = facts.rlimits.get("AS", (-1, -1))[0]
    memlock = facts.rlimits.get("MEMLOCK", (-1, -1))[0]
    pids = facts.cgroup.pids_limit if facts.cgroup else None
    value = (
        f"RLIMIT_NPROC {_limit_text(nproc)}, "
        f"cgroup pids.max {_limit_text(pids if pids is not None else -1)}, "
        f"RLIMIT_AS {_limit_text(address, bytes_=True)}, RLIMIT_MEMLOCK {_limit_text(memlock, bytes_=True)}"
    )
    process_cap = min(c for c in (nproc, pids if pids is not None else -1, 1 << 62) if c >= 0)
    if address >= 0:
        return Check(
            "process limits", WARN, value,
            "A virtual-memory cap (RLIMIT_AS): torch and its allocators reserve far more address space than "
            "they use, so workers fail with MemoryError or 'cannot allocate memory' well below real usage.",
            "remove the cap (`ulimit -v unlimited`) and limit real memory with the container's limit",
        )
    if process_cap < PIDS_WARN:
        return Check(
            "process limits", WARN, value,
            f"Only {process_cap} processes/threads allowed: every worker is a process with its own threads.",
            "raise `ulimit -u` or the container's pids limit (docker --pids-limit)",
        )
    return Check("process limits", OK, value, "Room for workers and their threads.")


def check_start_method(facts: HostFacts) -> Check:
    value = f"{facts.start_method} (Python {facts.python})"
    if facts.start_method == "fork":
        detail = (
            "Workers are forked: the dataset is copied, not pickled. Python 3.14 makes forkserver the Linux "
            "default, and then the dataset, collate_fn and worker_init_fn must pickle."
        )
    else:
        detail = (
            f"Workers start with {facts.start_method}: the dataset, collate_fn and worker_init_fn are "
            "pickled into every worker, and each worker re-imports the training script's modules."
        )
    return Check("start method", OK, value, detail, "`datalint check` flags what would not pickle")


def check_libraries(facts: HostFacts) -> Check:
    libs = facts.libraries
    shown = {name: libs.get(name) for name in ("torch", "numpy", "pillow")}
    shown["opencv"] = libs.get("opencv-python-headless") or libs.get("opencv-python")
    value = ", ".join(f"{name} {version or 'absent'}" for name, version in shown.items())
    if not shown["torch"]:
        return Check(
            "libraries", WARN, value, "torch is not installed: bench and datalint.torch need it.",
            install_line("torch"),
        )
    return Check("libraries", OK, value, "Versions to quote in a bug report.")


def check_threads(facts: HostFacts, num_workers: int | None = None) -> Check:
    env = facts.env
    shown = [f"{k}={env.get(k, 'unset')}" for k in THREAD_VARIABLES]
    shown.append(f"cv2 threads {facts.cv2_threads if facts.cv2_threads is not None else 'n/a'}")
    value = ", ".join(shown)
    if facts.libraries.get("tokenizers") and "TOKENIZERS_PARALLELISM" not in env:
        return Check(
            "threads", WARN, value,
            "Hugging Face tokenizers is installed and TOKENIZERS_PARALLELISM is unset: a tokenizer used "
            "before the workers fork can deadlock them (tokenizers then warns and disables itself).",
            "export TOKENIZERS_PARALLELISM=false",
        )
    usable = usable_cpus(facts) or 1
    cv2 = facts.cv2_threads or 0
    if num_workers and num_workers > 1 and cv2 > 1 and num_workers * cv2 > usable:
        return Check(
            "threads", WARN, value,
            f"OpenCV runs {cv2} threads in each worker: {num_workers} workers x {cv2} threads on {usable} "
            "CPUs oversubscribe them (torch limits its own threads in workers, OpenCV does not).",
            "call cv2.setNumThreads(0) in worker_init_fn (or at import in the dataset module)",
        )
    return Check("threads", OK, value, "torch sets one intra-op thread per worker on its own.")


def check_container(facts: HostFacts) -> Check:
    if facts.container is None:
        return Check("container", OK, "none detected", "The host's limits apply.")
    return Check(
        "container", OK, facts.container,
        "Inside a container the limits that count are the cgroup's and --shm-size, not the host's.",
    )


def _limit_text(value: int, bytes_: bool = False) -> str:
    if value < 0:
        return "unlimited"
    return human_bytes(value) if bytes_ else str(value)


# The explicit registry of host checks, in the order they are reported.
HOST_CHECKS: tuple[Callable[[HostFacts], Check], ...] = (
    check_shm,
    check_memory,
    check_cpu,
    check_open_files,
    check_processes,
    check_start_method,
    check_libraries,
    check_container,
)


def host_checks(facts: HostFacts | None = None, num_workers: int | None = None) -> list[Check]:
    """Every host check, judged on `facts` (by default, this machine's, read now)."""
    if facts is None:
        facts = read_host()
    # The threads check also weighs the worker count, so it follows the facts-only registry.
    return [*(check(facts) for check in HOST_CHECKS), check_threads(facts, num_workers)]


def worst_status(checks: Sequence[Check]) -> str:
    return max((c.status for c in checks), key=STATUS_ORDER.__getitem__, default=OK)


# --- the loader estimate ----------------------------------------------------------------------


@dataclass(frozen=True)
class LoaderConfig:
    batch_size: int
    num_workers: int
    prefetch_factor: int = 2
    pin_memory: bool = False

    @property
    def batches_in_flight(self) -> int:
        """Batches the workers may have produced and not yet handed over: W x P (none without workers)."""
        return self.num_workers * self.prefetch_factor

    @property
    def host_batches(self) -> int:
        """Batch-sized buffers alive at the peak: those in flight, the one in use, and one being pinned."""
        return self.batches_in_flight + 1 + (1 if self.pin_memory else 0)


@dataclass(frozen=True)
class SampleSizes:
    """What measuring real samples taught us."""

    measured: int
    failed: int
    p50: int
    p99: int
    largest: int
    worker_footprint: int = 0  # bytes a worker holds on its own, beyond the batches
    failures: tuple[str, ...] = ()  # "sample 17: crash SIGSEGV ...", one line each
    length: int | None = None  # the dataset's length, where a dataset was measured
    # what `datalint check` finds in the dataset's code that grows a worker after it was measured
    code: tuple[CodeFinding, ...] = ()


@dataclass(frozen=True)
class Limits:
    shm_bytes: int | None
    memory_bytes: int | None
    shm_source: str
    memory_source: str


@dataclass(frozen=True)
class Estimate:
    config: LoaderConfig
    sizes: SampleSizes
    limits: Limits
    batch_bytes_p50: int
    batch_bytes_p99: int
    shm_in_flight: int
    peak_host: int
    max_workers: int | None  # None: not even num_workers=0 fits
    max_batch_size: int | None
    formulas: Mapping[str, str] = field(default_factory=dict)
    usable_cpus: int | None = None  # the cap on max_workers, when known
    memory_max_workers: int | None = None  # what the limits alone would allow (up to 256)
    left_out: tuple[str, ...] = ()  # what the dataset's code adds that the estimate cannot measure
    cache_bound: int | None = None  # where a per-worker cache has no bound: what it can reach in all


def percentile(values: Sequence[int], q: float) -> int:
    """Nearest-rank percentile: a value that was really measured, never an interpolation."""
    ordered = sorted(values)
    if not ordered:
        return 0
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def sample_sizes(
    nbytes: Sequence[int], worker_footprint: int = 0, failures: Sequence[str] = ()
) -> SampleSizes:
    return SampleSizes(
        measured=len(nbytes),
        failed=len(failures),
        p50=percentile(nbytes, 50),
        p99=percentile(nbytes, 99),
        largest=max(nbytes, default=0),
        worker_footprint=worker_footprint,
        failures=tuple(failures),
    )


def spread_indices(length: int, count: int) -> list[int]:
    """`count` indices spread evenly over the dataset, first and last included (all when it is small)."""
    if length <= count:
        return list(range(length))
    if count == 1:
        return [0]
    return sorted({round(i * (length - 1) / (count - 1)) for i in range(count)})


def sizes_from_index(path: str | os.PathLike[str]) -> SampleSizes:
    """Sample sizes a scan already measured: every `ok` row's `nbytes` (`datalint docs index`)."""
    import sqlite3

    from datalint.errors import DatalintError

    if not Path(path).is_file():
        raise DatalintError(f"--index {path}: no such file; `datalint scan` writes one")
    try:
        with contextlib.closing(read.connect(Path(path))) as db:
            nbytes, failed = read.measured_sizes(db)
    except sqlite3.DatabaseError as exc:
        raise DatalintError(f"--index {path}: not a datalint scan index ({exc})") from None
    if not nbytes:
        raise DatalintError(f"--index {path}: no measured samples in it (status 'ok' with nbytes)")
    return sample_sizes(nbytes, failures=[f"{failed} samples failed in the scan"] if failed else ())


def measure_samples(spec: str, count: int = 32, timeout: float = 30.0, workers: int = 2) -> SampleSizes:
    """Load `count` real samples in the scan engine's isolated workers and size them with its probes.

    The engine forks its workers from this process, as a DataLoader does, so each worker's private
    memory (read from /proc while it runs) is what one DataLoader worker adds on its own.
    """
    from datalint.errors import DatalintError
    from datalint.host.processes import private_bytes
    from datalint.scan.runner import RunnerOptions, run
    from datalint.scan.sources import SourceDescription, build_source

    description = SourceDescription.make("dataset", spec)
    source = build_source(description)
    length = len(source)
    code = dataset_findings(source.dataset)
    indices = spread_indices(length, count)
    nbytes: list[int] = []
    failures: list[str] = []
    footprint = 0
    for rows in run(description, indices, len(indices), RunnerOptions(workers=workers, timeout=timeout)):
        for row in rows:
            if row["status"] == "ok":
                nbytes.append(int(row.get("nbytes") or 0))
            else:
                failures.append(f"sample {row['idx']}: {row['status']} {row.get('error_type')}: "
                                f"{row.get('error_message') or ''}".rstrip(": "))
        # Workers live while rows arrive; read them now, before the engine stops them.
        for pid in {row["worker"] for row in rows if row.get("worker")}:
            footprint = max(footprint, private_bytes(pid) or 0)
    if not nbytes:
        shown = "; ".join(failures[:3]) or "the dataset is empty"
        raise DatalintError(
            f"--dataset {spec}: none of the {len(indices)} samples measured loaded ({shown}); "
            "`datalint scan` lists every failing sample"
        )
    return replace(sample_sizes(nbytes, footprint, sorted(failures)), length=length, code=code)


def limits_from(facts: HostFacts, shm_bytes: int | None = None, memory_bytes: int | None = None) -> Limits:
    """The limits to judge against: the ones read here, unless overridden ("would it fit there?")."""
    return Limits(
        shm_bytes=shm_bytes if shm_bytes is not None else facts.shm.free,
        memory_bytes=memory_bytes if memory_bytes is not None else memory_budget(facts),
        shm_source="--shm-bytes" if shm_bytes is not None else f"free in {facts.shm.path}",
        memory_source="--memory-bytes" if memory_bytes is not None else "available memory (host and cgroup)",
    )


def shm_need(config: LoaderConfig, sample_bytes: int) -> int:
    return config.batches_in_flight * config.batch_size * sample_bytes


def host_need(config: LoaderConfig, sample_bytes: int, worker_footprint: int) -> int:
    return config.host_batches * config.batch_size * sample_bytes + config.num_workers * worker_footprint


def _fits(config: LoaderConfig, sizes: SampleSizes, limits: Limits) -> bool:
    shm_ok = limits.shm_bytes is None or shm_need(config, sizes.p99) <= HEADROOM * limits.shm_bytes
    memory_ok = limits.memory_bytes is None or (
        host_need(config, sizes.p99, sizes.worker_footprint) <= HEADROOM * limits.memory_bytes
    )
    return shm_ok and memory_ok


def largest_worker_count(
    config: LoaderConfig, sizes: SampleSizes, limits: Limits, cap: int = 256
) -> int | None:
    """The most workers whose batches in flight fit within the limits' headroom (monotone in W)."""
    best: int | None = None
    for workers in range(cap + 1):
        if not _fits(replace(config, num_workers=workers), sizes, limits):
            break
        best = workers
    return best


def largest_batch_size(config: LoaderConfig, sizes: SampleSizes, limits: Limits) -> int | None:
    """The largest batch size at this worker count that fits (closed form of the two inequalities)."""
    if sizes.p99 <= 0:
        return None
    bounds: list[float] = []
    if limits.shm_bytes is not None and config.batches_in_flight:
        bounds.append(HEADROOM * limits.shm_bytes / (config.batches_in_flight * sizes.p99))
    if limits.memory_bytes is not None:
        room = HEADROOM * limits.memory_bytes - config.num_workers * sizes.worker_footprint
        bounds.append(room / (config.host_batches * sizes.p99))
    if not bounds:
        return None
    largest = math.floor(min(bounds))
    return largest if largest >= 1 else None


def estimate_loader(
    config: LoaderConfig, sizes: SampleSizes, limits: Limits, usable_cpus: int | None = None
) -> Estimate:
    """The loader's memory against the limits; with `usable_cpus`, worker counts are capped by them
    (workers beyond the CPUs take turns on them: more memory, rarely more speed)."""
    batch_p99 = config.batch_size * sizes.p99
    shm = shm_need(config, sizes.p99)
    host = host_need(config, sizes.p99, sizes.worker_footprint)
    w, p, b = config.num_workers, config.prefetch_factor, config.batch_size
    pin = " + 1 (pinned copy)" if config.pin_memory else ""
    fitting = largest_worker_count(config, sizes, limits)
    formulas = {
        "batch_bytes": f"batch_size x p99 sample = {b} x {human_bytes(sizes.p99)} = {human_bytes(batch_p99)}",
        "shm_in_flight": (
            f"num_workers x prefetch_factor x batch bytes = {w} x {p} x {human_bytes(batch_p99)} "
            f"= {human_bytes(shm)}"
        ),
        "peak_host": (
            f"(num_workers x prefetch_factor + 1{pin}) x batch bytes + num_workers x worker footprint = "
            f"{config.host_batches} x {human_bytes(batch_p99)} + {w} x {human_bytes(sizes.worker_footprint)} "
            f"= {human_bytes(host)}"
        ),
        "fits": (
            f"shm in flight <= {HEADROOM:.0%} of {limits.shm_source} ({human_bytes(limits.shm_bytes)}) and "
            f"peak host <= {HEADROOM:.0%} of {limits.memory_source} ({human_bytes(limits.memory_bytes)})"
        ),
    }
    return Estimate(
        config=config,
        sizes=sizes,
        limits=limits,
        batch_bytes_p50=config.batch_size * sizes.p50,
        batch_bytes_p99=batch_p99,
        shm_in_flight=shm,
        peak_host=host,
        max_workers=_capped(fitting, usable_cpus),
        max_batch_size=largest_batch_size(config, sizes, limits),
        formulas=formulas,
        usable_cpus=usable_cpus,
        memory_max_workers=fitting,
        left_out=tuple(left_out(sizes.code, sizes.length, sizes.p50, config.num_workers)),
        cache_bound=cache_bound(sizes.code, sizes.length, sizes.p50, config.num_workers),
    )


def _capped(workers: int | None, usable_cpus: int | None) -> int | None:
    return workers if workers is None or not usable_cpus else min(workers, usable_cpus)


def _judge(need: int, limit: int | None) -> str:
    if limit is None or need <= HEADROOM * limit:
        return OK
    return WARN if need <= limit else FAIL


def _what_fits(estimate: Estimate) -> str:
    cfg = estimate.config
    workers = {None: "no worker count", 0: "only num_workers=0"}.get(
        estimate.max_workers, f"num_workers <= {estimate.max_workers}{_cpu_bound(estimate)}"
    )
    batch = "no batch size" if estimate.max_batch_size is None else f"batch_size <= {estimate.max_batch_size}"
    return f"{workers} at batch_size={cfg.batch_size}, or {batch} at num_workers={cfg.num_workers}"


def _cpu_bound(estimate: Estimate) -> str:
    """' (the usable CPUs)' when the CPUs, not memory, set the largest worker count."""
    capped = estimate.memory_max_workers != estimate.max_workers
    return f" (the {estimate.usable_cpus} usable CPUs)" if capped else ""


def check_worker_count(estimate: Estimate) -> Check:
    """More workers than usable CPUs: they take turns, each holding its own batches in memory."""
    workers, usable = estimate.config.num_workers, estimate.usable_cpus
    value = f"num_workers={workers} on {usable if usable else 'unknown'} usable CPU(s)"
    if usable and workers > usable:
        return Check(
            "loader workers", WARN, value,
            f"{workers} workers on {usable} usable CPUs take turns: each holds its own prefetched batches "
            "and copy of the dataset, and loading is rarely faster than with one worker per CPU.",
            f"num_workers={usable} or fewer; `datalint bench --workers {_bench_counts(usable)}` measures "
            "which is fastest",
        )
    return Check("loader workers", OK, value, "At most one worker per usable CPU.")


def _bench_counts(usable: int) -> str:
    counts = sorted({0, 1, max(1, usable // 2), usable})
    return ",".join(map(str, counts))


def estimate_checks(estimate: Estimate) -> list[Check]:
    """The loader config judged against the limits: what is in flight in shm, and the host peak."""
    limits, cfg = estimate.limits, estimate.config
    shm_status = _judge(estimate.shm_in_flight, limits.shm_bytes)
    host_status = _judge(estimate.peak_host, limits.memory_bytes)
    fits = _what_fits(estimate)
    shm_gib = suggested_shm_gib(estimate.shm_in_flight)
    shm_advice = "" if shm_status == OK else f"{fits}; or {shm_fix(shm_gib)}"
    host_fix = "" if host_status == OK else f"{fits}; or raise the memory limit"
    return [
        Check(
            "loader shared memory", shm_status,
            f"{human_bytes(estimate.shm_in_flight)} in flight of {human_bytes(limits.shm_bytes)} "
            f"({limits.shm_source})",
            f"{cfg.batches_in_flight} batches of up to {human_bytes(estimate.batch_bytes_p99)} wait in "
            f"/dev/shm: {estimate.formulas['shm_in_flight']}",
            shm_advice,
        ),
        Check(
            "loader host memory", host_status,
            f"{human_bytes(estimate.peak_host)} peak of {human_bytes(limits.memory_bytes)} "
            f"({limits.memory_source})",
            estimate.formulas["peak_host"],
            host_fix,
        ),
        *([check_worker_count(estimate)] if estimate.usable_cpus else []),
        *([check_left_out(estimate)] if estimate.left_out else []),
    ]


def check_left_out(estimate: Estimate) -> Check:
    """What the dataset's code adds to each worker after the samples were measured: a cache with no
    bound fails when what it can reach does not fit; copy-on-read is a warning (it has no bound to
    compute, only the dataset's containers)."""
    limit = estimate.limits.memory_bytes
    bound = estimate.cache_bound
    too_big = bound is not None and limit is not None and bound > HEADROOM * limit
    status = FAIL if too_big else WARN
    value = ("a per-worker cache with no bound" if bound is not None else
             "memory the estimate cannot measure")
    if bound is not None:
        value += f": up to {human_bytes(bound)} in all workers, of {human_bytes(limit)}"
    return Check(
        "loader code", status, value, "\n".join(estimate.left_out),
        "bound the cache (functools.lru_cache(maxsize=N), an eviction) or fill it once before the "
        "workers start; keep per-sample data in numpy arrays, not lists or dicts of objects "
        "(`datalint rule DL302`, `datalint rule DL301`)",
    )


def estimate_as_dict(estimate: Estimate) -> dict[str, Any]:
    data = asdict(estimate)
    data["fits"] = {"max_workers": estimate.max_workers, "max_batch_size": estimate.max_batch_size}
    data["headroom"] = HEADROOM
    return data


# --- after a crash: `datalint doctor --after` -------------------------------------------------

# torch names its shared-memory files /torch_<creator pid>_<random>_<counter> (libshm)
KERNEL_WINDOW_SECONDS = 3600


@dataclass(frozen=True)
class Leftover:
    """An orphaned or zombie process that looks like a DataLoader worker."""

    pid: int
    ppid: int
    state: str
    rss: int | None
    reason: str
    fix: str


@dataclass(frozen=True)
class AfterFacts:
    kernel_lines: tuple[str, ...]
    kernel_note: str
    memory_events: Mapping[str, int]
    segments: tuple[Segment, ...]
    leftovers: tuple[Leftover, ...]


def clean_segments(segments: Sequence[Segment]) -> list[tuple[Segment, str]]:
    """Unlink the leaked segments only (checked again just before), each with what happened."""
    results = []
    for segment in segments:
        if not segment.leaked:
            continue
        try:
            os.unlink(segment.path)
            results.append((segment, "removed"))
        except OSError as exc:
            results.append((segment, f"not removed: {exc.strerror}"))
    return results


def read_leftovers(proc: Path = Path("/proc")) -> list[Leftover]:
    """Zombie workers a live parent never reaped, and torch processes whose parent is gone."""
    from datalint.host.processes import all_processes, maps_library, owner, read_memory

    stats = all_processes(proc)
    uid = os.getuid()
    leftovers = []
    for stat in stats.values():
        if stat.pid == os.getpid() or (not stat.comm.startswith("python") and stat.comm != "pt_data_worker"):
            continue
        if owner(stat.pid, proc) != uid:
            continue
        parent = stats.get(stat.ppid)
        if stat.state == "Z" and parent is not None and parent.pid != 1:
            leftovers.append(Leftover(
                stat.pid, stat.ppid, "zombie", None,
                f"exited, never reaped by its parent {parent.comm} (pid {parent.pid})",
                f"kill -TERM {parent.pid}   # the parent; a zombie holds no memory, only its pid",
            ))
        elif stat.ppid == 1 and stat.state != "Z" and maps_library(stat.pid, "libtorch", proc):
            rss, _ = read_memory(stat.pid, proc)
            leftovers.append(Leftover(
                stat.pid, stat.ppid, "orphan", rss,
                "a torch process whose parent is gone (reparented to init)",
                f"kill -TERM {stat.pid}; sleep 10; kill -0 {stat.pid} 2>/dev/null && kill -KILL {stat.pid}",
            ))
    return leftovers


def _recent_kernel_lines(
    lines: Sequence[str], now: float, window: float = KERNEL_WINDOW_SECONDS
) -> list[str]:
    """dmesg -T lines ([Tue Dec  1 10:00:00 2026] ...) of the last `window` seconds; undated ones kept."""
    recent = []
    for line in lines:
        stamp = line[1:line.find("]")] if line.startswith("[") else ""
        try:
            when = time.mktime(time.strptime(" ".join(stamp.split()), "%a %b %d %H:%M:%S %Y"))
        except ValueError:
            recent.append(line)
            continue
        if now - when <= window:
            recent.append(line)
    return recent


def read_after(shm_dir: str = "/dev/shm", proc: Path = Path("/proc"), root: Path = Path("/")) -> AfterFacts:
    from datalint.flight.diagnosis import kernel_log
    from datalint.host.cgroup import read_memory_events

    lines, note = kernel_log()
    return AfterFacts(
        kernel_lines=tuple(_recent_kernel_lines(lines, time.time())),
        kernel_note=note,
        memory_events=read_memory_events(root),
        segments=tuple(read_segments(shm_dir, proc)),
        leftovers=tuple(read_leftovers(proc)),
    )


def after_checks(facts: AfterFacts) -> list[Check]:
    """What a crash left behind, as checks: kernel OOM records, cgroup counters, shm, processes."""
    return [check(facts) for check in AFTER_CHECKS]


def _check_kernel(facts: AfterFacts) -> Check:
    if facts.kernel_note not in ("dmesg", "/dev/kmsg"):
        return Check("kernel log", WARN, "not readable", facts.kernel_note)
    oom = [line for line in facts.kernel_lines if re.search(r"killed process|out of memory", line, re.I)]
    if oom:
        fix = ("fewer workers or a smaller batch: "
               "`datalint doctor --dataset SPEC --batch-size B --num-workers W`")
        found = f"{len(oom)} OOM record(s) in the last hour"
        return Check("kernel log", FAIL, found, "\n".join(oom[-10:]), fix)
    return Check("kernel log", OK, f"no OOM record in the last hour ({facts.kernel_note})", "")


def _check_memory_events(facts: AfterFacts) -> Check:
    events = dict(facts.memory_events)
    if not events:
        return Check("cgroup memory events", OK, "no memory cgroup counters here", "")
    text = ", ".join(f"{key} {value}" for key, value in sorted(events.items()))
    if events.get("oom_kill"):
        return Check("cgroup memory events", FAIL, text,
                     "the cgroup's OOM killer ended processes since the cgroup was made (no times kept)",
                     "`datalint run -- python train.py` records the memory curve up to the next kill")
    return Check("cgroup memory events", OK, text, "no OOM kill counted in this cgroup")


def _check_leaked_shm(facts: AfterFacts) -> Check:
    leaked = [s for s in facts.segments if s.leaked]
    total = sum(s.size for s in leaked)
    if not leaked:
        return Check("leaked shared memory", OK, f"none of {len(facts.segments)} segment(s)", "")
    listed = "\n".join(
        f"{s.path}  {human_bytes(s.size)}  {s.age / 60:.0f} min old  (creator pid {s.creator} gone)"
        for s in leaked[:20]
    )
    more = f"\n... and {len(leaked) - 20} more" if len(leaked) > 20 else ""
    return Check("leaked shared memory", WARN, f"{len(leaked)} segment(s), {human_bytes(total)}",
                 listed + more, "datalint doctor --after --clean-shm   # removes only these")


def _check_leftovers(facts: AfterFacts) -> Check:
    if not facts.leftovers:
        return Check("leftover workers", OK, "no orphaned or zombie DataLoader worker", "")
    detail = "\n".join(
        f"pid {p.pid} ({p.state}, {human_bytes(p.rss) if p.rss else 'no memory'}): {p.reason}"
        for p in facts.leftovers
    )
    fixes = "; ".join(p.fix for p in facts.leftovers[:5])
    return Check("leftover workers", WARN, f"{len(facts.leftovers)} process(es)", detail, fixes)


AFTER_CHECKS: tuple[Callable[[AfterFacts], Check], ...] = (
    _check_kernel,
    _check_memory_events,
    _check_leaked_shm,
    _check_leftovers,
)
