"""Per-shard index files: two writers in parallel plus one merge, against one writer of today.

Synthetic rows shaped like an image scan's (a key path, status, duration, sizes, a signature and
an info JSON: ~250 bytes per row in the index). Three measurements on ROWS rows:

1. one writer (`store.write_samples`, batches of 2,000) into one index: today's path;
2. WORKERS processes writing SHARDS per-shard index files in parallel (same schema), as the
   workers of a sharded scan would;
3. `datalint.index.shards.merge_shard_indexes` of those files into one index: time (copy, then
   the secondary indexes) and the merging process's peak RSS;
4. the population summaries (datalint/scan/summaries.py): each file's, as its writer computes it
   (`--generate sql` files get theirs the same way), their merge (read from the files, tree
   reduce), and the policy's population built from the merged summary against a pass over the
   merged index (`policy.population`), each in a fresh process, time and peak RSS
   (`--population` picks which; the pass over the index sorts every row by signature).

`--generate sql` writes the shard files with one `INSERT ... SELECT` over a recursive CTE per file
(the same row shape, built by SQLite instead of Python): ~10x faster, for the sizes where only the
merge is measured (1e7-1e8 rows); `--skip-single` leaves out step 1 there. `--folder` puts the
files on a disk of your choice (the merged index is as large as the shard files together).

    .venv/bin/python benchmarks/laion_merge.py [--rows 1000000] [--shards 20] [--workers 2]
    .venv/bin/python benchmarks/laion_merge.py --rows 40000000 --shards 400 --generate sql --skip-single
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing
import os
import resource
import sqlite3
import tempfile
import time
from pathlib import Path
from typing import Any

from laion_common import in_fresh_process, peak_rss_mib

from datalint.index import store
from datalint.index.shards import merge_shard_indexes
from datalint.scan import policy, summaries

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


def write_shards(job: tuple[Path, list[tuple[int, int]], str]) -> float:
    """Writes the files of one worker; returns the seconds its writers spent on summaries."""
    folder, ranges, generate = job
    summarising = 0.0
    for first, last in ranges:
        path = folder / f"{first:09d}-{last - 1:09d}.db"
        if generate == "sql":
            write_generated(path, first, last)
        else:
            write_index(path, first, last)
        started = time.perf_counter()
        with contextlib.closing(sqlite3.connect(path)) as connection:
            summaries.write_summary(connection, summaries.summarize(connection))
        summarising += time.perf_counter() - started
    return summarising


# The row of `rows()` built by SQLite: the same columns, lengths and JSON texts, with the duration,
# size and file size varying by sample as a real scan's do.
_GENERATE = """
INSERT INTO samples (idx, key, status, run_id, duration, nbytes, signature, info, worker, measured_at)
WITH RECURSIVE n(i) AS (SELECT ? UNION ALL SELECT i + 1 FROM n WHERE i < ?)
SELECT i, printf('train-%06d.tar/%09d', i / 10000, i), 'ok', 1, 0.002 + (i * 7919 % 1000) * 1e-5,
       150528 + (i * 104729 % 13) * 1024, ?,
       printf('{"file_bytes":%d,"format":"JPEG","width":256,"height":256}', 40000 + i % 977),
       1234, '2026-12-01T10:00:00+00:00'
FROM n
"""


def write_generated(path: Path, first: int, last: int) -> None:
    db = store.open_shard_file(path)
    signature = rows(0, 1)[0][store.SAMPLE_COLUMNS.index("signature")]
    with db.conn:
        db.conn.execute(_GENERATE, (first, last - 1, signature))
    db.conn.close()


def population_step(name: str, shards: Path, merged: Path, results: Any) -> None:
    """In a fresh process: the population from the merged summaries, or from a pass over the index."""
    started = time.perf_counter()
    db = store.open_index(merged, create=False)
    figures: dict[str, object] = {}
    if name == "summaries":
        files = sorted(shards.glob("*.db"))
        summary = summaries.merge_all([summaries.summary_of_file(path) for path in files])
        merged_at = time.perf_counter()
        figures["summaries_merge_seconds"] = round(merged_at - started, 2)
        figures["summary_bytes"] = len(summary.to_json())
        peers = summaries.population(db, summary)
        figures["population_from_summaries_seconds"] = round(time.perf_counter() - merged_at, 2)
    else:
        peers = policy.population(db)
        figures["population_from_index_seconds"] = round(time.perf_counter() - started, 2)
    db.close()
    figures[f"population_from_{name}_peak_rss_mib"] = round(peak_rss_mib(), 1)
    figures[f"population_from_{name}_median_nbytes"] = peers.median_nbytes
    figures[f"population_from_{name}_p99_duration"] = peers.p99_duration
    results.put(figures)


def reuse(folder: Path, population: str) -> int:
    """Step 4 on the files a --keep run left: those without a summary (written before summaries
    existed) are summarised from their rows first, as a scan's merge would (the fallback), timed."""
    figures: dict[str, object] = {"load_average_at_start": os.getloadavg()[0]}
    shards = folder / "shards"
    started = time.perf_counter()
    missing = 0
    for path in sorted(shards.glob("*.db")):
        with contextlib.closing(sqlite3.connect(path)) as connection:
            if summaries.read_summary(connection) is None:
                summaries.write_summary(connection, summaries.summarize(connection))
                missing += 1
    figures["files_summarised_from_their_rows"] = missing
    figures["summarising_them_seconds"] = round(time.perf_counter() - started, 1)
    (rows,) = sqlite3.connect(folder / "merged.db").execute("SELECT count(*) FROM samples").fetchone()
    figures["rows"] = rows
    if missing:
        figures["summarising_them_us_per_row"] = round((time.perf_counter() - started) / rows * 1e6, 2)
    for name in population.split(","):
        figures.update(in_fresh_process(population_step, name, shards, folder / "merged.db"))
        figures["load_average_now"] = os.getloadavg()[0]
        print(json.dumps(figures, indent=1), flush=True)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--shards", type=int, default=20)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--generate", choices=("python", "sql"), default="python")
    parser.add_argument("--skip-single", action="store_true", help="leave out the single writer")
    parser.add_argument("--folder", type=Path, default=None, help="where the files go (default: a temp dir)")
    parser.add_argument("--population", default="summaries,index", help="summaries,index or one of them")
    parser.add_argument("--keep", type=Path, default=None, help="move the files and the merged index there")
    parser.add_argument(
        "--reuse", type=Path, default=None, help="a --keep folder: measure step 4 only, on its files"
    )
    args = parser.parse_args()
    if args.reuse is not None:
        return reuse(args.reuse, args.population)
    load = os.getloadavg()[0]
    size = args.rows // args.shards
    ranges = [(n * size, (n + 1) * size) for n in range(args.shards)]
    with tempfile.TemporaryDirectory(dir=args.folder) as name:
        folder = Path(name)
        single = 0.0
        if not args.skip_single:
            started = time.perf_counter()
            write_index(folder / "single.db", 0, args.rows)
            single = time.perf_counter() - started
        shards = folder / "shards"
        shards.mkdir()
        jobs = [(shards, ranges[w :: args.workers], args.generate) for w in range(args.workers)]
        started = time.perf_counter()
        with multiprocessing.get_context("fork").Pool(args.workers) as pool:
            summarising = sum(pool.map(write_shards, jobs))
        parallel = time.perf_counter() - started
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        result = merge_shard_indexes(folder / "merged.db", sorted(shards.glob("*.db")), run_id=1)
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        merge = result.copy_seconds + result.index_seconds
        figures: dict[str, object] = {
            "rows": args.rows,
            "shards": args.shards,
            "generate": args.generate,
            "load_average_at_start": load,
            "bytes_per_row": round((folder / "merged.db").stat().st_size / args.rows),
            f"{args.workers}_shard_writers_seconds": round(parallel, 1),
            f"{args.workers}_shard_writers_rows_per_s": round(args.rows / parallel),
            "merge_copy_seconds": round(result.copy_seconds, 1),
            "merge_index_seconds": round(result.index_seconds, 1),
            "merge_rows_per_s": round(args.rows / merge),
            "merge_peak_rss_mib": round(peak, 1),
            "peak_rss_before_merge_mib": round(before, 1),
            "load_average_at_end": os.getloadavg()[0],
        }
        if not args.skip_single:
            figures["single_writer_seconds"] = round(single, 1)
            figures["single_writer_rows_per_s"] = round(args.rows / single)
            figures["shard_writers_plus_merge_rows_per_s"] = round(args.rows / (parallel + merge))
        print(json.dumps(figures, indent=1), flush=True)
        figures["summaries_in_the_writers_cpu_seconds"] = round(summarising, 2)
        figures["summaries_in_the_writers_us_per_row"] = round(summarising / args.rows * 1e6, 2)
        for name in args.population.split(","):
            figures.update(in_fresh_process(population_step, name, shards, folder / "merged.db"))
            print(json.dumps(figures, indent=1), flush=True)
        if args.keep:
            os.rename(folder / "shards", args.keep / "shards")
            os.rename(folder / "merged.db", args.keep / "merged.db")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
