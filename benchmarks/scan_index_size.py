"""Index bytes per sample for a COCO-like detection dataset (nested annotation lists).

    .venv/bin/python benchmarks/scan_index_size.py --samples 2000 --workers 2

Scans `fixtures/datasets/coco_like.py:coco_like(N)` into a fresh index and reports the index file's
size per sample, the mean stored signature per sample, and the scan's wall time. The target is
under 2 KB per sample (COCO train2017, 118k images, then needs under 240 MB of index).
"""

from __future__ import annotations

import argparse
import contextlib
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SPEC = str(ROOT / "fixtures" / "datasets" / "coco_like.py")

sys.path.insert(0, str(ROOT))
import datalint  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=2000)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        db = Path(folder) / "coco.db"
        started = time.perf_counter()
        summary = datalint.scan(f"{SPEC}:coco_like({args.samples})", db=db, workers=args.workers)
        elapsed = time.perf_counter() - started
        with contextlib.closing(sqlite3.connect(db)) as connection:
            connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            (signature,) = connection.execute("SELECT AVG(LENGTH(signature)) FROM samples").fetchone()
        size = db.stat().st_size
    assert summary.statuses["ok"] == args.samples, summary.statuses
    print("| samples | index bytes / sample | signature bytes / sample | scan s |")
    print("|---|---|---|---|")
    print(f"| {args.samples:,} | {size / args.samples:,.0f} | {signature:,.0f} | {elapsed:.2f} |")


if __name__ == "__main__":
    main()
