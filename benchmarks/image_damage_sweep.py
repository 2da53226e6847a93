"""How often the image probe finds each kind of damage, per format: a sweep over generated files.

    PYTHONPATH=<checkout> python benchmarks/image_damage_sweep.py [--trials 40] [--flips 8]

One photo-like 320x240 image (gradients, waves and noise) is encoded in each common format and
damaged `--trials` times in each of three ways real files are: `flipped` (`--flips` random bytes
changed between 20% and 90% of the file, as storage or transfer errors do), `cut` (the file ends
at a random point past 20%) and `zero-filled` (the same cut, with the length kept and the rest
zeros, as an interrupted download into a preallocated file leaves it). The table gives the share
of damaged files the probe calls `corrupt`. A flip that resynchronises (JPEG) or lands where any
bytes decode (raw pixels, WebP, whose formats have no checksum) cannot be found by any file
check; the figures say where that is. Nothing is written to disk.
"""

from __future__ import annotations

import argparse
import io
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from PIL import Image

from datalint.scan.images import ImageOptions, StderrCapture, probe_image_bytes

# name -> (Pillow format, extension, save options)
FORMATS: dict[str, tuple[str, str, dict[str, Any]]] = {
    "jpeg": ("JPEG", ".jpg", {"quality": 90}),
    "jpeg progressive": ("JPEG", ".jpg", {"quality": 90, "progressive": True}),
    "png": ("PNG", ".png", {}),
    "gif": ("GIF", ".gif", {}),
    "webp": ("WEBP", ".webp", {"quality": 80}),
    "webp lossless": ("WEBP", ".webp", {"lossless": True}),
    "bmp": ("BMP", ".bmp", {}),
    "ppm": ("PPM", ".ppm", {}),
    "tiff lzw": ("TIFF", ".tif", {"compression": "tiff_lzw"}),
    "tiff deflate": ("TIFF", ".tif", {"compression": "tiff_adobe_deflate"}),
    "tiff raw": ("TIFF", ".tif", {}),
}


def photo_like(rng: np.random.Generator) -> Image.Image:
    yy, xx = np.mgrid[0:240, 0:320]
    channels = [
        (xx * 0.8 + yy * 0.3) % 256,
        np.sin(xx / 17) * 60 + 120 + yy * 0.2,
        np.cos(yy / 13) * 70 + 110,
    ]
    pixels = np.stack(channels, -1) + rng.normal(0, 12, (240, 320, 3))
    return Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8))


def encoded(image: Image.Image, fmt: str, options: dict[str, Any]) -> bytes:
    buffer = io.BytesIO()
    (image.convert("P") if fmt == "GIF" else image).save(buffer, fmt, **options)
    return buffer.getvalue()


def flipped(data: bytes, rng: np.random.Generator, flips: int) -> bytes:
    damaged = bytearray(data)
    for position in rng.integers(len(data) // 5, len(data) * 9 // 10, flips):
        damaged[position] ^= int(rng.integers(1, 256))
    return bytes(damaged)


def cut(data: bytes, rng: np.random.Generator, flips: int) -> bytes:
    return data[: int(rng.integers(len(data) // 5, len(data) - 1))]


def zero_filled(data: bytes, rng: np.random.Generator, flips: int) -> bytes:
    kept = cut(data, rng, flips)
    return kept + bytes(len(data) - len(kept))


DAMAGE: dict[str, Callable[[bytes, np.random.Generator, int], bytes]] = {
    "flipped": flipped,
    "cut": cut,
    "zero-filled": zero_filled,
}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=40, help="damaged copies per format and kind")
    parser.add_argument("--flips", type=int, default=8, help="bytes changed in a flipped copy")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    image, capture, options = photo_like(rng), StderrCapture(), ImageOptions()
    print(f"| format | bytes | {' | '.join(DAMAGE)} |")
    print(f"|---|---|{'---|' * len(DAMAGE)}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Pillow's warnings about the damaged files themselves
        for name, (fmt, extension, save) in FORMATS.items():
            data = encoded(image, fmt, save)
            assert not any(
                f.kind == "corrupt" for f in probe_image_bytes(data, extension, options, capture).findings
            )
            cells = []
            for damage in DAMAGE.values():
                found = sum(
                    any(
                        f.kind == "corrupt"
                        for f in probe_image_bytes(
                            damage(data, rng, args.flips), extension, options, capture
                        ).findings
                    )
                    for _ in range(args.trials)
                )
                cells.append(f"{found}/{args.trials}")
            print(f"| {name} | {len(data):,} | {' | '.join(cells)} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
