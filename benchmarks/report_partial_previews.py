"""What a truncated file's preview costs next to a whole file's, per format.

    .venv/bin/python benchmarks/report_partial_previews.py [--files 40] [--size 1024x768] [--cut 0.6]

For each format, `--files` generated pictures (noise over a gradient, so every row differs) are
written whole and cut at `--cut` of their bytes. The report's own `thumbnail()` makes every
preview, in this process: a whole file is one decode (JPEG at a reduced DCT scale), a truncated
one is the failed decode plus the two decodes over filled memory that find what the decoder wrote
(and, for JPEG, the decode with the end marker appended). Prints ms per preview, the ratio, and
the caption the truncated previews got.
"""

from __future__ import annotations

import argparse
import io
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
from PIL import Image

from datalint.report.index import FlaggedSample
from datalint.report.thumbs import thumbnail

FORMATS: dict[str, dict[str, object]] = {
    "JPEG": {"format": "JPEG", "quality": 85},
    "JPEG progressive": {"format": "JPEG", "quality": 85, "progressive": True},
    "PNG": {"format": "PNG"},
    "BMP": {"format": "BMP"},
}


def picture(rng: np.random.Generator, width: int, height: int) -> Image.Image:
    base = np.linspace(0, 255, width)[None, :, None] * np.ones((height, 1, 3))
    return Image.fromarray(np.clip(base + rng.normal(0, 30, (height, width, 3)), 0, 255).astype(np.uint8))


def sample(key: str) -> FlaggedSample:
    detail = ("image file is truncated",)
    return FlaggedSample(0, key, "ok", ("corrupt",), detail, True, None, None, None, None, None, {})


def per_preview_ms(folder: Path, names: list[str], repeat: int) -> tuple[float, list[str]]:
    """The median over `repeat` passes of the mean ms per preview, and the captions."""
    passes = []
    captions: list[str] = []
    for _ in range(repeat):
        started = time.perf_counter()
        thumbs = [thumbnail(sample(name), folder) for name in names]
        passes.append((time.perf_counter() - started) * 1000 / len(names))
        captions = [thumb.partial or ("preview" if thumb.data_uri else thumb.reason) for thumb in thumbs]
    return statistics.median(passes), captions


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=40)
    parser.add_argument("--size", default="1024x768")
    parser.add_argument("--cut", type=float, default=0.6)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    width, height = (int(side) for side in args.size.split("x"))
    rng = np.random.default_rng(0)
    print(f"{args.files} files of {width}x{height} per format, cut at {args.cut:.0%} of their bytes")
    print("| format | whole ms/preview | truncated ms/preview | ratio | caption (first file) |")
    print("|---|---:|---:|---:|---|")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for label, options in FORMATS.items():
            whole, cut = [], []
            for number in range(args.files):
                buffer = io.BytesIO()
                picture(rng, width, height).save(buffer, **options)  # type: ignore[arg-type]
                data = buffer.getvalue()
                stem = f"{label.replace(' ', '_')}_{number}"
                (folder / f"{stem}.whole").write_bytes(data)
                (folder / f"{stem}.cut").write_bytes(data[: int(len(data) * args.cut)])
                whole.append(f"{stem}.whole")
                cut.append(f"{stem}.cut")
            whole_ms, _ = per_preview_ms(folder, whole, args.repeat)
            cut_ms, captions = per_preview_ms(folder, cut, args.repeat)
            print(f"| {label} | {whole_ms:.1f} | {cut_ms:.1f} | {cut_ms / whole_ms:.1f}x | {captions[0]} |")


if __name__ == "__main__":
    main()
