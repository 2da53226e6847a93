"""`datalint scan --webdataset` on real tar shards against `--images` on the same images unpacked.

Writes SHARDS tar shards of generated JPEGs (noise, so decoding costs what a photo costs), each
sample `<key>.jpg` + `.cls` + `.json`, with faults planted: JPEGs cut in half, unparsable JSON,
and the last shard truncated inside a member. The same JPEGs are unpacked into a folder. Both are
scanned with the same workers; the figures are wall seconds per image and whether the scan found
exactly the planted faults.

    .venv/bin/python benchmarks/laion_shards.py [--images 2000] [--shards 8] [--workers 2]
"""

from __future__ import annotations

import argparse
import io
import json
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import numpy as np
from PIL import Image


def noise_jpeg(rng: np.random.Generator, side: int) -> bytes:
    pixels = rng.integers(0, 256, (side, side, 3), dtype=np.uint8)
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, format="JPEG", quality=85)
    return out.getvalue()


def write_corpus(folder: Path, images: int, shards: int, side: int) -> tuple[dict[str, str], int]:
    """Shards and the unpacked folder; returns the planted faults {scan key: kind} and the images lost."""
    rng = np.random.default_rng(0)
    unpacked = folder / "unpacked"
    unpacked.mkdir()
    planted: dict[str, str] = {}
    per_shard = images // shards
    for shard in range(shards):
        name = f"train-{shard:06d}.tar"
        with tarfile.open(folder / name, "w") as archive:
            for n in range(per_shard):
                key = f"{shard:03d}{n:05d}"
                image = noise_jpeg(rng, side)
                caption = json.dumps({"caption": key}).encode()
                if n % 97 == 5:
                    image = image[: len(image) // 2]
                    planted[f"{name}/{key}"] = "corrupt"
                elif n % 89 == 7:
                    caption = b'{"caption": '
                    planted[f"{name}/{key}"] = "corrupt"
                (unpacked / f"{key}.jpg").write_bytes(image)
                for extension, data in (("jpg", image), ("cls", str(n % 10).encode()), ("json", caption)):
                    info = tarfile.TarInfo(f"{key}.{extension}")
                    info.size = len(data)
                    archive.addfile(info, io.BytesIO(data))
    last = folder / f"train-{shards - 1:06d}.tar"
    data = last.read_bytes()
    last.write_bytes(data[: int(len(data) * 0.9)])  # lose the last tenth, cutting a member
    planted[last.name] = "unreadable"
    return planted, 0


def scan(*argv: str) -> tuple[float, dict[str, str], int]:
    started = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-m", "datalint", "scan", *argv, "--format", "json"], capture_output=True, text=True
    )
    elapsed = time.perf_counter() - started
    summary = json.loads(result.stdout)
    document = json.loads(Path(summary["quarantine"]).read_text())
    return elapsed, {s["key"]: s["kinds"][0] for s in document["samples"]}, document["length"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=2000)
    parser.add_argument("--shards", type=int, default=8)
    parser.add_argument("--side", type=int, default=256)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        planted, _ = write_corpus(folder, args.images, args.shards, args.side)
        workers = ("--workers", str(args.workers))
        pattern = str(folder / f"train-{{000000..{args.shards - 1:06d}}}.tar")
        shard_s, found, shard_samples = scan("--webdataset", pattern, "--db", str(folder / "w.db"), *workers)
        images_s, _, image_files = scan(
            "--images", str(folder / "unpacked"), "--db", str(folder / "i.db"), *workers
        )
        cut = {key for key, kind in found.items() if kind == "corrupt" and key not in planted}
        lost_in_truncation = {k for k in planted if k.startswith(f"train-{args.shards - 1:06d}.tar/")} - set(
            found
        )
        print(
            json.dumps(
                {
                    "images": image_files,
                    "shard_samples_scanned": shard_samples,
                    "webdataset_seconds": round(shard_s, 2),
                    "images_seconds": round(images_s, 2),
                    "webdataset_ms_per_image": round(1000 * shard_s / image_files, 3),
                    "images_ms_per_image": round(1000 * images_s / image_files, 3),
                    "planted_found": sum(1 for k, v in planted.items() if found.get(k) == v),
                    "planted": len(planted),
                    "planted_lost_with_the_truncated_tail": len(lost_in_truncation),
                    "found_not_planted (the member the truncation cut)": sorted(cut),
                },
                indent=1,
            )
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
