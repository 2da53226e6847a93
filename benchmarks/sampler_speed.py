"""Quarantine-aware samplers against torch's own, on a 10M-sample dataset with 10k quarantined.

For each sampler: the time to build it, the time of one epoch (every index drawn, as a DataLoader
would, as Python ints), and the peak memory the sampler added. Each case runs in its own process so
that peaks do not mix; the time is the best of --repeat runs.

    .venv/bin/python benchmarks/sampler_speed.py [--size 10000000] [--quarantined 10000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import collections
import json
import resource
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

# name -> (the alternative it is measured against, or None for the alternatives themselves)
CASES: dict[str, str | None] = {
    "RandomSampler": None,
    "QuarantineSampler(shuffle=True)": "RandomSampler",
    "quarantine_filter(RandomSampler)": "RandomSampler",
    "DistributedSampler(8 ranks, rank 0)": None,
    "DistributedQuarantineSampler(8 ranks, rank 0)": "DistributedSampler(8 ranks, rank 0)",
}


class Sized:
    """A dataset of `length` samples; samplers only ask for its length."""

    def __init__(self, length: int) -> None:
        self.length = length

    def __len__(self) -> int:
        return self.length


def _builders(size: int, quarantined: int) -> dict[str, Callable[[], Any]]:
    import numpy as np
    import torch
    from torch.utils.data import DistributedSampler, RandomSampler

    from datalint.torch import DistributedQuarantineSampler, Quarantine, QuarantineSampler, quarantine_filter

    dataset = Sized(size)
    bad = np.random.default_rng(0).choice(size, size=quarantined, replace=False)
    quarantine = Quarantine.from_indices(bad.tolist(), length=size)
    return {
        "RandomSampler": lambda: RandomSampler(dataset, generator=torch.Generator().manual_seed(0)),
        "QuarantineSampler(shuffle=True)": lambda: QuarantineSampler(
            dataset, quarantine, shuffle=True, generator=torch.Generator().manual_seed(0)
        ),
        "quarantine_filter(RandomSampler)": lambda: quarantine_filter(
            RandomSampler(dataset, generator=torch.Generator().manual_seed(0)), quarantine
        ),
        "DistributedSampler(8 ranks, rank 0)": lambda: DistributedSampler(dataset, 8, 0, seed=0),
        "DistributedQuarantineSampler(8 ranks, rank 0)": lambda: DistributedQuarantineSampler(
            dataset, quarantine, 8, 0, seed=0
        ),
    }


def _peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def measure(case: str, size: int, quarantined: int, repeat: int) -> dict[str, Any]:
    """One case, in this process: best build and epoch times, and the peak memory it added."""
    build = _builders(size, quarantined)[case]
    baseline = _peak_rss_mib()
    builds, epochs = [], []
    for _ in range(repeat):
        started = time.perf_counter()
        sampler = build()
        built = time.perf_counter()
        last = collections.deque(enumerate(sampler, 1), maxlen=1)  # drains the epoch in C
        epochs.append(time.perf_counter() - built)
        builds.append(built - started)
        count = last[0][0] if last else 0
        del sampler, last
    return {
        "case": case,
        "build_s": min(builds),
        "epoch_s": min(epochs),
        "total_s": min(b + e for b, e in zip(builds, epochs, strict=True)),
        "indices": count,
        "peak_added_mib": _peak_rss_mib() - baseline,
    }


def _run_case(case: str, args: argparse.Namespace) -> dict[str, Any]:
    command = [sys.executable, __file__, "--case", case, "--size", str(args.size),
               "--quarantined", str(args.quarantined), "--repeat", str(args.repeat)]  # fmt: skip
    output = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    result: dict[str, Any] = json.loads(output.strip().splitlines()[-1])
    return result


def report(results: dict[str, dict[str, Any]]) -> str:
    lines = [
        "| sampler | build s | epoch s | build + epoch s | ratio to torch | peak added MiB | indices |",
        "|---|---|---|---|---|---|---|",
    ]
    for case, against in CASES.items():
        row = results[case]
        ratio = f"{row['total_s'] / results[against]['total_s']:.2f}x" if against else "1 (baseline)"
        lines.append(
            f"| {case} | {row['build_s']:.3f} | {row['epoch_s']:.3f} | {row['total_s']:.3f} | {ratio}"
            f" | {row['peak_added_mib']:.0f} | {row['indices']:,} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=10_000_000)
    parser.add_argument("--quarantined", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--case", choices=list(CASES), help="measure one case here (used internally)")
    args = parser.parse_args()
    if args.case:
        print(json.dumps(measure(args.case, args.size, args.quarantined, args.repeat)))
        return
    results = {case: _run_case(case, args) for case in CASES}
    print(f"{args.size:,} samples, {args.quarantined:,} quarantined, best of {args.repeat}\n")
    print(report(results))


if __name__ == "__main__":
    main()
