"""End-to-end write rate of a sharded scan: per-shard index files against the single writer.

Writes SHARDS webdataset tar shards and scans them twice with the same WORKERS, once with
`--shard-index off` (the scanner writes every row, today's path) and once with `--shard-index on`
(each shard's writer process writes its own file; one merge at the end). The figures are samples
per second of the whole scan call (listing, measuring, writing, merging, findings, the list), and
the scanning process's own CPU seconds: what bounds one scanner once the workers are many.

Two kinds of sample:

* `text` (the default): a `.cls` and a `.txt` member per sample, which cost microseconds to
  check. Measuring is nearly free, so the rate is what the engine and the index can carry: the
  regime of a cluster with many cores per scanner, where the single writer is the bottleneck.
* `image`: a 64x64 JPEG and a `.cls` per sample: decoding dominates, as on one small machine.

    .venv/bin/python benchmarks/laion_write.py [--samples 200000] [--shards 40] [--workers 2] [--kind text]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import resource
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

import datalint
from datalint.scan import shard_writers
from datalint.scan.sources import build_source, forget_source
from datalint.scan.webdataset import webdataset_description


def jpeg(rng: np.random.Generator, side: int = 64) -> bytes:
    out = io.BytesIO()
    Image.fromarray(rng.integers(0, 256, (side, side, 3), dtype=np.uint8)).save(out, format="JPEG")
    return out.getvalue()


def write_shards(folder: Path, samples: int, shards: int, kind: str) -> None:
    rng = np.random.default_rng(0)
    images = [jpeg(rng) for _ in range(64)] if kind == "image" else []
    per_shard = samples // shards
    for shard in range(shards):
        with tarfile.open(folder / f"train-{shard:06d}.tar", "w") as archive:
            for n in range(per_shard):
                key = f"{shard:04d}{n:07d}"
                members = [("cls", str(n % 10).encode())]
                members.append(
                    ("jpg", images[n % 64]) if kind == "image" else ("txt", f"caption {key}".encode())
                )
                for extension, data in members:
                    info = tarfile.TarInfo(f"{key}.{extension}")
                    info.size = len(data)
                    archive.addfile(info, io.BytesIO(data))


def scan(pattern: str, db: Path, workers: int, mode: str) -> dict[str, Any]:
    merged: list[float] = []
    merge = shard_writers.merge_finished

    def timed(*args: Any, **kwargs: Any) -> shard_writers.MergedFiles:
        started = time.perf_counter()
        result = merge(*args, **kwargs)
        merged.append(time.perf_counter() - started)
        return result

    shard_writers.merge_finished = timed  # type: ignore[assignment]
    description = webdataset_description(pattern)
    cpu = time.process_time()
    build_source(description)  # listing the shard headers, as the scan does first: timed apart
    listing_cpu = time.process_time() - cpu
    forget_source(description)
    try:
        started, cpu, children = time.perf_counter(), time.process_time(), children_cpu()
        summary = datalint.scan(description, db=db, workers=workers, shard_index=mode)  # type: ignore[arg-type]
        elapsed, scanner_cpu = time.perf_counter() - started, time.process_time() - cpu
        workers_cpu = children_cpu() - children
    finally:
        shard_writers.merge_finished = merge  # type: ignore[assignment]
    return {
        "shard_index": mode,
        "samples": summary.length,
        "seconds": round(elapsed, 2),
        "samples_per_s": round((summary.length or 0) / elapsed),
        "merge_seconds": round(sum(merged), 2),
        # The scanner's own CPU (listing, receiving and writing rows, merging, findings): the rate
        # one scanner could carry if workers were free is samples / this.
        "scanner_cpu_seconds": round(scanner_cpu, 2),
        "scanner_ceiling_samples_per_s": round((summary.length or 0) / max(scanner_cpu, 1e-9)),
        "listing_cpu_seconds": round(listing_cpu, 2),
        # Besides listing, what the scanner spends per sample: the single writer's rows, or the merge.
        "scanner_cpu_us_per_sample_besides_listing": round(
            1e6 * (scanner_cpu - listing_cpu) / max(1, summary.length or 0)
        ),
        # The workers' CPU (off: measuring and sending; on: the shard writers and their measuring
        # children, writing included), all reaped descendants: what the cores must supply per sample.
        "workers_cpu_us_per_sample": round(1e6 * workers_cpu / max(1, summary.length or 0)),
        "index_mb": round(db.stat().st_size / 1e6, 1),
    }


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=200_000)
    parser.add_argument("--shards", type=int, default=40)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--kind", choices=("text", "image"), default="text")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        started = time.perf_counter()
        write_shards(folder, args.samples, args.shards, args.kind)
        written = time.perf_counter() - started
        pattern = str(folder / "train-*.tar")
        results = [scan(pattern, folder / f"{mode}.db", args.workers, mode) for mode in ("off", "on")]
    report = {
        "kind": args.kind,
        "shards": args.shards,
        "workers": args.workers,
        "load_average": round(os.getloadavg()[0], 1),
        "corpus_seconds": round(written, 1),
        "results": results,
        "speedup": round(results[1]["samples_per_s"] / max(1, results[0]["samples_per_s"]), 2),
    }
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
