"""`datalint run`'s cost: a real DataLoader's throughput with and without the recorder, and with
and without `GuardedDataset`'s in-flight records, side by side in one run; the recorder's own CPU
and memory.

Throughput: one training script (a real torch DataLoader, 2 workers, batch 16, a CPU-bound synthetic
dataset whose keys are ImageFolder-style paths) in four variants: plain, under `datalint run`,
wrapped in `GuardedDataset`, and wrapped under `datalint run` (the only one that writes in-flight
records). Each round runs the four once, in an order rotated from round to round, so that a slow
spell of the machine falls on each variant alike; the script times itself after its imports and
first batch. Reported: each variant's median samples/s and quartiles, and each round's paired
change (pairs run seconds apart, so a slow drift of the machine's load cancels in them). Also per
variant: the training's own CPU per 1,000 samples (main and workers, from /proc).

The recorder's CPU is read from /proc/<datalint pid>/stat while the training runs. Divided by the
CPU the training itself used per second, it is the most throughput the recorder can take: all of
it, if every cycle it used were one the training lacked. That bound holds on a busy machine, where
the wall-clock figures spread too widely to show a 1% effect.

In-flight records: `GuardedDataset.__getitem__` on a dataset that does nothing, timed in a fresh
process with and without `DATALINT_RUN_INFLIGHT` set (alternately, best of --micro-repeats), against
the time of one sample of the synthetic dataset.

Memory: `datalint run` records a process tree of a main and 2 forked workers for --duration
seconds; the recorder's RSS is read every --every seconds.

    .venv/bin/python benchmarks/run_overhead.py [--rounds 8] [--batches 400] [--micro-repeats 5]
        [--duration 120] [--every 10]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TICKS = os.sysconf("SC_CLK_TCK")

TRAIN = textwrap.dedent(
    """
    import sys, time
    import torch
    from torch.utils.data import DataLoader, Dataset

    class Work(Dataset):
        # keys as ImageFolder keeps them: the guard names each sample in flight by its path
        samples = [(f"synthetic/{i // 1000:03d}/{i:09d}.png", 0) for i in range(100_000)]
        def __len__(self):
            return len(self.samples)
        def __getitem__(self, i):
            x = torch.randn(64, 64)
            for _ in range(4):
                x = torch.tanh(x @ x.T / 64)
            return x

    def cpu_ticks(pids):
        total = 0
        for pid in pids:
            fields = open(f"/proc/{pid}/stat").read().rpartition(")")[2].split()
            total += int(fields[11]) + int(fields[12])
        return total

    if __name__ == "__main__":
        torch.set_num_threads(1)
        batches, guarded = int(sys.argv[1]), sys.argv[2] == "1"
        dataset = Work()
        if guarded:
            from datalint.torch import GuardedDataset
            dataset = GuardedDataset(dataset)
        loader = DataLoader(dataset, batch_size=16, num_workers=2)
        it = iter(loader)
        next(it)  # workers started and warm
        pids = ["self", *(w.pid for w in it._workers)]
        print("start", flush=True)
        ticks, started = cpu_ticks(pids), time.perf_counter()
        for _ in range(batches):
            next(it)
        elapsed, ticks = time.perf_counter() - started, cpu_ticks(pids) - ticks
        print(f"done {batches * 16 / elapsed:.1f} {ticks}", flush=True)
    """
)

MICRO = textwrap.dedent(
    """
    import sys, time
    from datalint.torch import GuardedDataset

    class Nothing:
        samples = [(f"synthetic/{i // 1000:03d}/{i:09d}.png", 0) for i in range(100_000)]
        def __len__(self):
            return len(self.samples)
        def __getitem__(self, i):
            return i

    guarded, n = GuardedDataset(Nothing()), int(sys.argv[1])
    guarded[0]
    started = time.perf_counter()
    for i in range(n):
        guarded[i % 100_000]
    print((time.perf_counter() - started) / n * 1e9)
    """
)

SAMPLE = textwrap.dedent(
    """
    import sys, time
    import torch
    sys.path.insert(0, sys.argv[1])
    from train import Work

    torch.set_num_threads(1)
    work, n = Work(), 300
    work[0]
    started = time.perf_counter()
    for i in range(n):
        work[i]
    print((time.perf_counter() - started) / n * 1e9)
    """
)

TREE = textwrap.dedent(
    """
    import os, sys, time
    for _ in range(2):
        if os.fork() == 0:
            data = bytearray(32 << 20)
            time.sleep(float(sys.argv[1]) + 5)
            os._exit(0)
    print("start", flush=True)
    time.sleep(float(sys.argv[1]))
    print("done", flush=True)
    """
)


def cpu_ticks(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return int(fields[11]) + int(fields[12])


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


# name: (wrapped in GuardedDataset, under `datalint run`)
VARIANTS = {"plain": (False, False), "recorded": (False, True), "guarded": (True, False),
            "guarded, recorded": (True, True)}
PAIRS = (("recorded", "plain"), ("guarded, recorded", "guarded"), ("guarded, recorded", "plain"))


@dataclass(frozen=True)
class Run:
    rate: float  # samples/s
    cpu_ms: float  # the training's CPU (main and workers) per 1,000 samples, ms
    cores: float  # the training's CPU per second of its timed part: the cores it kept busy
    recorder: float | None  # the recorder's CPU per second, % of one core (None: not recorded)

    @property
    def bound(self) -> float | None:
        """The throughput the recorder could take at most, %: its CPU as a share of the training's."""
        return self.recorder / self.cores if self.recorder is not None and self.cores else None


def one_run(script: Path, batches: int, guarded: bool, recorded: bool, folder: Path) -> Run:
    command = [sys.executable, str(script), str(batches), "1" if guarded else "0"]
    if recorded:
        command = [sys.executable, "-m", "datalint", "run", "--quiet", "--record", str(folder / "bench.db"),
                   "--", *command]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=_env())
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "start"
    t0, ticks0 = time.perf_counter(), cpu_ticks(proc.pid) if recorded else 0
    line = proc.stdout.readline().split()
    wall = time.perf_counter() - t0
    share = (cpu_ticks(proc.pid) - ticks0) / TICKS / wall * 100 if recorded else None
    proc.wait()
    rate, training_seconds = float(line[1]), int(line[2]) / TICKS
    samples = batches * 16
    return Run(rate, training_seconds / samples * 1e6, training_seconds / (samples / rate), share)


def _spread(values: Sequence[float], digits: int = 1) -> str:
    """median [first quartile, third quartile] as text."""
    if len(values) < 2:
        return f"{values[0]:.{digits}f}"
    q1, _, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return f"{statistics.median(values):.{digits}f} [{q1:.{digits}f}, {q3:.{digits}f}]"


def _change(after: Sequence[float], before: Sequence[float]) -> list[float]:
    return [(a - b) / b * 100 for a, b in zip(after, before, strict=True)]


def throughput(rounds: int, batches: int, folder: Path) -> None:
    script = folder / "train.py"
    script.write_text(TRAIN)
    names = list(VARIANTS)
    runs: dict[str, list[Run]] = {name: [] for name in names}
    for i in range(rounds):
        for name in names[i % len(names):] + names[: i % len(names)]:
            runs[name].append(one_run(script, batches, *VARIANTS[name], folder))
    rates = {name: [r.rate for r in runs[name]] for name in names}
    cpu = {name: [r.cpu_ms for r in runs[name]] for name in names}
    print(f"| variant | samples/s, median [quartiles] of {rounds} | training CPU ms per 1,000 samples | "
          "cores the training kept busy | recorder CPU, % of one core | recorder CPU / training CPU, % |")
    print("|---|---|---|---|---|---|")
    for name in names:
        shares = [r.recorder for r in runs[name] if r.recorder is not None]
        bounds = [r.bound for r in runs[name] if r.bound is not None]
        print(f"| {name} | {_spread(rates[name])} | {_spread(cpu[name])} | "
              f"{_spread([r.cores for r in runs[name]], 2)} | {_spread(shares, 2) if shares else '-'} | "
              f"{_spread(bounds, 2) if bounds else '-'} |")
    print("\n| paired change, per round | samples/s, % median [quartiles] | training CPU per sample, % |")
    print("|---|---|---|")
    for after, before in PAIRS:
        print(f"| {after} vs {before} | {_spread(_change(rates[after], rates[before]))} | "
              f"{_spread(_change(cpu[after], cpu[before]))} |")
    listed = "; ".join(f"{name}: {', '.join(f'{r:.0f}' for r in rates[name])}" for name in names)
    print(f"\nruns (samples/s): {listed}")


def inflight_cost(repeats: int, folder: Path) -> None:
    """ns per guarded sample with and without in-flight records, against one synthetic sample."""
    script = folder / "micro.py"
    script.write_text(MICRO)
    records = folder / "inflight"
    records.mkdir()
    with_records: list[float] = []
    without: list[float] = []
    recording = {**_env(), "DATALINT_RUN_INFLIGHT": str(records)}
    for _ in range(repeats):
        for target, env in ((without, _env()), (with_records, recording)):
            done = subprocess.run([sys.executable, str(script), "200000"], capture_output=True, text=True,
                                  env=env, check=True)
            target.append(float(done.stdout))
    sample_script = folder / "sample.py"
    sample_script.write_text(SAMPLE)
    timed = [subprocess.run([sys.executable, str(sample_script), str(folder)], capture_output=True, text=True,
                            env=_env(), check=True) for _ in range(3)]
    sample_ns = min(float(done.stdout) for done in timed)
    added = min(with_records) - min(without)
    print(f"\nGuardedDataset.__getitem__ (best of {repeats}): {min(without):.0f} ns without records, "
          f"{min(with_records):.0f} ns with (runs: {', '.join(f'{x:.0f}' for x in with_records)}); "
          f"added {added:.0f} ns a sample = {added / sample_ns * 100:.3f}% of one synthetic sample "
          f"({sample_ns / 1000:.0f} us, one worker)")


def memory(duration: float, every: float, folder: Path) -> None:
    script = folder / "tree.py"
    script.write_text(TREE)
    command = [sys.executable, "-m", "datalint", "run", "--quiet", "--record", str(folder / "memory.db"),
               "--", sys.executable, str(script), str(duration)]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.stdout is not None and proc.stdout.readline().strip() == "start"
    started, readings = time.monotonic(), []
    while time.monotonic() - started < duration - 1:
        readings.append((time.monotonic() - started, rss_kib(proc.pid)))
        time.sleep(every)
    ticks = cpu_ticks(proc.pid)
    proc.wait()
    series = ", ".join(f"{t:.0f}s {kib}" for t, kib in readings)
    print(f"\nrecorder RSS over {duration:.0f} s (KiB): {series}")
    first, last = readings[0][1], readings[-1][1]
    print(f"first {first} KiB, last {last} KiB, max {max(k for _, k in readings)} KiB, "
          f"growth {last - first} KiB; recorder CPU {ticks / TICKS:.2f} s in total")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--batches", type=int, default=400)
    parser.add_argument("--micro-repeats", type=int, default=5)
    parser.add_argument("--duration", type=float, default=120.0)
    parser.add_argument("--every", type=float, default=10.0)
    args = parser.parse_args()
    if (args.batches + 1) * 16 > 100_000:
        parser.error("--batches: at most 6,249 (the synthetic dataset has 100,000 samples)")
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory() as tmp:
        throughput(args.rounds, args.batches, Path(tmp))
        inflight_cost(args.micro_repeats, Path(tmp))
        if args.duration > 0:
            memory(args.duration, args.every, Path(tmp))
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
