"""`datalint run`'s cost: a real DataLoader's throughput with and without the recorder, side by side
in one run, many short paired rounds with bootstrap confidence intervals; the recorder's own CPU
against the training's; the in-flight records' cost a sample; the recorder's memory.

The training does what an image training's data side does: a real torch DataLoader (2 workers,
batch 16) over an ImageFolder-style tree of 500x375 JPEG files (ImageNet's typical size, ~80 KB),
each decoded with Pillow, resized to 224x224 and normalised (~6 ms of CPU a sample), and a small
model's forward and backward pass a batch in the main process. Nothing throttles it: the loader
keeps the workers busy, the case where a recorder's every cycle could be one the training lacks.

Throughput: each round runs the variants once each, in an order that alternates from round to round
(plain first, then recorded first), seconds apart, so a slow spell of the shared machine falls on
both; each training times --batches batches after its imports and first batch. The figure is each
round's paired change, with a 95% bootstrap interval (10,000 resamples of the rounds) for the median
and the mean. --guarded adds the pair `GuardedDataset` with and without the recorder (the recorded
one writes in-flight records).

The recorder's CPU is its own process CPU clock (`time.process_time`, all its threads), which it
writes into the record every second (`system.recorder_cpu`); the training's CPU is the record's
per-process CPU, over the same seconds of the timed part. Their ratio is the most throughput the
recorder can take: all of it, if every cycle it used were one the training lacked. That bound holds
on a busy machine, where wall-clock figures spread too widely to show a 1% effect.

In-flight records: `GuardedDataset.__getitem__` on a dataset that does nothing, timed in a fresh
process with and without `DATALINT_RUN_INFLIGHT` set (alternately, best of --micro-repeats), against
the CPU of one sample of the training's dataset.

Memory: `datalint run` records a process tree of a main and 2 forked workers for --duration
seconds; the recorder's RSS is read every --every seconds (the hour-long run is run_memory.py).

    .venv/bin/python benchmarks/run_overhead.py [--rounds 16] [--batches 40] [--guarded]
        [--micro-repeats 5] [--duration 60] [--every 10]
"""

from __future__ import annotations

import argparse
import io
import itertools
import os
import random
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TICKS = os.sysconf("SC_CLK_TCK")

TRAIN = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    import torch
    from PIL import Image
    from torch.utils.data import DataLoader, Dataset

    class Folder(Dataset):
        def __init__(self, root):
            self.samples = [(str(p), int(p.parent.name[1:])) for p in sorted(Path(root).glob("*/*.JPEG"))]
        def __len__(self):
            return len(self.samples)
        def __getitem__(self, i):
            with Image.open(self.samples[i][0]) as image:
                image = image.convert("RGB").resize((224, 224))
            x = torch.frombuffer(bytearray(image.tobytes()), dtype=torch.uint8)
            x = x.view(224, 224, 3).permute(2, 0, 1).float() / 255
            return (x - 0.45) / 0.225, self.samples[i][1]

    def cpu_ticks(pids):
        total = 0
        for pid in pids:
            fields = open(f"/proc/{pid}/stat").read().rpartition(")")[2].split()
            total += int(fields[11]) + int(fields[12])
        return total

    if __name__ == "__main__":
        torch.set_num_threads(1)
        root, seconds, guarded = sys.argv[1], float(sys.argv[2]), sys.argv[3] == "1"
        dataset = Folder(root)
        if guarded:
            from datalint.torch import GuardedDataset
            dataset = GuardedDataset(dataset)
        loader = DataLoader(dataset, batch_size=16, num_workers=2, shuffle=True, persistent_workers=True)
        nn = torch.nn
        model = nn.Sequential(nn.Conv2d(3, 8, 7, stride=4), nn.ReLU(), nn.AdaptiveAvgPool2d(4), nn.Flatten(),
                              nn.Linear(128, 10))
        optimiser = torch.optim.SGD(model.parameters(), lr=0.01)
        started, pids = time.monotonic(), None
        while time.monotonic() - started < seconds:
            it = iter(loader)
            pids = pids or ["self", *(w.pid for w in it._workers)]
            for x, y in it:
                loss = nn.functional.cross_entropy(model(x), y)
                optimiser.zero_grad()
                loss.backward()
                optimiser.step()
                # a line a batch: when it ended, and the training's CPU so far (main and workers)
                print(f"batch {time.time():.4f} {cpu_ticks(pids)}", flush=True)
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
    from train import Folder

    torch.set_num_threads(1)
    work = Folder(sys.argv[2])
    work[0]
    started = time.process_time()
    for i in range(100):
        work[i % len(work)]
    print((time.process_time() - started) / 100 * 1e9)
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


RESAMPLES = 10_000
USABLE = len(os.sched_getaffinity(0))


def make_images(root: Path, files: int, distinct: int = 16) -> None:
    """`files` JPEG files of 500x375 in ImageFolder's layout, from `distinct` different pictures
    (fractal plus noise: ~80 KB at quality 90, as a photo is); a decoder caches nothing between
    files, so repeating bytes costs the same decode as new ones and spares minutes of drawing."""
    from PIL import Image

    noise = [Image.merge("RGB", [Image.effect_noise((500, 375), 48) for _ in range(3)]) for _ in range(4)]
    pictures = []
    for i in range(distinct):
        extent = (-2 + i % 7 * 0.1, -1.2, 1, 1.2 - i % 5 * 0.05)
        fractal = Image.effect_mandelbrot((500, 375), extent, 40 + i % 50).convert("RGB")
        buffer = io.BytesIO()
        Image.blend(fractal, noise[i % 4], 0.3).save(buffer, "JPEG", quality=90)
        pictures.append(buffer.getvalue())
    for i in range(files):
        folder = root / f"n{i % 10:08d}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{i:06d}.JPEG").write_bytes(pictures[i % distinct])


@dataclass(frozen=True)
class Window:
    recording: bool  # the recorder ran (else it was stopped)
    started: float
    ended: float


@dataclass(frozen=True)
class Batch:
    t: float  # time.time() when it ended
    ticks: int  # the training's CPU so far


def window_figures(window: Window, batches: Sequence[Batch]) -> tuple[float, float, float] | None:
    """(samples/s, the training's CPU ms per 1,000 samples, cores it kept busy) between the first and
    the last batch that ended inside the window (no rounding to whole batches)."""
    inside = [b for b in batches if window.started <= b.t <= window.ended]
    if len(inside) < 3:
        return None
    seconds, samples = inside[-1].t - inside[0].t, (len(inside) - 1) * 16
    cpu = (inside[-1].ticks - inside[0].ticks) / TICKS
    return samples / seconds, cpu / samples * 1e6, cpu / seconds


def recorder_cpu(record: Path, windows: Sequence[Window]) -> tuple[float, float]:
    """(the recorder's CPU seconds, the seconds they were used in) over the running windows, from
    the record's `recorder_cpu` column: each row is the recorder's share of one core since the row
    before. A row whose second began before its window (right after a stopped spell) is left out."""
    db = sqlite3.connect(record)
    try:
        rows = db.execute("SELECT t, recorder_cpu FROM system ORDER BY t").fetchall()
    finally:
        db.close()
    cpu = seconds = 0.0
    for (before, _), (t, share) in itertools.pairwise(rows):
        if share is not None and any(w.recording and w.started <= before and t <= w.ended for w in windows):
            cpu, seconds = cpu + share * (t - before), seconds + t - before
    return cpu, seconds


def _spread(values: Sequence[float], digits: int = 1) -> str:
    """median [first quartile, third quartile] as text."""
    if len(values) < 2:
        return f"{values[0]:.{digits}f}" if values else "-"
    q1, _, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return f"{statistics.median(values):.{digits}f} [{q1:.{digits}f}, {q3:.{digits}f}]"


def bootstrap(values: Sequence[float], statistic: Callable[[Sequence[float]], float]) -> tuple[float, float]:
    """The 95% percentile interval of `statistic` over RESAMPLES resamples of `values`."""
    draw = random.Random(0)
    estimates = sorted(statistic(draw.choices(values, k=len(values))) for _ in range(RESAMPLES))
    return estimates[int(RESAMPLES * 0.025)], estimates[int(RESAMPLES * 0.975) - 1]


def _interval(values: Sequence[float], digits: int = 2) -> str:
    """median and mean, each with its 95% bootstrap interval, as text."""
    if len(values) < 2:
        return "-"
    parts = []
    for name, statistic in (("median", statistics.median), ("mean", statistics.fmean)):
        low, high = bootstrap(values, statistic)
        parts.append(f"{name} {statistic(values):+.{digits}f} [{low:+.{digits}f}, {high:+.{digits}f}]")
    return "; ".join(parts)


def throughput(pairs: int, seconds: float, warm_up: float, guarded: bool, images: Path, folder: Path) -> None:
    """One training under `datalint run`, the recorder stopped (SIGSTOP) and running in alternate
    windows: each pair of neighbouring windows is one paired round, in steady state, with no
    start-up of either in it. A stopped recorder costs the training nothing; a running one costs
    what it costs."""
    script, record = folder / "train.py", folder / "bench.db"
    script.write_text(TRAIN)
    total = warm_up + pairs * 2 * seconds + 5
    command = [sys.executable, "-m", "datalint", "run", "--quiet", "--record", str(record), "--",
               sys.executable, str(script), str(images), str(total), "1" if guarded else "0"]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=_env())
    assert proc.stdout is not None
    batches: list[Batch] = []
    reader = threading.Thread(target=_read_batches, args=(proc.stdout, batches), daemon=True)
    reader.start()
    while not batches:
        time.sleep(0.2)
    time.sleep(warm_up)
    windows = []
    for i in range(pairs):
        for recording in (True, False) if i % 2 == 0 else (False, True):  # ABBA: a drift falls on both
            if not recording:
                os.kill(proc.pid, signal.SIGSTOP)
            started = time.time()
            time.sleep(seconds)
            windows.append(Window(recording, started, time.time()))
            if not recording:
                os.kill(proc.pid, signal.SIGCONT)
    proc.wait()
    reader.join()
    _report(windows, batches, recorder_cpu(record, windows), guarded)


def _read_batches(stream: Any, batches: list[Batch]) -> None:
    for line in stream:
        fields = line.split()
        if len(fields) == 3 and fields[0] == "batch":
            batches.append(Batch(float(fields[1]), int(fields[2])))


def _report(windows: Sequence[Window], batches: Sequence[Batch], own: tuple[float, float],
            guarded: bool) -> None:
    figures = [window_figures(w, batches) for w in windows]
    rounds = [(figures[i], figures[i + 1], windows[i].recording) for i in range(0, len(windows) - 1, 2)]
    paired = [(a, b) if first_recording else (b, a) for a, b, first_recording in rounds if a and b]
    on = [f for w, f in zip(windows, figures, strict=True) if f and w.recording]
    off = [f for w, f in zip(windows, figures, strict=True) if f and not w.recording]
    label = "GuardedDataset (in-flight records written all along)" if guarded else "plain dataset"
    length = windows[0].ended - windows[0].started
    print(f"{label}; {len(paired)} paired rounds of two {length:.0f}-s windows")
    print("| recorder | samples/s, median [quartiles] | training CPU ms per 1,000 samples | cores busy |")
    print("|---|---|---|---|")
    for name, rows in (("running", on), ("stopped", off)):
        print(f"| {name} | {_spread([r[0] for r in rows])} | {_spread([r[1] for r in rows])} | "
              f"{_spread([r[2] for r in rows], 2)} |")
    rate = [(a[0] - b[0]) / b[0] * 100 for a, b in paired]
    cpu = [(a[1] - b[1]) / b[1] * 100 for a, b in paired]
    print("\npaired change a round, running against stopped, % (95% bootstrap interval):")
    print(f"  samples/s: {_interval(rate)}")
    print(f"  training CPU per sample: {_interval(cpu)}")
    seconds, ran = own
    share = seconds / ran * 100
    training = statistics.fmean(r[2] for r in on)
    print(f"\nthe recorder's own CPU (process clock, from the record) in the running windows: "
          f"{seconds:.3f} s over {ran:.0f} s = {share:.3f}% of one core, {share / USABLE:.3f}% of the "
          f"machine's {USABLE} CPUs")
    print(f"the training kept {training:.2f} cores busy meanwhile: the recorder took at most "
          f"{share / training:.3f}% of the training's CPU (every cycle it used one the training lacked)")
    print(f"rounds (samples/s running, stopped): {', '.join(f'{a[0]:.0f}/{b[0]:.0f}' for a, b in paired)}")


def inflight_cost(repeats: int, images: Path, folder: Path) -> None:
    """ns per guarded sample with and without in-flight records, against one JPEG sample's CPU."""
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
    command = [sys.executable, str(sample_script), str(folder), str(images)]
    timed = [subprocess.run(command, capture_output=True, text=True, env=_env(), check=True)
             for _ in range(3)]
    sample_ns = min(float(done.stdout) for done in timed)
    added = min(with_records) - min(without)
    print(f"\nGuardedDataset.__getitem__ (best of {repeats}): {min(without):.0f} ns without records, "
          f"{min(with_records):.0f} ns with (runs: {', '.join(f'{x:.0f}' for x in with_records)}); "
          f"added {added:.0f} ns a sample = {added / sample_ns * 100:.3f}% of one JPEG sample's CPU "
          f"({sample_ns / 1000:.0f} us)")


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
    parser.add_argument("--pairs", type=int, default=16,
                        help="paired rounds (a running and a stopped window)")
    parser.add_argument("--window", type=float, default=5.0, help="seconds a window")
    parser.add_argument("--warm-up", type=float, default=10.0, help="seconds after the first batch")
    parser.add_argument("--guarded", action="store_true", help="wrap the dataset in GuardedDataset")
    parser.add_argument("--micro-repeats", type=int, default=5)
    parser.add_argument("--duration", type=float, default=60.0)
    parser.add_argument("--every", type=float, default=10.0)
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f}", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        images = Path(tmp) / "images"
        make_images(images, 640)
        throughput(args.pairs, args.window, args.warm_up, args.guarded, images, Path(tmp))
        print(f"load average after the throughput part: {os.getloadavg()[0]:.2f}", flush=True)
        if args.micro_repeats > 0:
            inflight_cost(args.micro_repeats, images, Path(tmp))
        if args.duration > 0:
            memory(args.duration, args.every, Path(tmp))
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
