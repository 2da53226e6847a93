"""Cost per crash: a dataset where 1% of the samples segfault, against the same dataset clean,
and, for scale, one restart of a joblib/loky pool whose workers import torch (the alternative).

    .venv/bin/python benchmarks/scan_crashes.py --samples 2000 --every 100 --workers 2

cost per crash = (scan time with crashes - scan time clean) / number of crashes, in wall time and
in CPU time (scanner plus workers: steadier than wall time on a shared machine). Each sample does
~1 ms of CPU work; every `every`-th sample then reads address 0.
"""

from __future__ import annotations

import argparse
import contextlib
import resource
import tempfile
import time
from pathlib import Path

import datalint
from datalint.scan.sources import SourceDescription, build_source

ROOT = Path(__file__).resolve().parents[1]
SPEC = str(ROOT / "fixtures" / "datasets" / "scan_bench.py") + ":crashing({samples}, every={every})"


def time_scan(spec: str, workers: int, db: Path) -> tuple[float, float, dict[str, int]]:
    """(wall seconds, CPU seconds of the scanner and its reaped workers, statuses)."""
    before = _cpu()
    started = time.perf_counter()
    summary = datalint.scan(spec, db=db, workers=workers, rescan=True)
    return time.perf_counter() - started, _cpu() - before, summary.statuses


def _cpu() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def segfault_in_worker(index: int) -> int:
    import ctypes

    import torch  # noqa: F401  (a dataset module that imports torch, as most do)

    if index == 1:
        ctypes.string_at(0)
    return index


def loky_restart(workers: int) -> float:
    """Seconds for the first call after a worker crash: joblib kills the pool and starts fresh
    interpreters, which import torch again (2-3 s on an idle machine)."""
    from joblib import Parallel, delayed
    from joblib.externals.loky.process_executor import TerminatedWorkerError

    parallel = Parallel(n_jobs=workers, backend="loky")
    parallel(delayed(segfault_in_worker)(i) for i in (0, 2))  # warm: workers up, torch imported
    with contextlib.suppress(TerminatedWorkerError):
        parallel(delayed(segfault_in_worker)(i) for i in (0, 1))
    started = time.perf_counter()
    parallel(delayed(segfault_in_worker)(i) for i in (0, 2))
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=2000)
    parser.add_argument("--every", type=int, default=100)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    for every in (0, args.every):  # built (imported) before timing, as the DataLoader would get it
        build_source(
            SourceDescription.make("dataset", SPEC.format(samples=args.samples, every=every), labels=())
        )
    clean_spec, faulty_spec = SPEC.format(samples=args.samples, every=0), SPEC.format(**vars(args))
    runs: dict[str, list[tuple[float, float]]] = {"clean": [], "faulty": []}
    with tempfile.TemporaryDirectory() as folder:
        for _ in range(args.repeat):  # alternated, best of each: a shared machine is noisy
            for name, spec in (("clean", clean_spec), ("faulty", faulty_spec)):
                wall, cpu, statuses = time_scan(spec, args.workers, Path(folder) / f"{name}.db")
                runs[name].append((wall, cpu))
    crashes = statuses["crash"]
    assert crashes == args.samples // args.every, statuses
    clean_wall, faulty_wall = min(w for w, _ in runs["clean"]), min(w for w, _ in runs["faulty"])
    clean_cpu, faulty_cpu = min(c for _, c in runs["clean"]), min(c for _, c in runs["faulty"])
    restart_ms = 1000 * loky_restart(args.workers)
    wall_ms, cpu_ms = 1000 * (faulty_wall - clean_wall) / crashes, 1000 * (faulty_cpu - clean_cpu) / crashes
    print("| samples | crashes | clean: wall / CPU (s) | with crashes: wall / CPU (s) ", end="")
    print("| per crash: wall / CPU (ms) | loky restart (ms) |")
    print("|---|---|---|---|---|---|")
    clean, faulty = f"{clean_wall:.2f} / {clean_cpu:.2f}", f"{faulty_wall:.2f} / {faulty_cpu:.2f}"
    per_crash = f"{wall_ms:.0f} / {cpu_ms:.0f}"
    print(f"| {args.samples:,} | {crashes} | {clean} | {faulty} | {per_crash} | {restart_ms:.0f} |")


if __name__ == "__main__":
    main()
