"""Near-duplicate grouping of synthetic 64-bit hashes: the multi-index hash table, against brute force.

    python benchmarks/quality_hashes.py --sizes 10000,100000,1000000 --radius 10 [--brute-max 5000]

Uniform random hashes (the worst case for any index: no structure to exploit) plus 1% planted near
copies (0-6 bits flipped) and 0.1% exact copies. Each size runs in a fresh process, so its peak
RSS (ru_maxrss) is its own. Prints the split the cost model chose, the wall time of grouping
(`HashIndex(...).groups()`, what the scan's policy calls), the pairs and groups found, whether every
planted copy landed in its original's group, peak RSS, and where brute force runs (sizes up to
--brute-max), whether the pairs equal brute force's.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def hashes_of(size: int, seed: int) -> tuple[Any, Any, Any]:
    """(hashes, planted copies' positions, their originals' positions)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    values = rng.integers(0, 2**64, size=size, dtype=np.uint64, endpoint=False)
    near = size // 100
    originals = rng.integers(0, size, near)
    flips = np.zeros(near, np.uint64)
    for row, count in enumerate(rng.integers(0, 7, near)):
        for bit in rng.choice(64, count, replace=False):
            flips[row] |= np.uint64(1) << np.uint64(bit)
    exact = rng.integers(0, size, size // 1000)
    copies = np.concatenate([values[originals] ^ flips, values[exact]])
    positions = np.arange(size, size + len(copies))
    return np.concatenate([values, copies]), positions, np.concatenate([originals, exact])


def _cpu_seconds() -> float:
    """CPU time of this process and of its finished children (the join's worker processes)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def measure(size: int, radius: int, brute_max: int, jobs: int | None) -> dict[str, Any]:
    from datalint.scan import quality
    from datalint.scan.hash_index import HashIndex

    values, copies, originals = hashes_of(size, size)
    started, cpu = time.perf_counter(), _cpu_seconds()
    index = HashIndex(values, radius, jobs=jobs)
    groups = index.groups()
    seconds, cpu = time.perf_counter() - started, _cpu_seconds() - cpu
    group_of = {member: number for number, members in enumerate(groups) for member in members}
    found = sum(
        group_of.get(int(c), -1) == group_of.get(int(o), -2) for c, o in zip(copies, originals, strict=True)
    )
    a, _b = index.unique_pairs()
    result: dict[str, Any] = {
        "n": len(values),
        "radius": radius,
        "blocks": [(block.width, block.tolerance) for block in index.blocks] or "brute force",
        "processes": index.jobs,
        "seconds": round(seconds, 2),
        "cpu_seconds": round(cpu, 2),
        "pairs_of_distinct_hashes": len(a),
        "groups": len(groups),
        "planted_grouped": f"{found}/{len(copies)}",
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        "worker_peak_rss_mib": round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024),
    }
    if size <= brute_max:
        hashes = [int(value) for value in values]
        started = time.perf_counter()
        result["same_pairs_as_brute_force"] = quality.brute_force_pairs(hashes, radius) == set(index.pairs())
        result["brute_force_seconds"] = round(time.perf_counter() - started, 2)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--radius", type=int, default=10)
    parser.add_argument("--brute-max", type=int, default=5000)
    parser.add_argument("--jobs", type=int, help="processes (default: one per core for a long join)")
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)  # a single size, in this process
    args = parser.parse_args()
    if args.one is not None:
        print(json.dumps(measure(args.one, args.radius, args.brute_max, args.jobs)))
        return
    for size in (int(part) for part in args.sizes.split(",")):
        command = [sys.executable, __file__, "--one", str(size), "--radius", str(args.radius)]
        command += ["--jobs", str(args.jobs)] if args.jobs is not None else []
        done = subprocess.run([*command, "--brute-max", str(args.brute_max)], capture_output=True, text=True)
        if done.returncode != 0:
            sys.exit(done.stderr)
        print(done.stdout.strip(), flush=True)


if __name__ == "__main__":
    main()
