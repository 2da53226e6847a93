"""Per-kind precision and recall of the quality kinds and near-duplicates on the labelled corpus.

    python benchmarks/quality_corpus.py /tmp/qc --n 2000 --seed 7
    python benchmarks/quality_detection.py /tmp/qc --workers 2
    python benchmarks/quality_corpus.py /tmp/qp --photos PHOTOS --seed 7
    python benchmarks/quality_detection.py /tmp/qp --verdicts benchmarks/data/quality-photos-verdicts.csv

`--verdicts`: what a photograph is in fact, judged by hand for each finding its label does not
explain (a clean photo that is black, a planted copy whose source was already odd): a `true` row
makes (image, kind) expected; a `false` one is recorded with its reason and stays a false finding.

Scans OUT/images into OUT/scan.db (timed), then compares the findings with OUT/labels.json. A
resized near-duplicate (0.5x, 2x) is also expected as `odd_size`: relative to the population it is.
Near-duplicates: recall is over the planted (original, copy) pairs; the false-match rate is over all
distinct-image pairs (n^2/2), counting pairs that land in one group without being planted together.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

QUALITY = ("dark", "light", "blurry", "low_information", "grayscale", "odd_size", "odd_aspect")


def scan(folder: Path, workers: int) -> tuple[Path, float]:
    db = folder / "scan.db"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # an installed datalint has its bytecode compiled
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "datalint", "scan", "--images", str(folder / "images"), "--db", str(db),
         "--workers", str(workers), "--progress", "none", "--kinds", "all"],
        check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
    )  # fmt: skip
    return db, time.perf_counter() - started


def expected(labels: dict[str, dict[str, str]]) -> dict[str, set[str]]:
    wanted: dict[str, set[str]] = defaultdict(set)
    for path, label in labels.items():
        if label["kind"] in QUALITY:
            wanted[label["kind"]].add(path)
        if label.get("transform") in ("half", "double"):
            wanted["odd_size"].add(path)
    return wanted


def found(db: Path) -> dict[str, set[str]]:
    import sqlite3

    connection = sqlite3.connect(db)
    rows = connection.execute(
        "SELECT s.key, f.kind FROM findings f JOIN samples s ON s.idx = f.idx"
    ).fetchall()
    connection.close()
    result: dict[str, set[str]] = defaultdict(set)
    for key, kind in rows:
        result[SAYS.get(kind, kind)].add(key)
    return result


# A finding that takes a planted kind's place: a side under 32 px is reported `tiny` rather than
# `odd_size`, a shape past the fixed ratio `extreme_aspect` rather than `odd_aspect`.
SAYS = {"tiny": "odd_size", "extreme_aspect": "odd_aspect"}


def groups_of(db: Path) -> dict[str, str]:
    """key -> the representative's key, for every image in a near-duplicate group."""
    import sqlite3

    connection = sqlite3.connect(db)
    rows = connection.execute(
        "SELECT s.key, f.detail FROM findings f JOIN samples s ON s.idx = f.idx "
        "WHERE f.kind = 'near_duplicate'"
    ).fetchall()
    connection.close()
    membership = {}
    for key, detail in rows:
        representative = detail.split("looks like ", 1)[1].split(" (hash", 1)[0]
        membership[key] = representative
        membership[representative] = representative
    return membership


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--verdicts", type=Path, help="judged facts of the images (CSV)")
    args = parser.parse_args()
    labels = json.loads((args.folder / "labels.json").read_text())
    db, seconds = scan(args.folder, args.workers)
    print(
        f"scan: {len(labels)} files in {seconds:.1f} s ({len(labels) / seconds:.0f} files/s), "
        f"{args.workers} workers"
    )
    wanted, got = expected(labels), found(db)
    if args.verdicts is not None:
        with args.verdicts.open(newline="") as rows:
            for row in csv.DictReader(rows):
                if row["verdict"] == "true":
                    wanted[row["kind"]].add(row["image"])
    print(f"{'kind':16} {'expected':>8} {'found':>6} {'precision':>9} {'recall':>7}")
    for kind in QUALITY:
        hits = len(wanted[kind] & got[kind])
        precision = hits / len(got[kind]) if got[kind] else 1.0
        recall = hits / len(wanted[kind]) if wanted[kind] else 1.0
        print(f"{kind:16} {len(wanted[kind]):8} {len(got[kind]):6} {precision:9.3f} {recall:7.3f}")
        wrong = sorted(got[kind] - wanted[kind])[:5]
        if wrong:
            named = ", ".join(f"{key} ({labels[key]['kind']})" for key in wrong)
            print(f"{'':16} false: {named}")
    membership = groups_of(db)
    planted: dict[str, list[str]] = defaultdict(list)
    for path, label in labels.items():
        if "group" in label:
            planted[label["group"]].append(path)
    pairs = [(a, b) for members in planted.values() for a in members for b in members if a < b]
    together = sum(1 for a, b in pairs if a in membership and membership.get(a) == membership.get(b))
    by_group: dict[str, list[str]] = defaultdict(list)
    for key, representative in membership.items():
        by_group[representative].append(key)
    false_pairs = 0
    for members in by_group.values():
        for i, a in enumerate(members):
            for b in members[i + 1 :]:
                if labels[a].get("group") is None or labels[a].get("group") != labels[b].get("group"):
                    false_pairs += 1
    distinct = len(labels) * (len(labels) - 1) // 2
    if not pairs:  # a set with no planted groups (built from photographs)
        print(f"near_duplicate: {false_pairs} pairs grouped of {distinct:,} distinct pairs, none planted")
        return
    recall = together / len(pairs)
    print(f"near_duplicate: planted pairs found {together}/{len(pairs)} (recall {recall:.3f}); ")
    print(f"  false pairs {false_pairs} of {distinct:,} distinct pairs ({false_pairs / distinct:.5%})")
    missed = defaultdict(int)
    for members in planted.values():
        original = next(m for m in members if "transform" not in labels[m])
        for member in members:
            if member != original and membership.get(member) is None:
                missed[labels[member]["transform"]] += 1
    if missed:
        print(f"near_duplicate misses by transform: {dict(missed)}")


if __name__ == "__main__":
    main()
