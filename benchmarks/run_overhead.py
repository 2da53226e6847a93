"""`datalint run`'s cost: a real DataLoader's throughput with and without the recorder, side by side
in one run, and the recorder's own memory over a long run.

Throughput: the same training script (a real torch DataLoader, 2 workers, a CPU-bound synthetic
dataset) runs plain and under `datalint run`, alternately, --rounds times each; the script times
itself after its imports, so start-up is not counted. The recorder's own CPU is read from
/proc/<datalint pid>/stat while the training runs: its share of one core is the upper bound of
what it can take from the training.

Memory: `datalint run` records a process tree of a main and 2 forked workers for --duration
seconds; the recorder's RSS is read every --every seconds.

    .venv/bin/python benchmarks/run_overhead.py [--rounds 3] [--batches 1500] [--duration 120] [--every 10]
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
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TICKS = os.sysconf("SC_CLK_TCK")

TRAIN = textwrap.dedent(
    """
    import sys, time
    import torch
    from torch.utils.data import DataLoader, Dataset

    class Work(Dataset):
        def __len__(self):
            return 1 << 30
        def __getitem__(self, i):
            x = torch.randn(64, 64)
            for _ in range(4):
                x = torch.tanh(x @ x.T / 64)
            return x

    if __name__ == "__main__":
        torch.set_num_threads(1)
        batches = int(sys.argv[1])
        loader = DataLoader(Work(), batch_size=16, num_workers=2)
        it = iter(loader)
        next(it)  # workers started and warm
        print("start", flush=True)
        started = time.perf_counter()
        for _ in range(batches):
            next(it)
        elapsed = time.perf_counter() - started
        print(f"done {batches * 16 / elapsed:.1f}", flush=True)
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


def one_run(script: Path, args: list[str], recorded: bool, folder: Path) -> tuple[float, float | None]:
    """(samples/s, recorder CPU share of one core or None)."""
    command = [sys.executable, str(script), *args]
    if recorded:
        command = [sys.executable, "-m", "datalint", "run", "--quiet", "--record", str(folder / "bench.db"),
                   "--", *command]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "start"
    t0, ticks0 = time.perf_counter(), cpu_ticks(proc.pid) if recorded else 0
    line = proc.stdout.readline().split()
    share = (cpu_ticks(proc.pid) - ticks0) / TICKS / (time.perf_counter() - t0) if recorded else None
    proc.wait()
    return float(line[1]), share


def throughput(rounds: int, batches: int, folder: Path) -> None:
    script = folder / "train.py"
    script.write_text(TRAIN)
    plain, recorded, shares = [], [], []
    for i in range(rounds):
        for with_recorder in ((False, True) if i % 2 == 0 else (True, False)):
            rate, share = one_run(script, [str(batches)], with_recorder, folder)
            (recorded if with_recorder else plain).append(rate)
            if share is not None:
                shares.append(share)
    p, r = statistics.median(plain), statistics.median(recorded)
    print(f"| loader | samples/s (median of {rounds}) | runs |")
    print("|---|---|---|")
    print(f"| plain | {p:.1f} | {', '.join(f'{x:.1f}' for x in plain)} |")
    print(f"| under `datalint run` | {r:.1f} | {', '.join(f'{x:.1f}' for x in recorded)} |")
    runs = ", ".join(f"{s * 100:.2f}" for s in shares)
    print(f"\nthroughput change: {(r - p) / p * 100:+.1f}%; recorder CPU while training: "
          f"{statistics.median(shares) * 100:.2f}% of one core (runs: {runs})")


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
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batches", type=int, default=1500)
    parser.add_argument("--duration", type=float, default=120.0)
    parser.add_argument("--every", type=float, default=10.0)
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory() as tmp:
        throughput(args.rounds, args.batches, Path(tmp))
        if args.duration > 0:
            memory(args.duration, args.every, Path(tmp))
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
