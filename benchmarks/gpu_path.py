"""The GPU training path with datalint's list and guard in it, against the same loader without them.

A real training step (a small CNN, SGD, cross-entropy) is fed by a DataLoader (`pin_memory=True`
on CUDA, batches copied with `non_blocking=True`) over a dataset that decodes an in-memory JPEG per
sample, as an image folder would without the disk. Two arms, alternated round by round (ABBA...) so
that drift in the machine falls on both:

- `plain`:    `DataLoader(ds, shuffle=True, ...)`
- `datalint`: `DataLoader(GuardedDataset(ds, record=INDEX), sampler=QuarantineSampler(ds, LIST,
  shuffle=True), ...)`, the list quarantining `--quarantined` of the samples.

Per arm: the step time (median, and quartiles, of every measured step, the device synchronised at
the end of each), the GPU idle share (time the loop waited for the next batch / the step's whole
time: the device has nothing queued while the host waits, since each step ends synchronised), and
the host memory (PSS of the training process and its loader workers, summed, at the end of each
round; PSS splits the pages the workers share).

    .venv/bin/python benchmarks/gpu_path.py                       # CUDA when there is one, else CPU
    .venv/bin/python benchmarks/gpu_path.py --rounds 8 --steps 100 --batch-size 256 --workers 8
    .venv/bin/python benchmarks/gpu_path.py --dry-run             # CPU, small sizes: a sanity run
    .venv/bin/python benchmarks/gpu_path.py --dry-run --json      # one JSON document on stdout
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from torch.utils.data import Dataset

ARMS = ("plain", "datalint")


@dataclass(frozen=True)
class Settings:
    device: str
    size: int  # samples in the dataset
    image: int  # side of the square JPEGs, in pixels
    batch_size: int
    workers: int
    rounds: int
    steps: int  # measured steps a round, after `warm_up` more
    warm_up: int
    quarantined: float  # the share of samples the list names


@dataclass
class Arm:
    """What one arm measured, over all its rounds."""

    steps: list[float] = field(default_factory=list)  # seconds a step
    waits: list[float] = field(default_factory=list)  # seconds of each step spent waiting for its batch
    pss: list[int] = field(default_factory=list)  # bytes, at the end of each round

    def summary(self) -> dict[str, Any]:
        quartiles = statistics.quantiles(self.steps, n=4) if len(self.steps) > 1 else self.steps * 3
        return {
            "step_ms_median": round(statistics.median(self.steps) * 1e3, 3),
            "step_ms_quartiles": [round(quartiles[0] * 1e3, 3), round(quartiles[2] * 1e3, 3)],
            "gpu_idle_share": round(sum(self.waits) / sum(self.steps), 4),
            "host_pss_mib_median": round(statistics.median(self.pss) / 2**20, 1),
            "steps": len(self.steps),
        }


class JpegDataset(Dataset[tuple[Any, int]]):
    """`size` samples, each a JPEG decoded from memory into a normalised CHW float tensor, and a label."""

    def __init__(self, size: int, image: int, classes: int = 10) -> None:
        from PIL import Image

        self.size, self.classes = size, classes
        self.encoded = []
        for n in range(64):  # a pool of distinct images, reused: the decode is the cost, not the variety
            out = io.BytesIO()
            colour = ((n * 37) % 256, (n * 91) % 256, (n * 53) % 256)
            Image.new("RGB", (image, image), colour).effect_spread(4).save(out, format="JPEG", quality=90)
            self.encoded.append(out.getvalue())

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: int) -> tuple[Any, int]:
        import numpy as np
        import torch
        from PIL import Image

        with Image.open(io.BytesIO(self.encoded[index % len(self.encoded)])) as opened:
            pixels = np.asarray(opened.convert("RGB"), dtype=np.float32)
        tensor = torch.from_numpy(pixels).permute(2, 0, 1).div_(255.0)
        return tensor, index % self.classes


def small_cnn(classes: int) -> Any:
    from torch import nn

    return nn.Sequential(
        nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(64, 128, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
        nn.Flatten(), nn.Linear(128, classes),
    )  # fmt: skip


def loaders(settings: Settings, dataset: JpegDataset, folder: Path) -> dict[str, Any]:
    """The two arms' DataLoaders over the same dataset, with the same loader settings."""
    import numpy as np
    from torch.utils.data import DataLoader

    from datalint.torch import GuardedDataset, Quarantine, QuarantineSampler

    cuda = settings.device.startswith("cuda")
    common: dict[str, Any] = {
        "batch_size": settings.batch_size,
        "num_workers": settings.workers,
        "pin_memory": cuda,
        "persistent_workers": settings.workers > 0,
        "drop_last": True,
    }
    listed = np.random.default_rng(0).choice(
        settings.size, size=int(settings.size * settings.quarantined), replace=False
    )
    quarantine = Quarantine.from_indices(listed, length=settings.size)
    sampler = QuarantineSampler(dataset, quarantine, shuffle=True)
    guarded = GuardedDataset(dataset, record=folder / "guard.db")
    return {
        "plain": DataLoader(dataset, shuffle=True, **common),
        "datalint": DataLoader(guarded, sampler=sampler, **common),
    }


def batches(loader: Any) -> Iterator[Any]:
    """The loader's batches, epoch after epoch."""
    while True:
        yield from loader


def measure_round(settings: Settings, model: Any, optimiser: Any, stream: Iterator[Any], arm: Arm) -> None:
    import torch

    device = torch.device(settings.device)
    loss_of = torch.nn.CrossEntropyLoss()
    for step in range(settings.warm_up + settings.steps):
        started = time.perf_counter()
        images, labels = next(stream)
        waited = time.perf_counter() - started
        images = images.to(device, non_blocking=True)
        labels = labels.to(device, non_blocking=True)
        optimiser.zero_grad(set_to_none=True)
        loss_of(model(images), labels).backward()
        optimiser.step()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        if step >= settings.warm_up:
            arm.steps.append(time.perf_counter() - started)
            arm.waits.append(waited)
    arm.pss.append(host_pss())


def host_pss() -> int:
    """PSS of this process and its descendants (the loader's workers), in bytes."""
    from datalint.host.processes import read_memory, tree_of

    total = 0
    for pid in tree_of(os.getpid()):
        rss, pss = read_memory(pid)
        total += pss if pss is not None else rss or 0
    return total


def run(settings: Settings) -> dict[str, Any]:
    import torch

    torch.manual_seed(0)
    dataset = JpegDataset(settings.size, settings.image)
    measured = {name: Arm() for name in ARMS}
    with tempfile.TemporaryDirectory(prefix="gpu-path-") as folder:
        arms = loaders(settings, dataset, Path(folder))
        streams = {name: batches(loader) for name, loader in arms.items()}
        model = small_cnn(dataset.classes).to(settings.device)
        optimiser = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        for number in range(settings.rounds):
            order = ARMS if number % 4 in (0, 3) else ARMS[::-1]  # ABBA: a linear drift cancels
            for name in order:
                measure_round(settings, model, optimiser, streams[name], measured[name])
        del streams, arms  # the persistent workers stop before the folder goes
    return {
        "device": device_name(settings.device),
        "settings": asdict(settings),
        "arms": {name: arm.summary() for name, arm in measured.items()},
    }


def device_name(device: str) -> str:
    import torch

    if device.startswith("cuda"):
        return torch.cuda.get_device_name(torch.device(device))
    return f"cpu ({os.cpu_count()} cores, torch {torch.__version__})"


def settings_from(args: argparse.Namespace) -> Settings:
    import torch

    cuda = torch.cuda.is_available() and not args.dry_run
    if args.dry_run:  # small enough to finish in seconds on a CPU: a check that the path runs, not a figure
        return Settings("cpu", 96, 32, 8, min(args.workers, 2), 2, 3, 1, args.quarantined)
    return Settings(
        "cuda" if cuda else "cpu", args.size, args.image, args.batch_size, args.workers, args.rounds,
        args.steps, args.warm_up, args.quarantined,
    )  # fmt: skip


def render(result: dict[str, Any]) -> str:
    lines = [f"device: {result['device']}", "settings: " + json.dumps(result["settings"])]
    lines.append(
        f"{'arm':<10} {'step ms (median)':>17} {'quartiles':>20} {'gpu idle':>9} {'host PSS MiB':>13}"
    )
    for name, arm in result["arms"].items():
        low, high = arm["step_ms_quartiles"]
        lines.append(
            f"{name:<10} {arm['step_ms_median']:>17.3f} {f'[{low:.3f}, {high:.3f}]':>20}"
            f" {arm['gpu_idle_share']:>9.1%} {arm['host_pss_mib_median']:>13.1f}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--dry-run", action="store_true", help="CPU, small sizes, a few seconds")
    parser.add_argument("--size", type=int, default=50_000, help="samples in the dataset")
    parser.add_argument("--image", type=int, default=128, help="side of the JPEGs, in pixels")
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=8, help="rounds per arm, alternated ABBA")
    parser.add_argument("--steps", type=int, default=50, help="measured steps per round")
    parser.add_argument("--warm-up", type=int, default=5, help="steps per round before measuring")
    parser.add_argument("--quarantined", type=float, default=0.01, help="share of samples on the list")
    parser.add_argument("--json", action="store_true", help="one JSON document instead of the table")
    args = parser.parse_args(argv)
    result = run(settings_from(args))
    print(json.dumps(result, indent=2) if args.json else render(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
