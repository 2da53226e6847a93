"""The guard's cost when it posts to `datalint serve`: a real DataLoader (2 workers), three ways.

    python benchmarks/service_guard.py [--samples 3000] [--fail-every 100] [--min-rounds 8]
                                       [--max-rounds 40] [--precision 0.25] [--unit-blocks 20]

Target: guard overhead at most 2% of throughput, posting to a healthy service and to a dead one
(spooling), against the unguarded loader. Each sample costs ~1 ms (a sleep for the read plus a small
numpy decode); every `fail-every`-th raises. The unguarded loader reads the same samples with the
failing ones returning a stand-in instead of raising. Each round runs one epoch of each loader, in a
shuffled order, each loader with its two persistent workers.

Wall time on a shared 2-core host moves by 10-20 points between epochs, so the verdict is taken from
CPU clocks, which count only the work done:
- the guard's part of `__getitem__`, timed in this process on this thread's CPU clock over
  `--unit-blocks` interleaved blocks of 2,000 calls: per good sample (the wrapper) and per failure
  (recorded, handed to the sender, replaced), each with its 95% interval;
- its sender threads' CPU in every epoch (posting or spooling), read from the scheduler's accounting of
  the workers' threads named `datalint-send` (/proc/PID/task/TID/schedstat, in ns);
- guard cost = (samples x wrapper + failures x failure + sender CPU) / (workers x the unguarded
  epoch's wall time), per round, with its 95% interval (Student's t). This is an upper bound on the
  throughput it takes: every microsecond is counted as on a worker's critical path.
Rounds go on until that interval is within +-`precision` points (at least `min-rounds`). Reported
beside it: the paired wall-time overhead (with its interval, which the neighbours decide here), the
workers' total extra CPU, the service's CPU per epoch (on this host; on another in a real cluster),
and the replacement reads (the guard reads one more sample per failure to keep the batch full:
`fail-every` sets how many, and each costs what a read costs).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import math
import os
import random
import statistics
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from service_common import Service, load
from torch.utils.data import DataLoader, Sampler

from datalint.torch import GuardedDataset
from datalint.training.remote import SENDER_THREAD

WORKERS = 2
SETTLE_S = 0.5  # after an epoch: the guard's senders post what queued (they linger 0.2 s for a batch)


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


class Constant:
    """A sample that costs nothing to read (odd ones raise, if `failing`): what is left is the guard."""

    VALUE = np.zeros(256, dtype=np.float32)

    def __init__(self, n: int, failing: bool) -> None:
        self.n, self.failing = n, failing

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: int) -> np.ndarray:
        if self.failing and index % 2:
            raise OSError(f"sample {index}: image file is truncated")
        return self.VALUE


def unit_costs(url: str, blocks: int, calls: int) -> dict[str, tuple[float, float]]:
    """The guard's CPU in `__getitem__` (this thread's CPU clock, ns), in interleaved blocks: per good
    sample (the wrapper), and per failure (recorded, handed to the sender, replaced by the next sample:
    a failing call's cost less a good call's)."""
    bare = Constant(blocks * calls * 2, failing=False)
    wrapped = GuardedDataset(Constant(len(bare), failing=False), record=url, max_failures=None)
    failing = GuardedDataset(Constant(len(bare), failing=True), record=url, max_failures=None)
    wrapper, failure = [], []
    for block in range(blocks):
        start = block * calls * 2
        good = range(start, start + calls)
        odd = range(start + 1, start + calls * 2, 2)  # each fails once, and is replaced by the even after it
        plain_ns = cpu_of(bare, good)
        guarded_ns = cpu_of(wrapped, good)
        failed_ns = cpu_of(failing, odd)
        wrapper.append((guarded_ns - plain_ns) / calls)
        failure.append((failed_ns - guarded_ns) / calls)
    return {"wrapper_ns_per_sample": interval(wrapper), "failure_ns_each": interval(failure)}


def cpu_of(dataset: Any, indexes: range) -> int:
    started = time.thread_time_ns()
    for index in indexes:
        dataset[index]
    return time.thread_time_ns() - started


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
        num_workers=WORKERS,
        persistent_workers=True,
        sampler=Window(samples),
    )


def worker_pids(loader: DataLoader) -> list[int]:  # type: ignore[type-arg]
    """The loader's persistent worker processes (alive after the warm-up epoch)."""
    return [worker.pid for worker in loader._iterator._workers]  # type: ignore[union-attr]


def cpu_ns(pid: int, thread: str | None = None) -> int:
    """CPU time of every thread of process `pid`, or of its threads named `thread` (ns, the scheduler's
    own accounting in schedstat, where /proc/PID/stat counts 10 ms ticks)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):  # a thread that ended meanwhile
            if thread is None or (task / "comm").read_text().strip() == thread:
                total += int((task / "schedstat").read_text().split()[0])
    return total


@dataclass
class Epoch:
    rate: float  # samples/s
    wall_s: float
    workers_cpu_s: float  # the loader's worker processes, every thread (the guard's sender included)
    sender_cpu_s: float  # the guard's sender threads in those workers (posting or spooling)
    service_cpu_s: float  # the service process over the same epoch


def epoch(loader: DataLoader, samples: int, service: Service) -> Epoch:  # type: ignore[type-arg]
    loader.sampler.epoch += 1  # type: ignore[attr-defined]
    started = time.perf_counter()
    batches = iter(loader)  # persistent workers: the same processes every epoch
    pids = worker_pids(loader)
    cpu = sum(cpu_ns(pid) for pid in pids)
    sender = sum(cpu_ns(pid, SENDER_THREAD) for pid in pids)
    served = cpu_ns(service.process.pid)
    for _ in batches:
        pass
    wall = time.perf_counter() - started
    # the senders post what queued within their linger time: wait for them before reading the clocks
    time.sleep(SETTLE_S)
    cpu = sum(cpu_ns(pid) for pid in pids) - cpu
    sender = sum(cpu_ns(pid, SENDER_THREAD) for pid in pids) - sender
    served = cpu_ns(service.process.pid) - served
    return Epoch(samples / wall, wall, cpu / 1e9, sender / 1e9, served / 1e9)


def interval(values: list[float]) -> tuple[float, float]:
    """The mean and the half-width of its 95% confidence interval (Student's t)."""
    mean = statistics.fmean(values)
    if len(values) < 2:
        return mean, float("inf")
    return mean, t95(len(values) - 1) * statistics.stdev(values) / math.sqrt(len(values))


def t95(degrees: int) -> float:
    """Student's t for a two-sided 95% interval (table to 30 degrees of freedom, then the normal's)."""
    table = [12.71, 4.30, 3.18, 2.78, 2.57, 2.45, 2.36, 2.31, 2.26, 2.23, 2.20, 2.18, 2.16, 2.14, 2.13]
    table += [2.12, 2.11, 2.10, 2.09, 2.09, 2.08, 2.07, 2.07, 2.06, 2.06, 2.06, 2.05, 2.05, 2.05, 2.04]
    return table[degrees - 1] if degrees <= len(table) else 1.96


def rounded(mean_half: tuple[float, float], digits: int = 2) -> dict[str, object]:
    mean, half = mean_half
    return {"mean": round(mean, digits), "ci95": [round(mean - half, digits), round(mean + half, digits)]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=3000, help="samples per epoch")
    parser.add_argument("--fail-every", type=int, default=100)
    parser.add_argument("--min-rounds", type=int, default=8)
    parser.add_argument("--max-rounds", type=int, default=40)
    parser.add_argument(
        "--unit-blocks", type=int, default=20, help="blocks of 2,000 calls for the unit costs"
    )
    parser.add_argument(
        "--precision", type=float, default=0.25, help="stop once every 95%% interval is this narrow (+-, %%)"
    )
    args = parser.parse_args()
    # the guard's warning per failure is part of its cost: written, but to /dev/null
    quiet = logging.getLogger("datalint")
    quiet.handlers[:] = [logging.StreamHandler(open(os.devnull, "w"))]  # noqa: SIM115
    quiet.propagate = False
    with tempfile.TemporaryDirectory() as folder:
        base = Path(folder)
        os.environ["DATALINT_SPOOL_DIR"] = str(base / "spool")
        service = Service(base, '\n[[datasets]]\nname = "train"\nimages = "/nonexistent"\n')
        os.environ["DATALINT_TOKEN"] = service.token
        healthy = f"{service.base}/v1/datasets/train"
        dead = "http://127.0.0.1:9/v1/datasets/train"  # the discard port: nothing listens
        units = unit_costs(dead, blocks=args.unit_blocks, calls=2000)
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
        epochs: dict[str, list[Epoch]] = {name: [] for name in loaders}
        try:
            for loader in loaders.values():  # warm-up: the workers started, imports, page cache
                epoch(loader, args.samples, service)
            for round_ in range(args.max_rounds):
                order = list(loaders)
                random.Random(round_).shuffle(order)  # no loader always runs first or last
                for name in order:
                    epochs[name].append(epoch(loaders[name], args.samples, service))
                bounds = [
                    interval(guard_cost(epochs[n], epochs["unguarded"], units, args))[1] for n in guarded
                ]
                if round_ + 1 >= args.min_rounds and max(bounds) <= args.precision:
                    break
        finally:
            del loaders  # the workers exit and flush their senders before the service goes
            service.stop()
        spooled = sum(len(p.read_text().splitlines()) for p in (base / "spool").glob("*.jsonl"))
    plain = epochs["unguarded"]
    for name, measured in epochs.items():
        rates = [e.rate for e in measured]
        row: dict[str, object] = {
            "loader": name,
            "samples_per_s_median": round(statistics.median(rates), 1),
            "samples_per_s_min_max": [round(min(rates), 1), round(max(rates), 1)],
            "workers_cpu_ms_per_epoch": rounded(interval([e.workers_cpu_s * 1000 for e in measured]), 1),
            "service_cpu_ms_per_epoch": rounded(interval([e.service_cpu_s * 1000 for e in measured]), 1),
        }
        if name in guarded:
            walls = [100 * (1 - g.rate / u.rate) for g, u in zip(measured, plain, strict=True)]
            extra = [1000 * (g.workers_cpu_s - u.workers_cpu_s) for g, u in zip(measured, plain, strict=True)]
            row.update(
                sender_cpu_ms_per_epoch=rounded(interval([e.sender_cpu_s * 1000 for e in measured]), 1),
                guard_cost_pct=rounded(interval(guard_cost(measured, plain, units, args)), 3),
                workers_extra_cpu_ms_per_epoch=rounded(interval(extra), 1),
                workers_extra_cpu_pct=rounded(interval(cpu_bound(measured, plain))),
                wall_overhead_pct=rounded(interval(walls)),
                wall_overhead_pct_median=round(statistics.median(walls), 2),
            )
        print(json.dumps(row))
    failures = len(range(0, args.samples, args.fail_every))
    print(json.dumps({name: rounded(value, 1) for name, value in units.items()}))
    print(
        json.dumps(
            {
                "rounds": len(plain),
                "failures_per_epoch": failures,
                "substitute_reads_pct": round(100 * failures / args.samples, 2),
                "spooled_lines": spooled,
                "load": load(),
            }
        )
    )


def guard_cost(
    guarded: list[Epoch], plain: list[Epoch], units: dict[str, tuple[float, float]], args: argparse.Namespace
) -> list[float]:
    """Per round, the guard's CPU as a share of the workers' time in the unguarded epoch (%): its
    `__getitem__` part from the unit costs (every sample wrapped, every failure recorded) plus its
    sender threads' CPU measured in that epoch. A bound on what it takes from throughput: it counts
    every microsecond as on a worker's critical path, where the sender mostly runs while the worker
    waits on I/O."""
    failures = len(range(0, args.samples, args.fail_every))
    in_getitem = (
        args.samples * units["wrapper_ns_per_sample"][0] + failures * units["failure_ns_each"][0]
    ) / 1e9
    return [
        100 * (in_getitem + g.sender_cpu_s) / (WORKERS * u.wall_s)
        for g, u in zip(guarded, plain, strict=True)
    ]


def cpu_bound(guarded: list[Epoch], plain: list[Epoch]) -> list[float]:
    """Per round, the most the guard's CPU can cost the loader's throughput (%): its extra CPU in the
    worker processes, as a share of the workers' time in that round's unguarded epoch. A bound: it
    counts every guard microsecond as on a worker's critical path, where the sender thread mostly runs
    while the worker waits on I/O."""
    return [
        100 * (g.workers_cpu_s - u.workers_cpu_s) / (WORKERS * u.wall_s)
        for g, u in zip(guarded, plain, strict=True)
    ]


if __name__ == "__main__":
    main()
