"""`datalint scan --backend dask` against the local engine, on the same dataset and the same CPUs.

    .venv/bin/python benchmarks/scan_dask.py --samples 20000 --work 0.001 --workers 2

Dataset: `fixtures/datasets/scan_bench.py:crashing` (numpy only: ~`--work` seconds of CPU per
sample, then a small array; with `--every N` every Nth sample segfaults). For each case the wall
time of the whole `datalint.scan(...)` call: isolating and probing every sample, writing the index,
deriving findings, writing the quarantine list. Three engines:

* local: the default engine, `--workers` processes forked from the scanner;
* dask, own cluster: `backend="dask"` without a scheduler, so the scan starts a LocalCluster of
  `--workers` processes and stops it (cluster start and worker imports included);
* dask, existing cluster: the same LocalCluster started beforehand and passed as `scheduler=`,
  which is how a user with a cluster runs it (its start is reported apart).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

import datalint
from datalint.scan.dask_backend import local_cluster

ROOT = Path(__file__).resolve().parents[1]
DATASET = ROOT / "fixtures" / "datasets" / "scan_bench.py"


def timed_scan(spec: str, db: Path, **engine: Any) -> tuple[float, Any]:
    started = time.perf_counter()
    summary = datalint.scan(spec, db=db, rescan=True, timeout=30.0, **engine)
    return time.perf_counter() - started, summary


def row(name: str, samples: int, seconds: float, summary: Any, note: str = "") -> str:
    statuses = summary.statuses
    outcome = f"ok {statuses['ok']:,}, crash {statuses['crash']:,}"
    return f"| {name} | {samples:,} | {seconds:.2f} | {samples / seconds:,.0f} | {outcome} | {note} |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=20000)
    parser.add_argument("--work", type=float, default=0.001, help="CPU seconds per sample")
    parser.add_argument("--every", type=int, default=100, help="crashing case: a segfault every N samples")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    clean = f"{DATASET}:crashing({args.samples}, every=0, work={args.work})"
    crashing = f"{DATASET}:crashing({args.samples}, every={args.every}, work={args.work})"
    workers = args.workers
    print("| engine | samples | wall (s) | samples/s | outcomes | note |")
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as folder:
        db = Path(folder) / "bench.db"
        seconds, summary = timed_scan(clean, db, workers=workers)
        print(row(f"local, {workers} workers", args.samples, seconds, summary), flush=True)
        seconds, summary = timed_scan(clean, db, workers=workers, backend="dask")
        note = "cluster start and stop included"
        print(row(f"dask, own LocalCluster of {workers}", args.samples, seconds, summary, note), flush=True)
        started = time.perf_counter()
        with local_cluster(workers) as cluster:
            started = time.perf_counter() - started
            address = cluster.scheduler_address
            timed_scan(f"{DATASET}:crashing(64, every=0, work=0)", db, backend="dask", scheduler=address)
            seconds, summary = timed_scan(clean, db, workers=workers, backend="dask", scheduler=address)
            note = f"cluster started beforehand in {started:.1f} s, workers warmed by a 64-sample scan"
            print(row(f"dask, existing LocalCluster of {workers}", args.samples, seconds, summary, note))
            seconds, summary = timed_scan(crashing, db, workers=workers, backend="dask", scheduler=address)
            note = f"a segfault every {args.every} samples"
            print(row(f"dask, existing LocalCluster of {workers}", args.samples, seconds, summary, note))
        seconds, summary = timed_scan(crashing, db, workers=workers)
        note = f"a segfault every {args.every} samples"
        print(row(f"local, {workers} workers", args.samples, seconds, summary, note), flush=True)


if __name__ == "__main__":
    main()
