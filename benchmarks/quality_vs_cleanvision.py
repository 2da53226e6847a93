"""datalint against cleanvision 0.3.x on the labelled quality corpus: speed and detection, one run.

    python -m venv /work/ext/cv-venv && /work/ext/cv-venv/bin/pip install cleanvision  # not the project's
    python benchmarks/quality_vs_cleanvision.py /tmp/qc --workers 2 --repeat 3 \
        --cleanvision-python /work/ext/cv-venv/bin/python
    python benchmarks/quality_vs_cleanvision.py /tmp/qc-short --short --cleanvision-python ...  # ~1 min

The corpus is generated into the folder first when it has no labels.json (benchmarks/quality_corpus.py,
seed 7: 2,000 images, or 500 with --short). Then, alternating, `datalint scan --images OUT/images
--kinds all` (the whole CLI process: start-up, damage checks, scores, hashes, index, quarantine list)
and `Imagelab(data_path=OUT/images).find_issues(n_jobs=N)` in cleanvision's own interpreter, each
timed in wall and CPU seconds (its processes and their children), with the load average beside it.
The ratio is cleanvision's time over datalint's, per round (runs next to each other see the same
load) and of the medians. Then per-kind precision and recall on the kinds both tools have
(cleanvision's `odd_aspect_ratio` is our `odd_aspect`; its `near_duplicates` flags every member of a
set, so its near-duplicate line counts files, not pairs).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from quality_detection import QUALITY, expected, found, scan

PROGRAM = """
import contextlib, json, sys, time
from cleanvision import Imagelab
folder, workers = sys.argv[1], int(sys.argv[2])
started = time.perf_counter()
with contextlib.redirect_stdout(sys.stderr):  # cleanvision prints its progress on stdout
    lab = Imagelab(data_path=folder + "/images")
    lab.find_issues(n_jobs=workers, verbose=False)
elapsed = time.perf_counter() - started
flags = {}
for column in lab.issues.columns:
    if column.startswith("is_") and column.endswith("_issue"):
        flags[column[3:-6]] = [p.split("/images/", 1)[1] for p in lab.issues.index[lab.issues[column]]]
json.dump({"elapsed": elapsed, "flags": flags}, sys.stdout)
"""
NAMES = {"odd_aspect_ratio": "odd_aspect"}


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_datalint(folder: Path, workers: int) -> tuple[float, float, dict[str, set[str]]]:
    cpu = children_cpu()
    db, seconds = scan(folder, workers)  # `python -m datalint`: a checkout in the working directory wins
    return seconds, children_cpu() - cpu, found(db)


def run_cleanvision(folder: Path, workers: int, python: str) -> tuple[float, float, dict[str, set[str]]]:
    cpu, started = children_cpu(), time.perf_counter()
    result = subprocess.run(
        [python, "-c", PROGRAM, str(folder), str(workers)], capture_output=True, text=True, check=True
    )
    seconds = time.perf_counter() - started  # the interpreter's start and imports count, as ours do
    flags: dict[str, set[str]] = defaultdict(set)
    for name, paths in json.loads(result.stdout)["flags"].items():
        flags[NAMES.get(name, name)] = set(paths)
    return seconds, children_cpu() - cpu, flags


def detection_table(labels: dict[str, dict[str, str]], tools: dict[str, dict[str, set[str]]]) -> None:
    wanted = expected(labels)
    names = list(tools)
    heads = " ".join(f"{name + ' found':>17} {'P':>5} {'R':>5}" for name in names)
    print(f"{'kind':16} {'planted':>7} {heads}")
    for kind in QUALITY:
        cells = []
        for name in names:
            got = tools[name][kind]
            hits = len(wanted[kind] & got)
            precision = hits / len(got) if got else 1.0
            recall = hits / len(wanted[kind]) if wanted[kind] else 1.0
            cells.append(f"{len(got):17} {precision:5.2f} {recall:5.2f}")
        print(f"{kind:16} {len(wanted[kind]):7} " + " ".join(cells))
    grouped = {path for path, label in labels.items() if "group" in label}
    near = tools["cleanvision"]["near_duplicates"]
    print(f"cleanvision near_duplicates: {len(near & grouped)} of {len(grouped)} planted group members "
          f"flagged, {len(near - grouped)} files outside any planted group "
          "(datalint's pairs: benchmarks/quality_detection.py)")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--cleanvision-python", required=True)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3, help="alternating rounds (default 3)")
    parser.add_argument("--short", action="store_true", help="a 500-image corpus and one round")
    args = parser.parse_args()
    if not (args.folder / "labels.json").exists():
        from quality_corpus import generate

        generate(args.folder, 500 if args.short else 2000, 7)
    rounds = 1 if args.short else args.repeat
    labels = json.loads((args.folder / "labels.json").read_text())
    times: dict[str, list[float]] = {"datalint": [], "cleanvision": []}
    flags: dict[str, dict[str, set[str]]] = {}
    print(f"{len(labels)} files, {args.workers} workers; wall s (CPU s) [load average 1 min]")
    for number in range(1, rounds + 1):
        line = []
        for name in ("datalint", "cleanvision"):
            load = os.getloadavg()[0]
            if name == "datalint":
                seconds, cpu, flags[name] = run_datalint(args.folder, args.workers)
            else:
                python = args.cleanvision_python
                seconds, cpu, flags[name] = run_cleanvision(args.folder, args.workers, python)
            times[name].append(seconds)
            line.append(f"{name} {seconds:6.2f} s ({cpu:6.2f}) [{load:4.1f}]")
        ratio = times["cleanvision"][-1] / times["datalint"][-1]
        print(f"round {number}: " + ", ".join(line) + f": {ratio:.1f}x")
    ours, theirs = statistics.median(times["datalint"]), statistics.median(times["cleanvision"])
    print(
        f"median: datalint {ours:.2f} s ({len(labels) / ours:.0f} files/s), cleanvision {theirs:.2f} s "
        f"({len(labels) / theirs:.0f} files/s): {theirs / ours:.1f}x"
    )
    detection_table(labels, flags)


if __name__ == "__main__":
    main()
