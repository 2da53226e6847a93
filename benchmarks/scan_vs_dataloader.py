"""datalint scan vs the DataLoader it replaces, on the same dataset and the same number of workers.

    .venv/bin/python benchmarks/scan_vs_dataloader.py --workers 2 --trivial 20000 --jpegs 2000

For each dataset (`--rounds N`: N alternating rounds, medians): wall time of iterating
`DataLoader(ds, batch_size=None, num_workers=W)` once, then of `datalint.scan(ds, workers=W)`:
isolating every sample, probing it, writing the SQLite index, deriving the findings and writing
the quarantine list. Both get the dataset already built.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "fixtures" / "datasets"))

import scan_bench  # noqa: E402  (the benchmark datasets, beside the test fixtures)
import torch  # noqa: E402
from torch.utils.data import DataLoader  # noqa: E402

import datalint  # noqa: E402


def time_dataloader(dataset: object, workers: int) -> float:
    started = time.perf_counter()
    count = sum(1 for _ in DataLoader(dataset, batch_size=None, num_workers=workers))  # type: ignore[arg-type]
    assert count == len(dataset)  # type: ignore[arg-type]
    return time.perf_counter() - started


def time_scan(dataset: object, workers: int, folder: Path) -> tuple[float, int]:
    started = time.perf_counter()
    summary = datalint.scan(dataset, db=folder / "bench.db", workers=workers, rescan=True)
    elapsed = time.perf_counter() - started
    assert summary.statuses["ok"] == len(dataset)  # type: ignore[arg-type]
    return elapsed, summary.scanned


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--trivial", type=int, default=20000, help="samples of the trivial dataset")
    parser.add_argument("--jpegs", type=int, default=2000, help="samples of the JPEG-decoding dataset")
    parser.add_argument("--rounds", type=int, default=1,
                        help="alternate the DataLoader and the scan this many times; medians are printed")
    args = parser.parse_args()
    torch.set_num_threads(1)
    datasets = {
        f"trivial: {args.trivial:,} tiny tensors": scan_bench.trivial(args.trivial),
        f"decode: {args.jpegs:,} JPEG decodes (256x256)": scan_bench.jpegs(args.jpegs),
    }
    print("| dataset | workers | DataLoader (s) | datalint scan (s) | scan / DataLoader |")
    print("|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as folder:
        for name, dataset in datasets.items():
            loaders, scans = [], []
            for _ in range(args.rounds):  # side by side, so both see the same load
                loaders.append(time_dataloader(dataset, args.workers))
                scans.append(time_scan(dataset, args.workers, Path(folder))[0])
            loader, scan = statistics.median(loaders), statistics.median(scans)
            print(
                f"| {name} | {args.workers} | {loader:.2f} | {scan:.2f} | {scan / loader:.2f} |", flush=True
            )


if __name__ == "__main__":
    main()
