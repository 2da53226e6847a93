"""What the quality scores cost an image scan: `datalint scan` with and without `--no-scores`.

    python benchmarks/quality_scan_cost.py /tmp/i14ic --workers 2 --repeat 3
    python benchmarks/quality_scan_cost.py /tmp/i14ic-short --short      # 200 files, one round
    python benchmarks/quality_scan_cost.py /tmp/i14ic --other-tree /work/main  # and another checkout
    python benchmarks/quality_scan_cost.py /tmp/i14ic --probe    # the probe alone, one process
    python benchmarks/quality_scan_cost.py /tmp/i14ic --before-tree /tmp/pre  # and the scan before scores

The image benchmark's corpus (benchmarks/image_corpus.py, seed 1234: 600 files by default, 60%
500x375 and 40% 1024x768, 85% JPEG and 15% PNG, 40 damaged) is generated into the folder when it
has no manifest.csv. Each round scans it once per variant, one after the other in a fresh index, and
times the whole CLI process in wall and CPU seconds (the process and its workers), with the load
average beside it. The cost is the ratio of the scan with scores to the scan without, per round
(neighbours see the same load) and of the medians; the CPU ratio is the steadier figure on a busy
machine. `--other-tree` adds the same two variants run from another checkout (PYTHONPATH).
`--before-tree` adds the scan of a checkout made before quality scores existed (the commit
before they came; it has no `--no-scores` flag, so it runs plain): the issue's "today's scan", against
which the scan with scores is also given as a ratio.
`--probe` times instead the image probe itself in this process (`probe_image_file`, the checkout on
PYTHONPATH), with and without scores, per format: the per-file CPU that the scan's workers spend.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def scan(images: Path, workers: int, scores: bool, tree: str | None) -> tuple[float, float]:
    """(wall s, CPU s) of one `datalint scan` of `images` into a fresh index."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # an installed package has its bytecode compiled
    if tree is not None:
        env["PYTHONPATH"] = tree
    with tempfile.TemporaryDirectory() as scratch:
        db = str(Path(scratch, "scan.db"))
        command = [sys.executable, "-m", "datalint", "scan", "--images", str(images), "--db", db,
                   "--workers", str(workers), "--progress", "none"]  # fmt: skip
        if not scores:
            command.append("--no-scores")
        cpu, started = children_cpu(), time.perf_counter()
        # From the scratch folder: `python -m` puts the working directory first on sys.path, and a
        # checkout there would win over PYTHONPATH.
        quiet = subprocess.DEVNULL
        subprocess.run(command, check=False, stdout=quiet, stderr=quiet, env=env, cwd=scratch)
        return time.perf_counter() - started, children_cpu() - cpu


def probe_cpu(images: Path, rounds: int) -> None:
    """CPU ms per file of the probe with and without scores, per format, the best of `rounds`."""
    from datalint.scan.images import ImageOptions, StderrCapture, probe_image_file, warm_up_decoders

    files = sorted(path for path in images.rglob("*") if path.is_file())
    warm_up_decoders()
    capture = StderrCapture()
    best: dict[tuple[bool, str], float] = {}
    for _round in range(rounds):
        for scores in (True, False):
            options = ImageOptions(quality=scores)
            spent: dict[str, float] = defaultdict(float)
            for path in files:
                started = time.process_time()
                probe_image_file(path, options, capture)
                spent[path.suffix.lower()] += time.process_time() - started
            spent["all"] = sum(spent.values())
            for suffix, seconds in spent.items():
                best[scores, suffix] = min(best.get((scores, suffix), seconds), seconds)
    counts = defaultdict(int, all=len(files))
    for path in files:
        counts[path.suffix.lower()] += 1
    print(f"{len(files)} files, probe CPU ms per file (best of {rounds}) [load {os.getloadavg()[0]:.1f}]")
    for suffix in sorted(counts, key=lambda name: -counts[name]):
        with_scores = best[True, suffix] * 1000 / counts[suffix]
        without = best[False, suffix] * 1000 / counts[suffix]
        ratio = with_scores / without if without else float("nan")
        cells = f"{with_scores:6.2f} with scores, {without:6.2f} without: {ratio:.2f}x"
        print(f"{suffix:6} {counts[suffix]:5} files: {cells}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3, help="rounds (default 3)")
    parser.add_argument("--short", action="store_true", help="a 200-file corpus and one round")
    parser.add_argument("--other-tree", help="also run another checkout of datalint (its root)")
    parser.add_argument("--before-tree", help="also run a checkout from before quality scores (its root)")
    parser.add_argument("--probe", action="store_true", help="time the probe in this process instead")
    args = parser.parse_args()
    if not (args.folder / "manifest.csv").exists():
        from image_corpus import generate_corpus

        generate_corpus(args.folder, n=200 if args.short else 600, workers=args.workers)
    images = args.folder / "images"
    if args.probe:
        probe_cpu(images, 1 if args.short else args.repeat)
        return
    files = sum(1 for path in images.rglob("*") if path.is_file())
    variants = [("scores", True, None), ("no scores", False, None)]
    if args.other_tree:
        variants += [(f"{args.other_tree} scores", True, args.other_tree),
                     (f"{args.other_tree} no scores", False, args.other_tree)]  # fmt: skip
    if args.before_tree:
        # That checkout has no --no-scores: `scores=True` runs it with no flag, as its users ran it.
        variants.append(("before scores", True, args.before_tree))
    scan(images, args.workers, True, None)  # a first run writes the bytecode and warms the page cache
    walls: dict[str, list[float]] = {name: [] for name, _scores, _tree in variants}
    cpus: dict[str, list[float]] = {name: [] for name, _scores, _tree in variants}
    print(f"{files} files in {images}, {args.workers} workers; wall s (CPU s) [load average 1 min]")
    for number in range(1, (1 if args.short else args.repeat) + 1):
        cells = []
        for name, scores, tree in variants:
            load = os.getloadavg()[0]
            wall, cpu = scan(images, args.workers, scores, tree)
            walls[name].append(wall)
            cpus[name].append(cpu)
            cells.append(f"{name} {wall:.2f} ({cpu:.2f}) [{load:.1f}]")
        ratio = walls["scores"][-1] / walls["no scores"][-1]
        cpu_ratio = cpus["scores"][-1] / cpus["no scores"][-1]
        print(f"round {number}: " + ", ".join(cells) + f": {ratio:.2f}x wall, {cpu_ratio:.2f}x CPU")
    for name, _scores, _tree in variants:
        wall, cpu = statistics.median(walls[name]), statistics.median(cpus[name])
        print(f"median {name}: {wall:.2f} s wall, {cpu:.2f} s CPU")
    wall = statistics.median(walls["scores"]) / statistics.median(walls["no scores"])
    cpu = statistics.median(cpus["scores"]) / statistics.median(cpus["no scores"])
    print(f"scores cost (medians): {wall:.2f}x wall, {cpu:.2f}x CPU")
    if args.before_tree:
        wall = statistics.median(walls["scores"]) / statistics.median(walls["before scores"])
        cpu = statistics.median(cpus["scores"]) / statistics.median(cpus["before scores"])
        print(f"against the scan before scores (medians): {wall:.2f}x wall, {cpu:.2f}x CPU")


if __name__ == "__main__":
    main()
