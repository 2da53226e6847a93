"""`datalint bench` and `datalint doctor` against what a user would otherwise do by hand.

    .venv/bin/python benchmarks/doctor_bench.py

1. Overhead: the same batches timed by a plain `for batch in loader` loop (what one writes by hand)
   and by `datalint bench`'s run, whose monitor thread reads /proc every 50 ms (PSS every second);
   plus the cost of one monitor reading with the workers alive, without and with PSS.
2. Prediction: doctor's shared memory in flight (num_workers x prefetch_factor x batch bytes)
   against the /dev/shm peak bench measures with the prefetch queue full.
3. Doctor's wall time, as a user runs it (a fresh interpreter), with and without a dataset.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SPEC = f"{ROOT / 'fixtures/datasets/bench_tensors.py'}:make(512, [3, 64, 64], 0.001)"

from datalint.diagnosis.bench import (  # noqa: E402
    BenchConfig,
    Monitor,
    bench_indices,
    make_loader,
    quiet_worker_count,
    run_once,
)
from datalint.diagnosis.doctor import LoaderConfig, estimate_loader, human_bytes, limits_from, read_host  # noqa: E402
from datalint.diagnosis.doctor import sample_sizes as sizes_of  # noqa: E402
from datalint.scan.probes import nbytes  # noqa: E402
from datalint.scan.specs import resolve_spec  # noqa: E402


def by_hand(dataset: object, config: BenchConfig, workers: int) -> float:
    """samples/s of the same batches, timed the way one does it without a tool."""
    indices = bench_indices(len(dataset), config.batch_size, config.loaded_batches)  # type: ignore[arg-type]
    loader = make_loader(dataset, indices, config, workers)
    batches = iter(loader)
    for _ in range(config.warmup_batches):
        next(batches)
    start = time.perf_counter()
    for _ in range(config.batches):
        next(batches)
    elapsed = time.perf_counter() - start
    del batches
    return config.batches * config.batch_size / elapsed


def overhead(dataset: object) -> None:
    print("## 1. overhead: plain loop vs datalint bench (same batches, medians of 3)")
    print("| workers | plain loop samples/s | bench samples/s | bench / plain |")
    print("|---|---|---|---|")
    config = BenchConfig(batch_size=16, batches=30, workers=(0, 2), warmup=2)
    for workers in config.workers:
        plain, bench = [], []
        for _ in range(3):
            plain.append(by_hand(dataset, config, workers))
            speed = run_once(dataset, config, workers).samples_per_s
            assert speed is not None
            bench.append(speed)
        p, b = statistics.median(plain), statistics.median(bench)
        print(f"| {workers} | {p:,.0f} | {b:,.0f} | {b / p:.2f} |")
    loader = make_loader(dataset, bench_indices(512, 16, 64), config, 4)
    with quiet_worker_count():
        batches = iter(loader)
        next(batches)
        with Monitor() as monitor:
            for with_pss in (False, True):
                start = time.perf_counter()
                for _ in range(10):
                    monitor.sample(with_pss)
                per_reading = (time.perf_counter() - start) / 10
                what = "statm, stat, fd list" + (", smaps_rollup (PSS)" if with_pss else "")
                print(f"\none monitor reading, main + 4 workers ({what}): {per_reading * 1e3:.2f} ms")
        del batches


def prediction(dataset: object) -> None:
    print("\n## 2. doctor's shm prediction vs bench's measured peak")
    print("| batch | workers | prefetch | predicted in flight | measured shm peak | measured / predicted |")
    print("|---|---|---|---|---|---|")
    sample = nbytes(dataset[1])  # type: ignore[index]
    limits = limits_from(read_host())
    for batch, workers, prefetch in [(16, 1, 2), (16, 2, 2), (32, 2, 2), (16, 4, 2), (16, 2, 4)]:
        estimate = estimate_loader(LoaderConfig(batch, workers, prefetch), sizes_of([sample]), limits)
        run = run_once(dataset, BenchConfig(batch_size=batch, batches=4, prefetch_factor=prefetch,
                                            workers=(workers,)), workers)
        ratio = run.shm_peak_bytes / estimate.shm_in_flight
        print(f"| {batch} | {workers} | {prefetch} | {human_bytes(estimate.shm_in_flight)} | "
              f"{human_bytes(run.shm_peak_bytes)} | {ratio:.2f} |")


def doctor_wall_time() -> None:
    print("\n## 3. `datalint doctor` wall time (fresh interpreter, median of 3)")
    print("| command | seconds |")
    print("|---|---|")
    commands = {
        "datalint doctor": [],
        "datalint doctor --dataset ... (32 samples, 2 isolated workers)": [
            "--dataset", SPEC, "--batch-size", "64", "--num-workers", "2"],
    }
    for label, args in commands.items():
        times = []
        for _ in range(3):
            start = time.perf_counter()
            command = [sys.executable, "-m", "datalint", "doctor", *args]
            subprocess.run(command, capture_output=True, check=False)
            times.append(time.perf_counter() - start)
        print(f"| {label} | {statistics.median(times):.2f} |")


def main() -> None:
    dataset = resolve_spec(SPEC)
    overhead(dataset)
    prediction(dataset)
    doctor_wall_time()


if __name__ == "__main__":
    main()
