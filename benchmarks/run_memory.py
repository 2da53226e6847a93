"""`datalint run`'s own memory and files over a long training: flat, or growing with the run?

A training-like loop runs under `datalint run` for --duration seconds: a real torch DataLoader with
2 workers decoding JPEG files (Pillow, resized to 224x224, normalised, as an ImageFolder pipeline
does), wrapped in `GuardedDataset` (so each worker keeps an in-flight record), a small model's
forward and backward pass in the main process and a pause standing in for the GPU's step. Workers
are not persistent, so each epoch (about 20 s) starts a new pool: the recorder tracks, watches and
forgets two new processes each time, as it does in a real multi-epoch training.

The loop is throttled (a --step-seconds pause a batch) to keep a shared machine usable for an hour;
the recorder's work a second depends on the processes it watches, not on the samples per second.

Every --every seconds the benchmark reads, from outside: the recorder's RSS and peak RSS
(/proc/PID/status), its open files, its CPU, the record's size and its write-ahead log's (-wal,
-journal), and the in-flight directory's files and bytes. Each reading is one JSON line in
--output as it is taken (a run cut short keeps what it had); the summary at the end gives the
growth from the first reading after the warm-up to the last, and the least-squares slope of the
second half (what the next hour would add).

    .venv/bin/python benchmarks/run_memory.py --duration 3600 --every 30 \\
        --output /tmp/run-memory.jsonl
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TICKS = os.sysconf("SC_CLK_TCK")
WARM_UP = 60.0  # seconds: imports, the first pools, SQLite's first pages

TRAIN = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    import torch
    from PIL import Image
    from torch.utils.data import DataLoader, Dataset

    class Folder(Dataset):
        def __init__(self, root):
            self.samples = [(str(p), 0) for p in sorted(Path(root).glob("*/*.jpg"))]
        def __len__(self):
            return len(self.samples)
        def __getitem__(self, i):
            with Image.open(self.samples[i][0]) as image:
                image = image.convert("RGB").resize((224, 224))
            x = torch.frombuffer(bytearray(image.tobytes()), dtype=torch.uint8)
            x = x.view(224, 224, 3).permute(2, 0, 1).float() / 255
            return (x - 0.45) / 0.225, self.samples[i][1]

    if __name__ == "__main__":
        torch.set_num_threads(1)
        root, duration, pause = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
        from datalint.torch import GuardedDataset
        loader = DataLoader(GuardedDataset(Folder(root)), batch_size=16, num_workers=2, shuffle=True)
        nn = torch.nn
        model = nn.Sequential(nn.Conv2d(3, 8, 7, stride=4), nn.ReLU(), nn.AdaptiveAvgPool2d(4), nn.Flatten(),
                              nn.Linear(128, 10))
        optimiser = torch.optim.SGD(model.parameters(), lr=0.01)
        print("start", flush=True)
        started, epochs, batches = time.monotonic(), 0, 0
        while time.monotonic() - started < duration:
            for x, y in loader:
                loss = torch.nn.functional.cross_entropy(model(x), y)
                optimiser.zero_grad()
                loss.backward()
                optimiser.step()
                batches += 1
                time.sleep(pause)  # the GPU's step
                if time.monotonic() - started >= duration:
                    break
            epochs += 1
        print(f"done {epochs} {batches}", flush=True)
    """
)


def make_images(root: Path, count: int) -> None:
    """`count` 320x240 JPEG files in ImageFolder's layout, each different (no decoder caching)."""
    from PIL import Image

    for i in range(count):
        folder = root / f"class{i % 10}"
        folder.mkdir(parents=True, exist_ok=True)
        extent = (-2 + i % 7 * 0.1, -1.2, 1, 1.2 - i % 5 * 0.05)
        image = Image.effect_mandelbrot((320, 240), extent, 40 + i % 50)
        image.convert("RGB").save(folder / f"{i:05d}.jpg", quality=90)


def status_kib(pid: int, field: str) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def cpu_seconds(pid: int) -> float | None:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / TICKS


def open_files(pid: int) -> int | None:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return None


def size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def inflight_dir(recorder: int) -> Path | None:
    """The in-flight directory `datalint run` named for its child, from the child's environment."""
    try:
        children = Path(f"/proc/{recorder}/task/{recorder}/children").read_text().split()
        environ = Path(f"/proc/{children[0]}/environ").read_bytes().split(b"\0")
    except (OSError, IndexError):
        return None
    for entry in environ:
        if entry.startswith(b"DATALINT_RUN_INFLIGHT="):
            return Path(entry.partition(b"=")[2].decode())
    return None


def reading(recorder: int, record: Path, inflight: Path | None, t: float) -> dict[str, Any]:
    files = list(inflight.iterdir()) if inflight is not None and inflight.is_dir() else []
    return {
        "t": round(t, 1), "rss_kib": status_kib(recorder, "VmRSS"), "hwm_kib": status_kib(recorder, "VmHWM"),
        "fds": open_files(recorder), "cpu_s": cpu_seconds(recorder), "record_bytes": size(record),
        "wal_bytes": size(Path(f"{record}-wal")), "journal_bytes": size(Path(f"{record}-journal")),
        "inflight_files": len(files), "inflight_bytes": sum(size(f) for f in files),
        "load": round(os.getloadavg()[0], 2),
    }


def slope_per_hour(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of (t, value), per hour."""
    if len(points) < 2:
        return 0.0
    return statistics.linear_regression([t for t, _ in points], [v for _, v in points]).slope * 3600


def summarise(readings: list[dict[str, Any]], duration: float) -> None:
    settled = [r for r in readings if r["t"] >= WARM_UP and r["rss_kib"] is not None] or readings
    first, last = settled[0], settled[-1]
    second_half = [r for r in settled if r["t"] >= duration / 2]
    print(f"\n{len(readings)} readings over {last['t']:.0f} s; from {first['t']:.0f} s (after the warm-up) "
          f"to {last['t']:.0f} s:")
    for name, unit in (("rss_kib", "KiB"), ("hwm_kib", "KiB"), ("fds", "files"), ("record_bytes", "bytes"),
                       ("wal_bytes", "bytes"), ("journal_bytes", "bytes"), ("inflight_files", "files"),
                       ("inflight_bytes", "bytes")):
        values = [r[name] for r in settled if r[name] is not None]
        slope = slope_per_hour([(r["t"], r[name]) for r in second_half if r[name] is not None])
        print(f"  {name}: first {first[name]}, last {last[name]}, min {min(values)}, max {max(values)} "
              f"{unit}; growth {last[name] - first[name]}; second half's slope {slope:.0f} {unit}/hour")
    cpu = (last["cpu_s"] or 0) - (first["cpu_s"] or 0)
    print(f"  recorder CPU: {cpu:.1f} s over {last['t'] - first['t']:.0f} s = "
          f"{cpu / max(last['t'] - first['t'], 1) * 100:.2f}% of one core")
    loads = [r["load"] for r in readings]
    print(f"  load average during the run: median {statistics.median(loads):.2f}, max {max(loads):.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=3600.0)
    parser.add_argument("--every", type=float, default=30.0)
    parser.add_argument("--images", type=int, default=1200, help="JPEG files a epoch reads (16 a batch)")
    parser.add_argument("--step-seconds", type=float, default=0.25, help="the pause a batch: the GPU's step")
    parser.add_argument("--output", type=Path, required=True, help="one JSON line a reading")
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f}", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        make_images(folder / "images", args.images)
        (folder / "train.py").write_text(TRAIN)
        record = folder / "memory.db"
        command = [sys.executable, "-m", "datalint", "run", "--quiet", "--record", str(record), "--",
                   sys.executable, str(folder / "train.py"), str(folder / "images"), str(args.duration),
                   str(args.step_seconds)]
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, text=True,
                                env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert proc.stdout is not None and proc.stdout.readline().strip() == "start"
        started, readings = time.monotonic(), []
        inflight = None
        with args.output.open("w") as out:
            while time.monotonic() - started < args.duration - 1:
                inflight = inflight or inflight_dir(proc.pid)
                readings.append(reading(proc.pid, record, inflight, time.monotonic() - started))
                out.write(json.dumps(readings[-1]) + "\n")
                out.flush()
                time.sleep(args.every)
        done = proc.stdout.readline().split()
        proc.wait()
        rows = _rows(record)
    epochs, batches = done[1:3] if len(done) > 2 else ("?", "?")
    print(f"training: {epochs} epochs, {batches} batches; datalint run exited {proc.returncode}; "
          f"the record holds {rows}")
    summarise(readings, args.duration)
    print(f"load average after: {os.getloadavg()[0]:.2f}")


def _rows(record: Path) -> str:
    import sqlite3

    db = sqlite3.connect(record)
    try:
        counts = {t: db.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                  for t in ("processes", "system", "events")}
    finally:
        db.close()
    return ", ".join(f"{n} {t} rows" for t, n in counts.items())


if __name__ == "__main__":
    main()
