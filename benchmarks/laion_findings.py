"""Every finding of a sharded index: from the merged summary, part by part, against the policy
over the merged index (`policy.derive_findings`), time and peak RSS, each in a fresh process.

Shard files of synthetic image rows (written by SQLite from a recursive CTE, ~10x faster than rows
made in Python) shaped like an image scan's: a key, status, duration, size, signature and an info
JSON with a content hash, a shape and the quality scores with a perceptual hash. Planted: failed
samples, slow ones, content-hash duplicates across shards (1 image in 1,009), near-duplicates
(1 in 503), dark outliers (1 in 997), odd sizes, tiny and extreme shapes; the scores vary over
thousands of distinct values, as real ones do.

Steps:
1. WORKERS processes write SHARDS shard files; each file's summary is counted from its rows, as
   a shard writer does when it finishes (timed: microseconds a row);
2. the files are merged (`merge_shard_indexes`) and the index keeps their merged summary;
3. in a fresh process each: `index` (population, warnings and findings read from the merged index
   by the policy) and `summaries` (the limits, the parts judged with `--judges` processes, which
   also check the coverage as they read, and what crosses parts, its hashes in memory or in
   partition files of `--partition-rows` hashes: the peak RSS of that step alone is reported);
   the findings of all are compared (count and hash).

    .venv/bin/python benchmarks/laion_findings.py [--rows 1000000] [--shards 100] [--workers 2]
        [--judges 1,2] [--partition-rows 0,262144] [--steps summaries,index]
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
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
from datalint.scan import hash_partitions, policy, summaries, summary_findings

SIGNATURE = json.dumps({"type": "dict", "fields": {
    "image": {"type": "Tensor", "shape": [3, 224, 224], "dtype": "torch.uint8"}, "label": {"type": "int"}}},
    separators=(",", ":"))  # fmt: skip

# a, b: two pseudo-random draws per row that decide what is planted (integer arithmetic stays under
# 2^63 for any idx under 1e9: SQLite turns an overflowing product into a float); the content and
# perceptual hashes are SQLite's random(), 64 bits, so only the planted ones are near each other.
_GENERATE = """
INSERT INTO samples (idx, key, status, run_id, duration, nbytes, signature, info, worker, measured_at)
WITH RECURSIVE n(i) AS (SELECT ? UNION ALL SELECT i + 1 FROM n WHERE i < ?),
r AS (SELECT i, (i * 2654435761) % 1000003 AS a, (i * 40503 + 17) % 65521 AS b FROM n)
SELECT i, printf('train-%06d.tar/%09d', i / 10000, i),
       CASE WHEN a % 53 = 0 THEN 'error' ELSE 'ok' END, 1,
       CASE WHEN a % 9973 = 0 THEN 25.0 ELSE 0.002 + (a % 1000) * 1e-5 END,
       150528 + (b % 13) * 1024, ?,
       CASE WHEN a % 53 = 0 THEN NULL ELSE printf(
         '{"file_bytes":%d,"format":"JPEG","width":%d,"height":%d,"sha256":"%s","quality":{'
         || '"highlights":%.4f,"shadows":%.4f,"sharpness":%.4f,"entropy":%.4f,"colorfulness":%.4f,'
         || '"phash":"%016llx"}}',
         40000 + i % 977,
         CASE WHEN a % 211 = 0 THEN 8 WHEN a % 101 = 0 THEN 2000 ELSE 256 END,
         CASE WHEN a % 211 = 0 THEN 300 WHEN a % 101 = 0 THEN 2000 ELSE 256 END,
         CASE WHEN a % 1009 = 0 THEN printf('%064d', a % 97) ELSE printf('%016llx%048d', random(), i) END,
         CASE WHEN a % 997 = 0 THEN 0.0001 ELSE 0.5 + (a % 5000) / 10000.0 END,
         (b % 3000) / 10000.0, 0.05 + (a % 20011) / 1000.0, 3 + (b % 40000) / 10000.0, (a % 300) / 1000.0,
         CASE WHEN a % 503 = 0 THEN ((a % 37) + 1) * 72340172838076673 | (1 << (i % 50))
              ELSE random() END)
       END,
       1234, '2026-12-01T10:00:00+00:00'
FROM r
"""


def write_shards(job: tuple[Path, list[tuple[int, int]]]) -> float:
    """Writes the files of one worker; returns the seconds spent counting their summaries."""
    folder, ranges = job
    counting = 0.0
    for first, last in ranges:
        path = folder / f"{first:012d}-{last - 1:012d}.db"
        db = store.open_shard_file(path)
        with db.conn:
            db.conn.execute(_GENERATE, (first, last - 1, SIGNATURE))
        started = time.perf_counter()
        summaries.write_summary(db.conn, summaries.summarize(db.conn))
        counting += time.perf_counter() - started
        db.conn.close()
    return counting


def gathered(folder: Path, images: int, partition_rows: int) -> Any:
    """The hashes in memory (`partition_rows` 0), or in partitions of that many in `folder`."""
    if partition_rows == 0:
        return hash_partitions.InMemoryHashes()
    return hash_partitions.PartitionedHashes(folder, images, partition_rows)


def cpu_seconds() -> float:
    """This process's CPU and that of its children that ended (the judges, HashIndex's pool)."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def reset_peak_rss() -> None:
    """VmHWM back to the current RSS (Linux: 5 > clear_refs), so the next peak is a step's own."""
    with contextlib.suppress(OSError):
        Path("/proc/self/clear_refs").write_text("5")


def digest_of(found: list[policy.Finding]) -> str:
    text = "\n".join(f"{f.idx}\t{f.kind}\t{f.detail}\t{int(f.quarantine)}" for f in found)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def step(name: str, index: Path, judges: int, partition_rows: int, results: Any) -> None:
    options = policy.PolicyOptions(timeout=60.0)
    db = store.open_index(index, create=False)
    figures: dict[str, Any] = {}
    started = time.perf_counter()
    cpu = cpu_seconds()
    if name == "index":
        peers = policy.population(db)
        policy.population_warnings(db, options)
        found = policy.derive_findings(db, options, peers)
    else:
        kept = summaries.read_summary(db.conn)
        assert kept is not None
        limits = summary_findings.limits_of(db, kept, options, checked=True)
        at = time.perf_counter()
        figures["limits_seconds"] = round(at - started, 2)
        ranges = list(summary_findings.part_ranges(db))
        with gathered(index.parent, kept.ok, partition_rows) as hashes:
            # the parts' findings; their hashes gathered as they come, and the coverage checked
            found_rows = summary_findings.judge_parts(db, kept, limits, ranges, hashes, judges)
            figures["parts"] = len(ranges)
            figures["parts_seconds"] = round(time.perf_counter() - at, 2)
            figures["gathered_rss_mib"] = round(rss_mib(), 1)
            figures["gathered_peak_rss_mib"] = round(peak_rss_mib(), 1)
            reset_peak_rss()
            at, cpu_at = time.perf_counter(), cpu_seconds()
            found_rows.extend(summary_findings.cross_part_findings(db, hashes, options))
            figures["cross_part_seconds"] = round(time.perf_counter() - at, 2)
            figures["cross_part_cpu_seconds"] = round(cpu_seconds() - cpu_at, 2)
            figures["cross_part_peak_rss_mib"] = round(peak_rss_mib(), 1)
        found = policy._merged([policy.Finding(i, k, d, k in options.kinds) for i, k, d in found_rows])
    figures[f"{name}_seconds"] = round(time.perf_counter() - started, 2)
    # CPU too (this process and its judges): a wall time swells when the process is stopped (SIGSTOP)
    figures[f"{name}_cpu_seconds"] = round(cpu_seconds() - cpu, 2)
    figures[f"{name}_peak_rss_mib"] = round(peak_rss_mib(), 1)
    figures[f"{name}_findings"] = len(found)
    figures[f"{name}_findings_hash"] = digest_of(found)
    kinds: dict[str, int] = {}
    for finding in found:
        kinds[finding.kind] = kinds.get(finding.kind, 0) + 1
    figures[f"{name}_kinds"] = dict(sorted(kinds.items()))
    db.close()
    results.put(figures)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--shards", type=int, default=100)
    parser.add_argument("--workers", type=int, default=2, help="processes writing the shard files")
    parser.add_argument("--judges", default="1", help="processes judging the parts, e.g. 1,2")
    parser.add_argument(
        "--partition-rows",
        default="0",
        help="hashes per partition file for the cross-part findings, e.g. 0,262144 (0: in memory)",
    )
    parser.add_argument("--steps", default="summaries,index")
    parser.add_argument("--folder", type=Path, default=None, help="where the files go (default: a temp dir)")
    args = parser.parse_args()
    figures: dict[str, Any] = {"rows": args.rows, "shards": args.shards}
    figures["load_average_at_start"] = os.getloadavg()[0]
    size = args.rows // args.shards
    ranges = [(n * size, (n + 1) * size) for n in range(args.shards)]
    with tempfile.TemporaryDirectory(dir=args.folder) as name:
        folder = Path(name)
        shards = folder / "shards"
        shards.mkdir()
        started = time.perf_counter()
        with multiprocessing.get_context("fork").Pool(args.workers) as pool:
            jobs = [(shards, ranges[w :: args.workers]) for w in range(args.workers)]
            counting = sum(pool.map(write_shards, jobs))
        figures["writing_seconds"] = round(time.perf_counter() - started, 1)
        figures["summaries_in_the_writers_us_per_row"] = round(counting / args.rows * 1e6, 2)
        index = folder / "merged.db"
        files = sorted(shards.glob("*.db"))
        started = time.perf_counter()
        summary = summaries.merge_all([summaries.summary_of_file(path) for path in files])
        figures["summaries_merge_seconds"] = round(time.perf_counter() - started, 2)
        figures["summary_bytes"] = len(summary.to_json())
        merge_shard_indexes(index, files, run_id=1)
        summaries.keep_in_index(index, summary, was_empty=True)
        figures["bytes_per_row"] = round(index.stat().st_size / args.rows)
        with contextlib.closing(sqlite3.connect(index)) as connection:
            connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        for name in args.steps.split(","):
            variants = [
                (int(judges), int(rows))
                for judges in (args.judges.split(",") if name == "summaries" else ["1"])
                for rows in (args.partition_rows.split(",") if name == "summaries" else ["0"])
            ]
            for judges, partition_rows in variants:
                found = in_fresh_process(step, name, index, judges, partition_rows)
                label = (
                    f"{name}_{judges}_judges_{partition_rows}_partition_rows" if name == "summaries" else name
                )
                figures[label] = found
                figures["load_average_now"] = os.getloadavg()[0]
                print(json.dumps(figures, indent=1), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
