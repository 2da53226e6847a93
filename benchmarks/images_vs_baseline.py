"""datalint's image scan side by side with what a user would otherwise run, on the same files and workers.

    python benchmarks/image_corpus.py /tmp/corpus --workers 2          # once: 2000 files, ~370 MiB
    python benchmarks/images_vs_baseline.py /tmp/corpus --workers 2 [--repeat 3]
        [--cleanvision-python /path/to/venv/bin/python]
    python benchmarks/images_vs_baseline.py --folder DIR --workers 2 --repeat 3   # any image folder

`--folder DIR` times the same contenders on any folder of images (a public test suite, a dataset),
on the files `datalint scan --images DIR` lists, with `datalint scan --no-scores` as a third: speed
only, as such a folder has no manifest of what is damaged.

Each contender runs as its own process (what a user types), on a warm page cache:

* datalint: `datalint scan --images DIR --workers N --rescan` (forked workers, SQLite index);
* PIL + joblib: `Parallel(n_jobs=N)(delayed(load)(p) for p in paths)` where `load` is
  `Image.open(p).load()` in a try/except: the loop a user writes, and the bar to beat;
* cleanvision (optional, in its own virtualenv because it pins its own dependencies):
  `Imagelab(data_path=DIR).find_issues(n_jobs=N)` on the whole folder, then on the files PIL loads.

Each contender runs `--repeat` times, the order alternating between rounds; the table keeps the best
wall time and lists every run's. CPU is the process's and its children's user+system time
(RUSAGE_CHILDREN), from the best run. The detection table compares each file's verdict with the
corpus manifest: a damaged file counts as found when the contender flags it in any way, and a
valid file flagged as damaged is a false alarm.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
DAMAGE = frozenset({"corrupt", "empty", "decompression_bomb", "unreadable"})


@dataclass(frozen=True)
class Outcome:
    name: str
    wall: float
    cpu: float
    flagged: dict[str, set[str]]  # relpath -> kinds (for the baselines: {"corrupt"} when loading failed)
    note: str = ""
    files: int = 0
    extra: dict[str, str] = field(default_factory=dict)


def timed(
    command: Sequence[str], timeout: float = 900
) -> tuple[float, float, subprocess.CompletedProcess[str]]:
    """(wall s, CPU s of the process and everything it waited for, the completed process)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, done


def warm_cache(images: Path, relpaths: Sequence[str]) -> None:
    for relpath in relpaths:
        path = images / relpath
        if path.exists():
            path.read_bytes()


# --------------------------------------------------------------------------- contenders


def run_datalint(images: Path, workers: int, scratch: Path, *extra: str) -> Outcome:
    db = scratch / "index.db"
    command = [sys.executable, "-m", "datalint", "scan", "--images", str(images), "--workers", str(workers),
               "--db", str(db), "--rescan", "--format", "json", "--progress", "none", *extra]  # fmt: skip
    wall, cpu, done = timed(command)
    if done.returncode not in (0, 1):
        raise SystemExit(f"datalint scan failed ({done.returncode}):\n{done.stderr}")
    flagged: dict[str, set[str]] = {}
    with sqlite3.connect(db) as connection:
        for key, kind in connection.execute(
            "SELECT s.key, f.kind FROM findings f JOIN samples s USING (idx)"
        ):
            flagged.setdefault(key, set()).add(kind)
    name = " ".join(("datalint scan", *extra))
    return Outcome(name, wall, cpu, flagged, files=json.loads(done.stdout)["length"])


def run_pil_joblib(images: Path, relpaths: Sequence[str], workers: int, scratch: Path) -> Outcome:
    listing = scratch / "files.json"
    listing.write_text(json.dumps([str(images / relpath) for relpath in relpaths]))
    command = [sys.executable, __file__, "--pil-joblib-child", str(listing), "--workers", str(workers)]
    wall, cpu, done = timed(command)
    if done.returncode != 0:
        raise SystemExit(f"the PIL + joblib loop failed ({done.returncode}):\n{done.stderr}")
    failures = json.loads(done.stdout)
    flagged = {os.path.relpath(path, images): {"corrupt"} for path in failures}
    return Outcome("PIL open().load() + joblib", wall, cpu, flagged, files=len(relpaths))


def pil_joblib_child(listing: Path, workers: int) -> None:
    """The user's loop: every file through Pillow's full decode, in joblib workers."""
    from joblib import Parallel, delayed
    from joblib.externals.loky import get_reusable_executor

    paths = json.loads(listing.read_text())
    results = Parallel(n_jobs=workers)(delayed(_pil_load)(path) for path in paths)
    # Join the workers so their CPU time is counted in this process's children.
    get_reusable_executor().shutdown(wait=True)
    print(json.dumps({path: error for path, error in zip(paths, results, strict=True) if error}))


def _pil_load(path: str) -> str | None:
    from PIL import Image

    try:
        with Image.open(path) as image:
            image.load()
    except Exception as exc:  # the baseline's verdict: it raised
        return f"{type(exc).__name__}: {exc}"
    return None


CLEANVISION = """
import json, sys
from cleanvision import Imagelab
workers = int(sys.argv[2])
target = sys.argv[1]
if target.endswith(".json"):
    lab = Imagelab(filepaths=json.load(open(target)))
else:
    lab = Imagelab(data_path=target)
try:
    lab.find_issues(n_jobs=workers, verbose=False)
except Exception as exc:
    print(json.dumps({"aborted": f"{type(exc).__name__}: {exc}"[:300]}))
    sys.exit(0)
issues = lab.issues
flagged = {}
for path, row in issues.iterrows():
    flagged[path] = [c[3:-6] for c in issues.columns if c.startswith("is_") and row[c]]
print(json.dumps({"flagged": {p: k for p, k in flagged.items() if k}}))
"""


def run_cleanvision(python: str, target: str, workers: int, images: Path, files: int) -> Outcome:
    wall, cpu, done = timed([python, "-c", CLEANVISION, target, str(workers)], timeout=1800)
    if done.returncode != 0:
        return Outcome(
            "cleanvision", wall, cpu, {}, note=f"failed: {done.stderr.strip()[-300:]}", files=files
        )
    result = json.loads(done.stdout.strip().splitlines()[-1])
    if "aborted" in result:
        return Outcome(
            "cleanvision", wall, cpu, {}, note=f"aborted, no results: {result['aborted']}", files=files
        )
    flagged = {os.path.relpath(path, images): set(kinds) for path, kinds in result["flagged"].items()}
    return Outcome("cleanvision", wall, cpu, flagged, files=files)


# --------------------------------------------------------------------------- tables


def detection_table(manifest: Sequence[Any], outcomes: Sequence[Outcome]) -> str:
    kinds: dict[str, list[Any]] = {}
    for row in manifest:
        kinds.setdefault(row.kind, []).append(row)
    header = "| kind (n) | expected | " + " | ".join(o.name for o in outcomes) + " |"
    lines = [header, "|" + "---|" * (2 + len(outcomes))]
    damaged = [k for k, rows in kinds.items() if set(rows[0].expected) & DAMAGE]
    other = [k for k in kinds if k not in damaged]
    for kind in sorted(damaged) + sorted(other):
        rows = kinds[kind]
        expected = set(rows[0].expected)
        cells = [_cell(rows, expected, outcome) for outcome in outcomes]
        label = " ".join(sorted(expected)) or "(nothing)"
        lines.append(f"| {kind} ({len(rows)}) | {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _cell(rows: Sequence[Any], expected: set[str], outcome: Outcome) -> str:
    if outcome.note.startswith(("aborted", "failed")):
        return "–"
    verdicts = [outcome.flagged.get(row.relpath, set()) for row in rows]
    if expected & DAMAGE:
        return f"{sum(bool(v) for v in verdicts)}"
    alarms = sum(bool(v & DAMAGE) for v in verdicts)
    if outcome.name != "datalint scan":
        return f"{alarms} false alarm(s)" if alarms else "ok"
    exact = sum(v == expected for v in verdicts)
    return f"{exact} exact" + (f", {alarms} false alarm(s)" if alarms else "")


def speed_table(outcomes: Sequence[Outcome], manifest: Sequence[Any]) -> str:
    damaged = [row for row in manifest if row.damaged]
    valid = [row for row in manifest if not row.damaged]
    lines = [
        "| contender | files | wall s | files/s | CPU s | CPU ms/file | damaged found | valid flagged |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for o in outcomes:
        found = sum(bool(o.flagged.get(row.relpath, set()) & (DAMAGE | {"corrupt"})) for row in damaged)
        alarms = sum(bool(o.flagged.get(row.relpath, set()) & DAMAGE) for row in valid)
        detection = "–" if o.note else f"{found}/{len(damaged)}"
        lines.append(
            f"| {o.name} | {o.files} | {o.wall:.2f} | {o.files / o.wall:.0f} | {o.cpu:.2f} | "
            f"{1000 * o.cpu / max(1, o.files):.2f} | {detection} | {'–' if o.note else alarms} |"
        )
    notes = [f"- {o.name}: {o.note}" for o in outcomes if o.note]
    notes += [f"- {o.name}: wall s of each run: {o.extra['walls']}" for o in outcomes if "walls" in o.extra]
    return "\n".join([*lines, *([""] if notes else []), *notes])


# --------------------------------------------------------------------------- main


def interleaved_best(repeat: int, contenders: Sequence[Callable[[], Outcome]]) -> list[Outcome]:
    """Each contender `repeat` times, alternating the order, so a load change on a shared machine hits
    all of them alike; the run with the best wall time is kept, and every wall time noted."""
    runs: list[list[Outcome]] = [[] for _ in contenders]
    for turn in range(repeat):
        order = range(len(contenders)) if turn % 2 == 0 else reversed(range(len(contenders)))
        for position in order:
            runs[position].append(contenders[position]())
    best = []
    for outcomes in runs:
        winner = min(outcomes, key=lambda outcome: outcome.wall)
        walls = ", ".join(f"{o.wall:.1f}" for o in outcomes)
        best.append(Outcome(winner.name, winner.wall, winner.cpu, winner.flagged, winner.note, winner.files,
                            {"walls": walls}))  # fmt: skip
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("corpus", type=Path, nargs="?", help="a folder written by benchmarks/image_corpus.py")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument(
        "--repeat", type=int, default=1, help="runs per contender; the best wall time is kept"
    )
    parser.add_argument("--cleanvision-python", help="a Python with cleanvision installed (its own venv)")
    parser.add_argument("--pil-joblib-child", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--folder", type=Path, help="any image folder: speed only, with --no-scores too")
    args = parser.parse_args()
    if args.pil_joblib_child:
        pil_joblib_child(args.pil_joblib_child, args.workers)
        return
    if args.folder is not None:
        folder_speed(args.folder, args.workers, args.repeat)
        return
    if args.corpus is None:
        parser.error("name the corpus folder (python benchmarks/image_corpus.py OUT writes one)")
    sys.path.insert(0, str(HERE))
    from image_corpus import read_manifest

    images = args.corpus / "images"
    manifest = read_manifest(args.corpus / "manifest.csv")
    relpaths = [row.relpath for row in manifest]
    warm_cache(images, relpaths)
    with tempfile.TemporaryDirectory(prefix="datalint-bench-") as scratch:
        outcomes = interleaved_best(
            args.repeat,
            [
                lambda: run_pil_joblib(images, relpaths, args.workers, Path(scratch)),
                lambda: run_datalint(images, args.workers, Path(scratch)),
            ],
        )
        if args.cleanvision_python:
            outcomes.append(
                run_cleanvision(args.cleanvision_python, str(images), args.workers, images, len(relpaths))
            )
            loads = [images / r for r in relpaths if r not in outcomes[0].flagged and (images / r).exists()]
            (Path(scratch) / "valid.json").write_text(json.dumps([str(p) for p in loads]))
            speed = run_cleanvision(
                args.cleanvision_python, str(Path(scratch) / "valid.json"), args.workers, images, len(loads)
            )
            note = speed.note or "speed only: run on the files PIL loads"
            name = "cleanvision (files PIL loads)"
            outcomes.append(Outcome(name, speed.wall, speed.cpu, {}, note, speed.files))
    load = os.getloadavg()
    print(
        f"{len(relpaths)} files, {args.workers} workers, best of {args.repeat}; load average {load[0]:.1f}\n"
    )
    print(speed_table(outcomes, manifest))
    print()
    print(detection_table(manifest, [o for o in outcomes if not o.note.startswith("speed only")]))


def folder_speed(folder: Path, workers: int, repeat: int) -> None:
    """The contenders' speed on any image folder, on the files the scan lists (no manifest)."""
    from datalint.scan.images import list_image_files

    relpaths = list(list_image_files(folder).files)
    warm_cache(folder, relpaths)
    with tempfile.TemporaryDirectory(prefix="datalint-bench-") as scratch:
        outcomes = interleaved_best(
            repeat,
            [
                lambda: run_pil_joblib(folder, relpaths, workers, Path(scratch)),
                lambda: run_datalint(folder, workers, Path(scratch)),
                lambda: run_datalint(folder, workers, Path(scratch), "--no-scores"),
            ],
        )
    load = os.getloadavg()
    print(f"{folder}: {len(relpaths)} files, {workers} workers, best of {repeat}; load {load[0]:.1f}\n")
    print(speed_table(outcomes, []))
    base = outcomes[0].wall
    for outcome in outcomes[1:]:
        print(f"- {outcome.name}: {outcome.wall / base:.2f}x the PIL + joblib loop's wall time")


if __name__ == "__main__":
    main()
