"""The guard's cost when it posts to `datalint serve`: a real DataLoader (2 workers), three ways.

    python benchmarks/service_guard.py [--samples 3000] [--fail-every 100] [--min-rounds 8]
                                       [--max-rounds 40] [--precision 1.0]

Target: guard overhead at most 2% of throughput, posting to a healthy service and to a dead one
(spooling), against the unguarded loader. Each sample costs ~1 ms (a sleep for the read plus a small
numpy decode); every `fail-every`-th raises. The unguarded loader reads the same samples with the
failing ones returning a stand-in instead of raising (what it would take to train on them without
the guard). Each round runs one epoch of each loader, in a shuffled order, side by side in this one
process, each loader with its two persistent workers (as a training loop keeps them, so an epoch
measures the samples and not two forks). The overhead is paired per round (guarded against that
round's unguarded epoch), so a neighbour slowing the machine for a while moves both. Rounds go on
until the 95% confidence interval of each mean overhead is within +-`precision` points (and at
least `min-rounds`), so the verdict against 2% is not the noise's.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import random
import statistics
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
from service_common import Service, load
from torch.utils.data import DataLoader, Sampler

from datalint.torch import GuardedDataset


class Samples:
    def __init__(self, n: int, fail_every: int, raising: bool) -> None:
        self.n, self.fail_every, self.raising = n, fail_every, raising

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: int) -> np.ndarray:
        time.sleep(0.001)
        value = np.sort(np.random.default_rng(index).random(256)).astype(np.float32)
        if index % self.fail_every == 0:
            if self.raising:
                raise OSError(f"sample {index}: image file is truncated")
            return np.zeros(256, dtype=np.float32)
        return value


class Window(Sampler[int]):
    """Epoch e reads samples [e * size, (e + 1) * size): every epoch's failures are new to the guard
    (it records a sample once per worker process), so each epoch posts or spools its own."""

    def __init__(self, size: int) -> None:
        self.size, self.epoch = size, 0

    def __iter__(self) -> Iterator[int]:
        return iter(range(self.epoch * self.size, (self.epoch + 1) * self.size))

    def __len__(self) -> int:
        return self.size


def loader_of(dataset: object, samples: int) -> DataLoader:  # type: ignore[type-arg]
    # persistent workers, as a training loop keeps them: an epoch is the samples, not two forks
    return DataLoader(
        dataset,  # type: ignore[arg-type]
        batch_size=32,
        num_workers=2,
        persistent_workers=True,
        sampler=Window(samples),
    )


def throughput(loader: DataLoader, samples: int) -> float:  # type: ignore[type-arg]
    loader.sampler.epoch += 1  # type: ignore[attr-defined]
    started = time.perf_counter()
    for _ in loader:
        pass
    return samples / (time.perf_counter() - started)


def interval(values: list[float]) -> tuple[float, float]:
    """The mean and the half-width of its 95% confidence interval (normal approximation)."""
    mean = statistics.fmean(values)
    if len(values) < 2:
        return mean, float("inf")
    return mean, 1.96 * statistics.stdev(values) / math.sqrt(len(values))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=3000, help="samples per epoch")
    parser.add_argument("--fail-every", type=int, default=100)
    parser.add_argument("--min-rounds", type=int, default=8)
    parser.add_argument("--max-rounds", type=int, default=40)
    parser.add_argument(
        "--precision", type=float, default=1.0, help="stop once every 95%% interval is this narrow (+-, %%)"
    )
    args = parser.parse_args()
    # one warning per failure would be the cost measured
    logging.getLogger("datalint").setLevel(logging.ERROR)
    with tempfile.TemporaryDirectory() as folder:
        base = Path(folder)
        os.environ["DATALINT_SPOOL_DIR"] = str(base / "spool")
        service = Service(base, '\n[[datasets]]\nname = "train"\nimages = "/nonexistent"\n')
        os.environ["DATALINT_TOKEN"] = service.token
        healthy = f"{service.base}/v1/datasets/train"
        dead = "http://127.0.0.1:9/v1/datasets/train"  # the discard port: nothing listens
        total = args.samples * (args.max_rounds + 2)  # the warm-up epoch, then one window per round
        loaders = {
            "unguarded": loader_of(Samples(total, args.fail_every, raising=False), args.samples),
            "guard, healthy service": loader_of(
                GuardedDataset(Samples(total, args.fail_every, True), record=healthy, max_failures=None),
                args.samples,
            ),
            "guard, dead service (spooling)": loader_of(
                GuardedDataset(Samples(total, args.fail_every, True), record=dead, max_failures=None),
                args.samples,
            ),
        }
        guarded = [name for name in loaders if name != "unguarded"]
        rates: dict[str, list[float]] = {name: [] for name in loaders}
        overheads: dict[str, list[float]] = {name: [] for name in guarded}
        try:
            for loader in loaders.values():  # warm-up: the workers started, imports, page cache
                throughput(loader, args.samples)
            for round_ in range(args.max_rounds):
                order = list(loaders)
                random.Random(round_).shuffle(order)  # no loader always runs first or last
                measured = {name: throughput(loaders[name], args.samples) for name in order}
                for name, value in measured.items():
                    rates[name].append(value)
                for name in guarded:  # paired: each round's guarded epoch against its unguarded one
                    overheads[name].append(100 * (1 - measured[name] / measured["unguarded"]))
                widths = [interval(overheads[name])[1] for name in guarded]
                if round_ + 1 >= args.min_rounds and max(widths) <= args.precision:
                    break
        finally:
            del loaders  # the workers exit and flush their senders before the service goes
            service.stop()
        spooled = sum(len(p.read_text().splitlines()) for p in (base / "spool").glob("*.jsonl"))
    for name in rates:
        row: dict[str, object] = {
            "loader": name,
            "samples_per_s_median": round(statistics.median(rates[name]), 1),
            "samples_per_s_min_max": [round(min(rates[name]), 1), round(max(rates[name]), 1)],
        }
        if name in overheads:
            mean, half = interval(overheads[name])
            quartiles = statistics.quantiles(overheads[name], n=4)
            row.update(
                overhead_pct_mean=round(mean, 2),
                overhead_pct_ci95=[round(mean - half, 2), round(mean + half, 2)],
                overhead_pct_median=round(statistics.median(overheads[name]), 2),
                overhead_pct_iqr=[round(quartiles[0], 2), round(quartiles[2], 2)],
            )
        print(json.dumps(row))
    failures = len(range(0, args.samples, args.fail_every))
    print(
        json.dumps(
            {
                "rounds": len(rates["unguarded"]),
                "failures_per_epoch": failures,
                "spooled_lines": spooled,
                "load": load(),
            }
        )
    )


if __name__ == "__main__":
    main()
