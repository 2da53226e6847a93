"""CPU per sample of capturing native stderr around `dataset[i]`, on and off, in one process.

    PYTHONPATH=<checkout> python benchmarks/decoder_stderr_cost.py [--samples 20000]

Two datasets: one whose `__getitem__` returns a small array at once (the capture's cost alone) and
one that decodes a 500x375 JPEG with `cv2.imread` (a real sample). Each is measured with
`DatasetSource.measure` (the capture on) and with the same probes called directly (off), with fd 2
as a scan worker has it (a read-write output file: the text is read back) and as `--workers 0` has
it on a terminal or pipe (fd 2 pointed at a private file for the sample, then echoed). Rounds
alternate on and off; the figure is the median process CPU time per sample (`time.process_time`),
which a loaded machine disturbs less than wall time.
"""

from __future__ import annotations

import argparse
import io
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from datalint.scan import probes
from datalint.scan.sources import DatasetSource, SourceDescription


class Arrays:
    def __len__(self) -> int:
        return 1 << 30

    def __getitem__(self, index: int) -> Any:
        return np.zeros((3, 8, 8), np.uint8)


class Photos:
    def __init__(self, path: str) -> None:
        self.path = path

    def __len__(self) -> int:
        return 1 << 30

    def __getitem__(self, index: int) -> Any:
        import cv2

        return cv2.imread(self.path)


def photo(folder: Path) -> str:
    from PIL import Image

    rng = np.random.default_rng(0)
    pixels = np.clip(rng.normal(128, 40, (375, 500, 3)), 0, 255).astype(np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, "JPEG", quality=90)
    path = folder / "photo.jpg"
    path.write_bytes(buffer.getvalue())
    return str(path)


@contextmanager
def stderr_as(kind: str) -> Iterator[None]:
    """fd 2 as a scan worker has it ("worker": a read-write file) or as a pipe ("in-process")."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as output:  # opened read-write, as a worker's output file is
        target = os.dup(output.fileno()) if kind == "worker" else os.open(os.devnull, os.O_WRONLY)
    os.dup2(target, 2)
    try:
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(target)


def cpu_per_sample(measure: Callable[[int], Any], samples: int) -> float:
    started = time.process_time()
    for index in range(samples):
        measure(index)
    return (time.process_time() - started) / samples


def compare(dataset: Any, samples: int, rounds: int) -> dict[str, float]:
    source = DatasetSource(SourceDescription.make("dataset", "<bench>"), dataset)

    def off(index: int) -> Any:
        return probes.describe(dataset[index], ())

    figures: dict[str, list[float]] = {"off": [], "on": []}
    for _ in range(rounds):
        figures["off"].append(cpu_per_sample(off, samples))
        figures["on"].append(cpu_per_sample(source.measure, samples))
    return {name: statistics.median(values) for name, values in figures.items()}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=20000, help="samples per round (arrays)")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as folder:
        datasets = {
            "8x8 array": (Arrays(), args.samples),
            "cv2.imread 500x375 JPEG": (Photos(photo(Path(folder))), args.samples // 20),
        }
        print(f"{'dataset':<26}{'fd 2':<12}{'off µs':>10}{'on µs':>10}{'capture µs':>12}{'%':>7}")
        for name, (dataset, samples) in datasets.items():
            for kind in ("worker", "in-process"):
                with stderr_as(kind):
                    figures = compare(dataset, samples, args.rounds)
                cost = figures["on"] - figures["off"]
                print(
                    f"{name:<26}{kind:<12}{figures['off'] * 1e6:>10.1f}{figures['on'] * 1e6:>10.1f}"
                    f"{cost * 1e6:>12.1f}{100 * cost / figures['off']:>7.1f}"
                )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
