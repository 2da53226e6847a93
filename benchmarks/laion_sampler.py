"""The lazy-order samplers at LAION scale: N = 1e9 samples, 1e7 quarantined (simulated, no dataset).

The list is written once as a binary quarantine list (sorted uint64, memory-mapped by
`load_quarantine`). Then, in a fresh process per case: build `DistributedQuarantineSampler` for
rank 0 of 8 (order="lazy", the default at this size), time the first index and 10M indices drawn as
Python ints (as a DataLoader draws them), and report the process's peak RSS: after `import torch`
alone (and the benchmark's own 10M-entry record of the draw), and at the end, with the resident
memory split into private (anonymous) and file-backed (the mapped list, one copy per node).
A chi-square test over 1000 equal buckets of [0, N) checks that the 10M drawn indices are spread
as the good samples are (expected count per bucket = good samples in it).

    .venv/bin/python benchmarks/laion_sampler.py [--size 1000000000] [--quarantined 10000000]
        [--draw 10000000] [--list PATH]
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from laion_common import peak_rss_mib

BUCKETS = 1000


def resident_mib() -> dict[str, float]:
    fields = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in {"RssAnon", "RssFile"}:
            fields[name] = round(int(value.split()[0]) / 1024, 1)
    return fields


def simulated_list(size: int, quarantined: int, path: Path) -> None:
    from datalint.index.binary_list import write_binary_quarantine

    rng = np.random.default_rng(2026)
    chosen = np.unique(rng.integers(0, size, quarantined, dtype=np.int64))
    while len(chosen) < quarantined:  # birthday collisions: top up to exactly `quarantined`
        extra = rng.integers(0, size, quarantined - len(chosen), dtype=np.int64)
        chosen = np.unique(np.concatenate([chosen, extra]))
    write_binary_quarantine(path, chosen, length=size, dataset="simulated")


def chi_square_p(statistic: float, dof: int) -> float:
    """Upper tail of chi-square (Wilson-Hilferty normal approximation; exact enough at 999 dof)."""
    z = ((statistic / dof) ** (1 / 3) - (1 - 2 / (9 * dof))) / math.sqrt(2 / (9 * dof))
    return 0.5 * math.erfc(z / math.sqrt(2))


def measure(size: int, list_path: str, draw: int, replicas: int) -> dict[str, float | int | str]:
    import torch  # noqa: F401  (the baseline every rank pays anyway)

    drawn = np.full(draw, -1, dtype=np.int64)  # the benchmark's own record of the draw, touched now
    after_torch = peak_rss_mib()
    from datalint.torch import DistributedQuarantineSampler, load_quarantine

    class Sized:
        def __len__(self) -> int:
            return size

    started = time.perf_counter()
    quarantine = load_quarantine(list_path)
    sampler = DistributedQuarantineSampler(
        Sized(), quarantine, num_replicas=replicas, rank=0, seed=0, order="lazy"
    )
    sampler.set_epoch(1)
    iterator = iter(sampler)
    first = next(iterator)
    to_first = time.perf_counter() - started
    drawn[0] = first
    for position, index in zip(range(1, draw), iterator, strict=False):
        drawn[position] = index
    to_draw = time.perf_counter() - started
    peak = peak_rss_mib()
    resident = resident_mib()
    bad = np.asarray(quarantine.indices)
    edges = np.linspace(0, size, BUCKETS + 1).astype(np.int64)
    good_per_bucket = np.diff(edges) - np.diff(np.searchsorted(bad, edges))
    observed = np.bincount(np.searchsorted(edges, drawn, side="right") - 1, minlength=BUCKETS)
    expected = good_per_bucket / good_per_bucket.sum() * draw
    # Drawn without replacement: the finite-population factor keeps the statistic chi-square(999).
    statistic = float(((observed - expected) ** 2 / expected).sum()) / (1 - draw / good_per_bucket.sum())
    hits = bad[np.searchsorted(bad, drawn).clip(0, len(bad) - 1)] == drawn
    return {
        "order": sampler.order,
        "per_rank": len(sampler),
        "seconds_to_first_index": round(to_first, 3),
        f"seconds_to_{draw}_indices": round(to_draw, 2),
        "peak_rss_after_import_torch_mib": round(after_torch, 1),
        "peak_rss_mib": round(peak, 1),
        "peak_added_by_sampler_mib": round(peak - after_torch, 1),
        "resident_anonymous_mib_at_end": resident["RssAnon"],
        "resident_file_mib_at_end (the mapped list, shared by ranks)": resident["RssFile"],
        "map_bytes": sampler._map.nbytes,
        "distinct_in_draw": len(np.unique(drawn)),
        "any_quarantined_drawn": bool(hits.any()),
        "chi_square": round(statistic, 1),
        "chi_square_dof": BUCKETS - 1,
        "chi_square_p": round(chi_square_p(statistic, BUCKETS - 1), 3),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=10**9)
    parser.add_argument("--quarantined", type=int, default=10**7)
    parser.add_argument("--draw", type=int, default=10**7)
    parser.add_argument("--replicas", type=int, default=8)
    parser.add_argument("--list", type=Path, help="reuse (or keep) the simulated list at this path")
    parser.add_argument("--case", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.case:
        print(json.dumps(measure(args.size, args.case, args.draw, args.replicas)))
        return 0
    with tempfile.TemporaryDirectory() as folder:
        path = args.list or Path(folder) / "quarantine.bin"
        started = time.perf_counter()
        if not path.is_file():
            simulated_list(args.size, args.quarantined, path)
        print(
            f"list: {args.quarantined} indices, {path.stat().st_size / 2**20:.1f} MiB,"
            f" written in {time.perf_counter() - started:.1f} s"
        )
        argv = [sys.executable, __file__, "--size", str(args.size), "--draw", str(args.draw)]
        argv += ["--replicas", str(args.replicas), "--case", str(path)]
        result = subprocess.run(argv, capture_output=True, text=True, check=False)
        if result.returncode:
            sys.stderr.write(result.stderr)
            return result.returncode
        print(json.dumps(json.loads(result.stdout), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
