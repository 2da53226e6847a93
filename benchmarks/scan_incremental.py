"""Incremental scans and `datalint watch`: the cost of what changed, against scanning everything.

    .venv/bin/python benchmarks/scan_incremental.py incremental --files 100000 --workers 2 [--phases]
    .venv/bin/python benchmarks/scan_incremental.py incremental --files 10000 --side 384 --format jpeg
    .venv/bin/python benchmarks/scan_incremental.py sharded --files 200000 --per-shard 1000 --workers 2
    .venv/bin/python benchmarks/scan_incremental.py statwalk --files 1000000
    .venv/bin/python benchmarks/scan_incremental.py watch --files 1000 --drop 10000
    .venv/bin/python benchmarks/scan_incremental.py policy --db INDEX [--repeat 6]
    .venv/bin/python benchmarks/scan_incremental.py floor --folder DIR [--full-seconds S]

incremental: a folder of small real PNG files (every one decoded by the scan) is scanned in full;
then rescanned after the changes below, and (unless `--no-floor`) the floor is measured on the
changed folder, so the rescan and the floor are printed side by side;
with `--side 384 --format jpeg`, of photo-sized JPEGs of camera-like content instead (smooth
colour, solid shapes with sharp edges, sensor-like noise; ~27 KB each at 384 px, as in an
ImageNet-sized dataset). The default, 32 px PNGs, costs the scan almost nothing per file: the
worst case for the incremental ratio.
Then 1% of files are added (in the middle of the sorted order, so positions shift), 0.1% replaced
by damaged versions and 0.1% deleted; the rerun (incremental) is timed against the full scan, and
its index and list are compared with a full scan of the changed folder into a fresh index.
With `--phases`, DATALINT_FINE_PHASES=1 also times the steps inside the phases (the walk, the
the order, recording file states, reading the scores and the stored groups, regrouping).

sharded: webdataset tar shards of small PNGs scanned with per-shard index files (`--shard-index
on`), so the index keeps a population summary; then one shard is added in the middle of the
sorted order and one removed (each `--per-shard` samples), and the incremental rescan is timed,
with the peak RSS of its largest process and where its findings were judged from (the summary,
or the whole index), and compared with a full single-writer scan of the changed shards.

statwalk: a folder of empty files: the listing plus one stat per file plus loading them into the
index's table of current samples, as an incremental scan does before comparing; wall time and
the peak RSS of the process doing it (with the RSS after the listing alone, for comparison).

policy: the policy pass a scan makes after measuring (population, quality limits, every finding,
near-duplicate groups updated from the stored ones), alone, on a copy of an index (`--db`, e.g.
one `incremental --keep` left): the CPU time of each pass, least and median of `--repeat`.

floor: what any incremental scan of a folder must pay that stats every file and measures what
changed, whatever it does with its index: the interpreter and datalint's imports, the listing, one
stat per file, and measuring 1.1% of the files (as many as `incremental` adds and replaces: a scan
of a folder holding only those, its measuring phase). Least of `--repeat` runs each; with
`--full-seconds` (a full scan of the folder), each as a share of it.

watch: `datalint watch` as a child process: the time from the last write of a damaged file to its
key in the list (several trials), then `--drop` files copied in at once: time until every one has
its row in the index, and whether any is missing.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import json
import os
import resource
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


# ----------------------------------------------------------------------------------------------
# Files


def png_bytes(seed: int, side: int = 32) -> bytes:
    """A small PNG whose pixels depend on `seed`, so no two files are duplicates."""
    import io

    import numpy as np
    from PIL import Image

    pixels = np.random.default_rng(seed).integers(0, 255, (side, side, 3), dtype=np.uint8)
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, format="PNG", compress_level=1)
    return out.getvalue()


def photo_bytes(seed: int, side: int) -> bytes:
    """A JPEG (quality 90, 4:2:0 as cameras write) of camera-like content that depends on `seed`:
    a smooth colour field (a coarse random grid upsampled), a few solid shapes with sharp edges,
    and sensor-like noise. Random pixels would be nothing like a photo: they compress badly and
    decode slowly; flat colour would decode unrealistically fast."""
    import io

    import numpy as np
    from PIL import Image, ImageDraw

    rng = np.random.default_rng(seed)
    coarse = rng.integers(0, 255, (6, 6, 3), dtype=np.uint8)
    image = Image.fromarray(coarse).resize((side, side), Image.Resampling.BICUBIC)
    draw = ImageDraw.Draw(image)
    for _ in range(6):
        x, y = rng.integers(0, side, 2)
        size = int(rng.integers(side // 12, side // 3))
        colour = tuple(int(c) for c in rng.integers(0, 255, 3))
        shape = draw.ellipse if rng.random() < 0.5 else draw.rectangle
        shape((int(x), int(y), int(x) + size, int(y) + size), fill=colour)
    shift = int(rng.integers(0, side * side))
    noisy = np.asarray(image, dtype=np.int16) + np.roll(_noise(side), shift)  # one draw of noise per size
    out = io.BytesIO()
    Image.fromarray(noisy.clip(0, 255).astype(np.uint8)).save(out, format="JPEG", quality=90)
    return out.getvalue()


@functools.cache
def _noise(side: int) -> Any:
    import numpy as np

    return np.random.default_rng(0).normal(0, 4, (side, side, 3)).astype(np.int16)


@dataclasses.dataclass(frozen=True)
class Files:
    """What the folder is made of: `side` px images in `kind` (`png`: random pixels, `jpeg`:
    camera-like content)."""

    side: int = 32
    kind: str = "png"

    @property
    def suffix(self) -> str:
        return {"png": ".png", "jpeg": ".jpg"}[self.kind]

    def content(self, seed: int) -> bytes:
        return png_bytes(seed, self.side) if self.kind == "png" else photo_bytes(seed, self.side)

    def name(self, n: int, suffix: str = "") -> str:
        return f"d{n % 100:02d}/{n:07d}{suffix}{self.suffix}"


def make_folder(folder: Path, count: int, files: Files = Files()) -> None:
    """`count` files in 100 sub-folders, written by one process per core (100k photos take minutes)."""
    from concurrent.futures import ProcessPoolExecutor

    for d in range(100):
        (folder / f"d{d:02d}").mkdir(parents=True, exist_ok=True)
    pieces = [(folder, range(start, min(count, start + 1000)), files) for start in range(0, count, 1000)]
    with ProcessPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        for _ in pool.map(_write_files, *zip(*pieces, strict=True)):
            pass


def _write_files(folder: Path, numbers: range, files: Files) -> None:
    for n in numbers:
        (folder / files.name(n)).write_bytes(files.content(n))


def mutate(folder: Path, count: int, files: Files = Files()) -> dict[str, int]:
    """1% added between existing names, 0.1% replaced by a damaged version, 0.1% deleted."""
    added = max(1, count // 100)
    changed = deleted = max(1, count // 1000)
    for n in range(added):
        (folder / files.name(n, "a")).write_bytes(files.content(10_000_000 + n))  # sorts right after file n
    for n in range(changed):
        target = folder / files.name(count // 2 + n * 7)
        target.write_bytes(target.read_bytes()[:60])  # truncated: `corrupt`
    for n in range(deleted):
        (folder / files.name(count // 3 + n * 5)).unlink()
    return {"added": added, "changed": changed, "removed": deleted}


# ----------------------------------------------------------------------------------------------
# Scans as a user runs them


def scan(folder: Path, db: Path, workers: int, phases: bool = False) -> tuple[float, dict[str, Any]]:
    """`datalint scan` as a user runs it; with `phases`, through `_PHASES_CHILD`, which prints the
    wall time of each phase on stderr, and the CPU time of the scanning process in it (what a
    loaded machine moves least; measuring's CPU time is in the workers, not counted there). The
    timers add a little to the wall time."""
    start = ["-c", _PHASES_CHILD] if phases else ["-m", "datalint"]
    command = [sys.executable, *start, "scan", "--images", str(folder), "--db", str(db),
               "--workers", str(workers), "--format", "json", "--progress", "none"]  # fmt: skip
    started = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    if done.returncode not in (0, 1):
        raise SystemExit(done.stderr)
    if phases:
        print("  phases (s):", *(line for line in done.stderr.splitlines() if line.startswith(" ")), sep="\n")
    return wall, json.loads(done.stdout)


# `datalint scan` in one process with a timer around each phase of an incremental scan.
_PHASES_CHILD = """
import functools, sys, time
started, started_cpu = time.perf_counter(), time.process_time()
from datalint import cli
from datalint.commands import scan as command
from datalint.scan import api, changes, hash_groups, policy
imported, imported_cpu = time.perf_counter() - started, time.process_time() - started_cpu
spent = {}
def timed(module, name, label):
    function = getattr(module, name)
    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        begun, begun_cpu = time.perf_counter(), time.process_time()
        try:
            return function(*args, **kwargs)
        finally:
            wall, cpu = spent.get(label, (0.0, 0.0))
            spent[label] = (wall + time.perf_counter() - begun, cpu + time.process_time() - begun_cpu)
    setattr(module, name, wrapper)
for module, name, label in [
    (command, "_announce_image_files", "listing the folder"),
    (changes, "load_current", "stat walk + loading (key, size, mtime, inode) rows"),
    (changes, "compare", "the join with the index"),
    (changes, "apply", "removals and the order"),
    (api, "_measure", "measuring (workers)"),
    (policy, "population", "population (shapes, sizes)"),
    (policy, "population_warnings", "quality scores read + limits"),
    (policy, "derive_findings", "findings over the whole index"),
    (hash_groups, "update_groups", "  of which near-duplicate groups"),
    (api, "_write_quarantine", "list writing"),
]:
    timed(module, name, label)
import os
from datalint.index import changes as index_changes
from datalint.index import store
from datalint.scan import images
for module, name, label in [] if not os.environ.get("DATALINT_FINE_PHASES") else [
    (images, "list_image_files", "    listing: the walk"),
    (changes, "take_recorded_states", "    recorded states"),
    (index_changes, "current_order", "    the current order (row ids by position)"),
    (changes, "record_added_files", "    recording added files' states"),
    (changes, "record_files", "    recording measured files' states"),
    (policy, "quality_rows", "    reading the images' scores"),
    (hash_groups, "_stored", "    reading stored groups"),
    (hash_groups, "_regroup", "    regrouping"),
    (store, "write_findings", "    writing findings"),
    (api, "_record_policy", "    recording the policy"),
    (api, "_counts", "    counting"),
]:
    timed(module, name, label)
sys.argv = ["datalint", *sys.argv[1:]]
begun, begun_cpu = time.perf_counter(), time.process_time()
try:
    cli.entry()
except SystemExit:
    pass
total, total_cpu = time.perf_counter() - begun, time.process_time() - begun_cpu
print(f"  imports {imported:.2f} (cpu {imported_cpu:.2f})", file=sys.stderr)
for label, (seconds, cpu) in spent.items():
    print(f"  {label} {seconds:.2f} (cpu {cpu:.2f})", file=sys.stderr)
print(f"  the command after the imports {total:.2f} (cpu {total_cpu:.2f})", file=sys.stderr)
"""


def index_content(db: Path) -> list[tuple[Any, ...]]:
    """Per sample its position (`position_of`: datalint.index.positions), key, status and findings
    (kind and detail: a near-duplicate's detail names its group and representative, a quality
    finding the population's median)."""
    from datalint.index import read

    with contextlib.closing(read.connect(db)) as connection:
        return connection.execute(
            "SELECT position_of(s.idx) AS position, s.key, s.status, (SELECT group_concat(kind || ': ' "
            "|| detail, ' | ') FROM (SELECT kind, detail FROM findings f WHERE f.idx = s.idx ORDER BY kind)) "
            "FROM samples s ORDER BY position"
        ).fetchall()


def list_content(quarantine: Path) -> list[Any]:
    return json.loads(quarantine.read_text())["samples"]


def run_incremental(args: argparse.Namespace, work: Path) -> None:
    folder = work / "images"
    files = Files(side=args.side, kind=args.format)
    started = time.perf_counter()
    make_folder(folder, args.files, files)
    sizes = [len(files.content(n)) for n in range(0, args.files, max(1, args.files // 50))]
    made = time.perf_counter() - started
    print(f"made {args.files:,} {args.side}x{args.side} {args.format.upper()} files "
          f"(~{statistics.mean(sizes) / 1024:.1f} KB each) in {made:.0f} s")  # fmt: skip
    full_wall, full = scan(folder, work / "a.db", args.workers)
    print(f"full scan:         {full_wall:8.2f} s wall, {full['elapsed']:8.2f} s in the scan, "
          f"{full['scanned']:,} measured")  # fmt: skip
    planted = mutate(folder, args.files, files)
    again_wall, again = scan(folder, work / "a.db", args.workers, phases=args.phases)
    print(f"incremental scan:  {again_wall:8.2f} s wall, {again['elapsed']:8.2f} s in the scan, "
          f"{again['scanned']:,} measured; changes {again['changes']}")  # fmt: skip
    print(f"  planted {planted}")
    print(f"  incremental / full: {again_wall / full_wall:.1%} of the wall time, "
          f"{again['elapsed'] / full['elapsed']:.1%} of the time in the scan")  # fmt: skip
    rescan_wall, _ = scan(folder, work / "b.db", args.workers)
    same_index = index_content(work / "a.db") == index_content(work / "b.db")
    same_list = list_content(work / "a.quarantine.json") == list_content(work / "b.quarantine.json")
    entries = len(list_content(work / "b.quarantine.json"))
    print(f"full scan of the changed folder: {rescan_wall:.2f} s; index identical: {same_index}; "
          f"list identical: {same_list} ({entries} entries)")  # fmt: skip
    if args.floor:
        print("the floor, on the changed folder (least of 3 runs of each part):")
        floor = print_floor(floor_parts(folder, work, args.workers, 3), full_wall)
        beyond = again_wall - floor
        print(f"incremental {again_wall:.2f} s against the floor {floor:.2f} s: {beyond:.2f} s beyond it "
              f"({beyond / floor:.2f}x the floor; the target is at most 1x)")  # fmt: skip


# ----------------------------------------------------------------------------------------------
# Incremental scans of a sharded index (it keeps a population summary)


def write_shard(path: Path, numbers: range) -> None:
    """A webdataset tar of samples `numbers`: a 32 px PNG and a class each."""
    import io
    import tarfile

    with tarfile.open(path, "w", format=tarfile.USTAR_FORMAT) as archive:
        for n in numbers:
            for extension, data in (("png", png_bytes(n)), ("cls", str(n % 10).encode())):
                info = tarfile.TarInfo(f"s{n:09d}.{extension}")
                info.size = len(data)
                archive.addfile(info, io.BytesIO(data))


def make_shards(folder: Path, count: int, per_shard: int) -> None:
    from concurrent.futures import ProcessPoolExecutor

    folder.mkdir(parents=True, exist_ok=True)
    starts = range(0, count, per_shard)
    paths = [folder / f"train-{start // per_shard:06d}0.tar" for start in starts]
    numbers = [range(start, min(count, start + per_shard)) for start in starts]
    with ProcessPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        for _ in pool.map(write_shard, paths, numbers):
            pass


_SHARDED_CHILD = """
import sys
from datalint import cli
from datalint.scan import summaries, summary_findings
sources = []
judge = summary_findings.findings
def recorded(*args, **kwargs):
    found = judge(*args, **kwargs)
    sources.append("the kept summary")
    return found
summary_findings.findings = recorded
sys.argv = ["datalint", *sys.argv[1:]]
try:
    cli.entry()
except SystemExit:
    pass
print("judged from", sources[-1] if sources else "the whole index", file=sys.stderr)
peak = next(line for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print("peak", int(peak.split()[1]) / 1024, file=sys.stderr)  # the scanning process's own, in MiB
"""


def sharded_scan(pattern: str, db: Path, workers: int, mode: str) -> tuple[float, dict[str, Any], str, float]:
    """(wall, the scan's JSON summary, where it judged from, the scanning process's peak RSS in MiB:
    where judging the whole index shows, the workers apart)."""
    command = [sys.executable, "-c", _SHARDED_CHILD, "scan", "--webdataset", pattern, "--db", str(db),
               "--workers", str(workers), "--shard-index", mode, "--format", "json",
               "--progress", "none"]  # fmt: skip
    started = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    if done.returncode not in (0, 1):
        raise SystemExit(done.stderr)
    lines = done.stderr.splitlines()
    said = dict(line.split(" ", 1) for line in lines if line.startswith(("judged ", "peak ")))
    return wall, json.loads(done.stdout), said["judged"].removeprefix("from "), float(said["peak"])


def run_sharded(args: argparse.Namespace, work: Path) -> None:
    folder = work / "shards"
    started = time.perf_counter()
    make_shards(folder, args.files, args.per_shard)
    print(f"made {args.files:,} samples in {len(list(folder.glob('*.tar')))} shards in "
          f"{time.perf_counter() - started:.0f} s")  # fmt: skip
    pattern = str(folder / "train-*.tar")
    wall, full, judged, peak = sharded_scan(pattern, work / "a.db", args.workers, "on")
    print(f"full scan (shard files): {wall:8.2f} s wall, {full['scanned']:,} measured, judged from "
          f"{judged}, peak RSS {peak:.0f} MiB")  # fmt: skip
    middle = args.files // 2 // args.per_shard
    write_shard(folder / f"train-{middle:06d}5.tar", range(10**8, 10**8 + args.per_shard))  # sorts after it
    (folder / f"train-{args.files // 3 // args.per_shard:06d}0.tar").unlink()
    # The same rescan of a copy whose summary is gone: judged whole, as when a scan finds it stale.
    shutil.copy(work / "a.db", work / "w.db")
    with contextlib.closing(sqlite3.connect(work / "w.db")) as connection, connection:
        connection.execute("DROP TABLE population_summary")
    for name, db in (("kept summary", "a.db"), ("no summary", "w.db")):
        wall, again, judged, peak = sharded_scan(pattern, work / db, args.workers, "on")
        print(f"incremental scan, {name}: {wall:8.2f} s wall, {again['scanned']:,} measured, judged from "
              f"{judged}, peak RSS {peak:.0f} MiB; changes {again['changes']}")  # fmt: skip
    sys.path.insert(0, str(ROOT))  # this tree's datalint, as the scans ran it
    with contextlib.closing(sqlite3.connect(work / "a.db")) as connection:
        from datalint.scan import summaries

        kept = summaries.read_summary(connection)
        current = kept is not None and kept == summaries.summarize(connection)
    print(f"  the kept summary equals a count of the index's rows: {current}")
    wall, _, judged, peak = sharded_scan(pattern, work / "b.db", args.workers, "off")
    print(f"full single-writer scan of the changed shards: {wall:.2f} s, judged from {judged}, "
          f"peak RSS {peak:.0f} MiB")  # fmt: skip
    for db in ("a", "w"):
        same_index = index_content(work / f"{db}.db") == index_content(work / "b.db")
        same_list = list_content(work / f"{db}.quarantine.json") == list_content(work / "b.quarantine.json")
        print(f"  {db}.db: index identical to it: {same_index}; list identical: {same_list}")


# ----------------------------------------------------------------------------------------------
# The policy pass alone


_POLICY_CHILD = """
import shutil, sys, time
from pathlib import Path
from datalint.index import store
from datalint.scan import policy

source, copy, repeat = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
options = policy.PolicyOptions()
spent = []
for _ in range(repeat):
    shutil.copy(source, copy)  # each pass on the same index, stored groups included
    index = store.open_index(copy)
    begun = time.process_time()
    peers = policy.population(index)
    policy.population_warnings(index, options)
    found = policy.derive_findings(index, options, peers, keep_groups=True)
    store.write_findings(index, (finding.to_row() for finding in found))
    spent.append(time.process_time() - begun)
    index.close()
spent.sort()
print(f"{spent[0]:.3f} {spent[len(spent) // 2]:.3f} {len(found)}")
"""


def run_policy(args: argparse.Namespace, work: Path) -> None:
    """What a scan does after measuring, on an index as it is: the population, the quality limits,
    every finding (the near-duplicate groups updated from those stored) and their writing. CPU
    time of the process, least and median over `--repeat` passes: what a loaded machine moves least."""
    if args.db is None:
        raise SystemExit("policy: pass --db, an index a scan wrote (scan_incremental.py incremental --keep)")
    done = subprocess.run(
        [sys.executable, "-c", _POLICY_CHILD, str(args.db), str(work / "policy.db"), str(args.repeat)],
        cwd=ROOT, capture_output=True, text=True, check=True,
    )  # fmt: skip
    least, median, findings = done.stdout.split()
    print(f"policy pass over {args.db}: CPU {least} s least, {median} s median of {args.repeat} passes; "
          f"{findings} findings")  # fmt: skip


# ----------------------------------------------------------------------------------------------
# The floor: what an incremental scan pays before it touches its index


_START_CHILD = "import datalint.cli, datalint.commands.scan, datalint.scan.api"


def run_floor(args: argparse.Namespace, work: Path) -> None:
    """The least an incremental scan of `--folder` costs that stats every file and measures the
    changed ones (1.1% of them), as shares of a full scan (`--full-seconds`)."""
    if args.folder is None:
        raise SystemExit("floor: pass --folder, a folder of images (incremental --keep leaves one)")
    print_floor(floor_parts(args.folder, work, args.workers, max(1, args.repeat)), args.full_seconds)


def floor_parts(folder: Path, work: Path, workers: int, repeat: int) -> list[tuple[str, float]]:
    """(what, least seconds of `repeat` runs) for each part of the floor of an incremental scan."""
    from datalint.scan import changes
    from datalint.scan.images import list_image_files

    start = _least(repeat, lambda: _timed_run([sys.executable, "-c", _START_CHILD]))
    listing_seconds = _least(repeat, lambda: _timed(lambda: list_image_files(folder)))
    files = list_image_files(folder).files
    stat_seconds = _least(repeat, lambda: _timed(lambda: list(changes.current_rows(files, folder))))
    changed = max(1, round(len(files) * 0.011))
    step = max(1, len(files) // changed)
    part = work / "changed"
    for relative in files[::step][:changed]:
        (part / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(folder / relative, part / relative)
    measuring = _least(repeat, lambda: _measuring_seconds(part, work / "changed.db", workers))
    return [
        ("interpreter start and imports", start),
        (f"listing {len(files):,} files", listing_seconds),
        (f"one stat per file ({len(files):,})", stat_seconds),
        (f"measuring {changed:,} files ({workers} workers, pool start included)", measuring),
    ]


def print_floor(parts: list[tuple[str, float]], full_seconds: float | None) -> float:
    """Each part and the floor (returned), with its share of a full scan when that is given."""
    total = sum(seconds for _label, seconds in parts)
    for label, seconds in [*parts, ("the floor", total)]:
        share = f" ({seconds / full_seconds:.1%} of the full scan)" if full_seconds else ""
        print(f"  {label}: {seconds:.2f} s{share}")
    return total


def _least(repeat: int, measure: Any) -> float:
    return min(measure() for _ in range(repeat))


def _timed(work: Any) -> float:
    started = time.perf_counter()
    work()
    return time.perf_counter() - started


def _timed_run(command: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(command, cwd=ROOT, check=True)
    return time.perf_counter() - started


def _measuring_seconds(folder: Path, db: Path, workers: int) -> float:
    """The measuring phase's wall time of a fresh scan of `folder` (`_PHASES_CHILD`'s timer)."""
    for stale in db.parent.glob(db.name + "*"):
        stale.unlink()
    command = [sys.executable, "-c", _PHASES_CHILD, "scan", "--images", str(folder), "--db", str(db),
               "--workers", str(workers), "--format", "json", "--progress", "none"]  # fmt: skip
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
    if done.returncode not in (0, 1):
        raise SystemExit(done.stderr)
    for line in done.stderr.splitlines():
        if line.strip().startswith("measuring (workers)"):
            return float(line.split("measuring (workers)")[1].split()[0])
    raise SystemExit(f"no measuring phase in:\n{done.stderr}")


# ----------------------------------------------------------------------------------------------
# The stat walk


_WALK_CHILD = """
import resource, sys, time
from pathlib import Path
from datalint.index import store
from datalint.scan import changes
from datalint.scan.images import list_image_files

def rss():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024

folder, db = Path(sys.argv[1]), Path(sys.argv[2])
base = rss()
started = time.perf_counter()
listing = list_image_files(folder)
listed = time.perf_counter() - started
after_listing = rss()
index = store.open_index(db)
walk = time.perf_counter()
reason = changes.load_current(index, changes.current_rows(iter(listing.files), folder))
walked = time.perf_counter() - walk
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
figures = (len(listing.files), round(listed, 2), round(walked, 2), round(base), round(after_listing),
           round(peak))
print(*figures, reason)
"""


def run_statwalk(args: argparse.Namespace, work: Path) -> None:
    folder = work / "empty"
    started = time.perf_counter()
    for d in range(1000):
        sub = folder / f"d{d:03d}"
        sub.mkdir(parents=True)
        for n in range(args.files // 1000):
            os.close(os.open(sub / f"{n:06d}.jpg", os.O_CREAT | os.O_WRONLY, 0o644))
    print(f"made {args.files:,} empty files in {time.perf_counter() - started:.0f} s")
    done = subprocess.run(
        [sys.executable, "-c", _WALK_CHILD, str(folder), str(work / "walk.db")],
        cwd=ROOT, capture_output=True, text=True, check=True,
    )  # fmt: skip
    files, listed, walked, base, after_listing, peak, reason = done.stdout.split()
    print(f"{int(files):,} files: listing {listed} s, stat + load into the index {walked} s; "
          f"RSS {base} MiB at start, {after_listing} MiB after the listing, peak {peak} MiB "
          f"(followable: {reason == 'None'})")  # fmt: skip


# ----------------------------------------------------------------------------------------------
# datalint watch


def run_watch(args: argparse.Namespace, work: Path) -> None:
    folder, db = work / "watched", work / "w.db"
    quarantine = work / "w.quarantine.json"
    make_folder(folder, args.files)
    command = [sys.executable, "-m", "datalint", "watch", "--images", str(folder), "--db", str(db),
               "--workers", str(args.workers), "--settle", args.settle]  # fmt: skip
    child = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             start_new_session=True)  # fmt: skip
    try:
        wait(lambda: rows(db) == args.files, 600)
        latencies = [damaged_file_latency(folder, quarantine, trial) for trial in range(args.trials)]
        middle, worst = statistics.median(latencies), max(latencies)
        print(f"damaged file in the list after its last write (--settle {args.settle}, "
              f"{args.trials} trials): median {middle:.2f} s, max {worst:.2f} s")  # fmt: skip
        drop(args, folder, db, work)
    finally:
        child.send_signal(signal.SIGTERM)
        child.communicate(timeout=60)
        print(f"watch exit code after SIGTERM: {child.returncode}")


def damaged_file_latency(folder: Path, quarantine: Path, trial: int) -> float:
    key = f"late/{trial:03d}.png"
    (folder / "late").mkdir(exist_ok=True)
    (folder / key).write_bytes(png_bytes(20_000_000 + trial)[:70])
    written = time.perf_counter()
    wait(lambda: key in keys_in(quarantine), 60)
    return time.perf_counter() - written


def drop(args: argparse.Namespace, folder: Path, db: Path, work: Path) -> None:
    staging = work / "staging"
    staging.mkdir()
    for n in range(args.drop):
        (staging / f"{n:06d}.png").write_bytes(png_bytes(30_000_000 + n))
    before = rows(db)
    started = time.perf_counter()
    shutil.copytree(staging, folder / "dropped")
    copied = time.perf_counter() - started
    wait(lambda: rows(db) == before + args.drop, 900)
    absorbed = time.perf_counter() - started
    with contextlib.closing(sqlite3.connect(db)) as connection:
        present = connection.execute("SELECT COUNT(*) FROM samples WHERE key LIKE 'dropped/%'").fetchone()[0]
    print(f"{args.drop:,} files copied in at once ({copied:.1f} s to copy): all in the index after "
          f"{absorbed:.1f} s; {present:,} rows for them, {args.drop - present} missing")  # fmt: skip


def rows(db: Path) -> int:
    try:
        with contextlib.closing(sqlite3.connect(db, timeout=5)) as connection:
            return int(connection.execute("SELECT COUNT(*) FROM samples").fetchone()[0])
    except sqlite3.Error:
        return 0


def keys_in(quarantine: Path) -> set[str]:
    try:
        return {entry["key"] for entry in json.loads(quarantine.read_text())["samples"]}
    except (OSError, ValueError):
        return set()


def wait(condition: Any, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise SystemExit("timed out")
        time.sleep(0.02)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("what", choices=("incremental", "sharded", "statwalk", "watch", "policy", "floor"))
    parser.add_argument("--files", type=int, default=100_000)
    parser.add_argument("--side", type=int, default=32, help="incremental: the images' side in px")
    parser.add_argument("--format", choices=("png", "jpeg"), default="png",
                        help="incremental: png (random pixels) or jpeg (camera-like content)")  # fmt: skip
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--per-shard", type=int, default=1000, help="sharded: samples per tar shard")
    parser.add_argument("--settle", default="2s")
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--drop", type=int, default=10_000)
    parser.add_argument("--keep", action="store_true", help="keep the scratch folder")
    parser.add_argument("--phases", action="store_true", help="time each phase of the incremental scan")
    parser.add_argument("--db", type=Path, help="policy: the index to judge (it is copied, never written)")
    parser.add_argument("--repeat", type=int, default=6, help="policy: passes; floor: runs of each part")
    parser.add_argument("--folder", type=Path, help="floor: the folder of images")
    parser.add_argument("--full-seconds", type=float, help="floor: a full scan's wall time, for the shares")
    parser.add_argument("--floor", action=argparse.BooleanOptionalAction, default=True,
                        help="incremental: the floor on the changed folder too")  # fmt: skip
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="datalint-incremental-"))
    print(f"load average {os.getloadavg()[0]:.1f}; scratch {work}")
    try:
        commands = {
            "incremental": run_incremental,
            "sharded": run_sharded,
            "statwalk": run_statwalk,
            "watch": run_watch,
            "policy": run_policy,
            "floor": run_floor,
        }
        commands[args.what](args, work)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    print(f"benchmark process peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")


if __name__ == "__main__":
    main()
