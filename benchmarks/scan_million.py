"""A million trivial samples: the scanner's memory stays flat and the index writer outruns the scan.

    .venv/bin/python benchmarks/scan_million.py --samples 1000000 --workers 2

Runs `datalint scan` as a child process and samples its resident memory (VmRSS) twice a second
together with the rows committed so far; reports the RSS once 5% of the rows are in and at the
end of the scan (growth), the scan rate, and the rate at which the index writer alone stores the
same rows (`store.write_samples`, wall and CPU time).
"""

from __future__ import annotations

import argparse
import contextlib
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def rss_mib(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def committed(db: Path) -> int:
    try:
        with contextlib.closing(sqlite3.connect(db, timeout=1)) as connection:
            return int(connection.execute("SELECT COUNT(*) FROM samples").fetchone()[0])
    except sqlite3.Error:
        return 0


def watch_scan(samples: int, workers: int, db: Path) -> tuple[float, list[tuple[float, int, float]]]:
    spec = f"{ROOT}/fixtures/datasets/scan_bench.py:plain({samples})"
    command = [sys.executable, "-m", "datalint", "scan", "--dataset", spec, "--db", str(db),
               "--workers", str(workers), "--progress", "none", "--format", "json"]  # fmt: skip
    started = time.perf_counter()
    child = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL)
    trace: list[tuple[float, int, float]] = []  # (seconds, rows committed, RSS MiB)
    while child.poll() is None:
        rss = rss_mib(child.pid)
        if rss is not None:
            trace.append((time.perf_counter() - started, committed(db), rss))
        time.sleep(0.5)
    return time.perf_counter() - started, trace


def writer_rate(rows: int, folder: Path) -> tuple[float, float]:
    from datalint.index import store

    db = store.open_index(folder / "writer.db")
    signature = '{"type":"dict","fields":{"x":{"type":"float"},"y":{"type":"int"}}}'
    stamp = "2026-01-01T00:00:00+00:00"
    values = [
        (i, None, "ok", 1, 1e-5, 16, signature, 0, 0, 0, 0, None, None, None, None, None, None, 1, stamp)
        for i in range(rows)
    ]  # fmt: skip
    wall, cpu = time.perf_counter(), time.process_time()
    for start in range(0, rows, 2000):  # the scan's batch size
        store.write_samples(db, values[start : start + 2000])
    return rows / (time.perf_counter() - wall), rows / (time.process_time() - cpu)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=1_000_000)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        elapsed, trace = watch_scan(args.samples, args.workers, Path(folder) / "million.db")
        wall_rate, cpu_rate = writer_rate(200_000, Path(folder))
    scanning = [point for point in trace if point[1] > 0]
    early = next(point for point in scanning if point[1] >= args.samples * 0.05)
    last = scanning[-1]
    peak = max(point[2] for point in scanning)
    print(
        "| samples | scan (s) | samples/s | RSS at 5% (MiB) | RSS at end (MiB) | peak (MiB) "
        "| writer rows/s (wall) | writer rows/s (CPU) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    rate = args.samples / elapsed
    print(
        f"| {args.samples:,} | {elapsed:.1f} | {rate:,.0f} | {early[2]:.0f} | {last[2]:.0f} | {peak:.0f} "
        f"| {wall_rate:,.0f} | {cpu_rate:,.0f} |"
    )
    step = max(1, len(trace) // 12)
    print(f"\nRSS trace (s, rows, MiB): {[(round(t), n, round(r)) for t, n, r in trace[::step]]}")


if __name__ == "__main__":
    main()
