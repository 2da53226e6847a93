"""Per-shard index files: two writers in parallel plus one merge, against one writer of today.

Synthetic rows shaped like an image scan's (a key path, status, duration, sizes, a signature and
an info JSON: ~250 bytes per row in the index). Three measurements on ROWS rows:

1. one writer (`store.write_samples`, batches of 2,000) into one index: today's path;
2. WORKERS processes writing SHARDS per-shard index files in parallel (same schema), as the
   workers of a sharded scan would;
3. `datalint.scan.shards.merge_shard_indexes` of those files into one index: time (copy, then
   the secondary indexes) and the merging process's peak RSS.

    .venv/bin/python benchmarks/laion_merge.py [--rows 1000000] [--shards 20] [--workers 2]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import resource
import tempfile
import time
from pathlib import Path

from datalint.scan import store
from datalint.scan.shards import merge_shard_indexes

BATCH = 2000


def rows(first: int, last: int) -> list[tuple[object, ...]]:
    made = []
    for idx in range(first, last):
        made.append(
            store.sample_values(
                {
                    "idx": idx, "key": f"train-{idx // 10000:06d}.tar/{idx:09d}", "status": "ok", "run_id": 1,
                    "duration": 0.0031, "nbytes": 150528,
                    "signature": {"image": {"dtype": "uint8", "shape": [224, 224, 3]}, "label": "int"},
                    "info": {"file_bytes": 40000 + idx % 977, "format": "JPEG", "width": 256, "height": 256},
                    "worker": 1234, "measured_at": "2026-12-01T10:00:00+00:00",
                }
            )
        )  # fmt: skip
    return made


def write_index(path: Path, first: int, last: int) -> None:
    db = store.open_index(path)
    for start in range(first, last, BATCH):
        store.write_samples(db, rows(start, min(start + BATCH, last)))
    db.conn.close()


def write_shards(job: tuple[Path, list[tuple[int, int]]]) -> None:
    folder, ranges = job
    for first, last in ranges:
        write_index(folder / f"{first:09d}-{last - 1:09d}.db", first, last)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--shards", type=int, default=20)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    size = args.rows // args.shards
    ranges = [(n * size, (n + 1) * size) for n in range(args.shards)]
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        started = time.perf_counter()
        write_index(folder / "single.db", 0, args.rows)
        single = time.perf_counter() - started
        shards = folder / "shards"
        shards.mkdir()
        jobs = [(shards, ranges[w :: args.workers]) for w in range(args.workers)]
        started = time.perf_counter()
        with multiprocessing.get_context("fork").Pool(args.workers) as pool:
            pool.map(write_shards, jobs)
        parallel = time.perf_counter() - started
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        result = merge_shard_indexes(folder / "merged.db", sorted(shards.glob("*.db")), run_id=1)
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        merge = result.copy_seconds + result.index_seconds
        print(
            json.dumps(
                {
                    "rows": args.rows,
                    "bytes_per_row": round((folder / "merged.db").stat().st_size / args.rows),
                    "single_writer_seconds": round(single, 1),
                    "single_writer_rows_per_s": round(args.rows / single),
                    f"{args.workers}_shard_writers_seconds": round(parallel, 1),
                    f"{args.workers}_shard_writers_rows_per_s": round(args.rows / parallel),
                    "merge_copy_seconds": round(result.copy_seconds, 1),
                    "merge_index_seconds": round(result.index_seconds, 1),
                    "merge_rows_per_s": round(args.rows / merge),
                    "shard_writers_plus_merge_rows_per_s": round(args.rows / (parallel + merge)),
                    "merge_peak_rss_mib": round(peak, 1),
                    "peak_rss_before_merge_mib": round(before, 1),
                },
                indent=1,
            )
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
