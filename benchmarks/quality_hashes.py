"""Near-duplicate grouping: the multi-index hash table against brute force, on synthetic 64-bit hashes.

    python benchmarks/quality_hashes.py --sizes 2000,10000,30000 --radius 10 [--brute-max 5000]

Random hashes plus 1% planted near copies (0-6 bits flipped). Prints wall time and peak memory
(ru_maxrss) per size, the candidate comparisons made, and checks the pairs equal brute force's
where brute force runs (sizes up to --brute-max).
"""

from __future__ import annotations

import argparse
import random
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from datalint.scan import quality


def hashes_of(size: int, seed: int) -> list[int]:
    rng = random.Random(seed)
    values = [rng.getrandbits(64) for _ in range(size)]
    for _ in range(size // 100):
        base = rng.choice(values)
        values.append(base ^ sum(1 << bit for bit in rng.sample(range(64), rng.randint(0, 6))))
    return values


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="2000,10000,30000")
    parser.add_argument("--radius", type=int, default=10)
    parser.add_argument("--brute-max", type=int, default=5000)
    args = parser.parse_args()
    for size in (int(part) for part in args.sizes.split(",")):
        values = hashes_of(size, size)
        started = time.perf_counter()
        pairs = set(quality.HashIndex(values, args.radius).pairs())
        groups = quality.group_pairs(len(values), pairs)
        seconds = time.perf_counter() - started
        line = (
            f"n={len(values):>9,}  index {seconds:8.2f} s  pairs {len(pairs):>7,}  groups {len(groups):>6,}"
        )
        if size <= args.brute_max:
            started = time.perf_counter()
            same = quality.brute_force_pairs(values, args.radius) == pairs
            line += f"  brute force {time.perf_counter() - started:8.2f} s  same pairs: {same}"
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"{line}  peak RSS {peak:.0f} MiB", flush=True)


if __name__ == "__main__":
    main()
