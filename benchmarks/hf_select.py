"""`datalint.hf.drop_quarantined` on a large Hugging Face Dataset, against the filter a user would write.

A Dataset of --size rows (an id column and a number) with --quarantined rows listed, matched three ways:
- by position (keys FINGERPRINT#ROW, as the scan writes them without --key-column),
- by the id column (`key_column="id"`, matched in Arrow),
- the alternative: `ds.filter(lambda row: row["id"] not in bad, num_proc=1)` (a Python call per row; run
  on --filter-size rows only, and scaled: it takes minutes at 10M).
Times are CPU seconds (process time) of each call, the best of --repeat; the dataset is built once.

    .venv/bin/python benchmarks/hf_select.py [--size 10000000] [--quarantined 10000] [--repeat 3]
    .venv/bin/python benchmarks/hf_select.py --size 200000 --filter-size 20000 --repeat 1   # a quick check
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from collections.abc import Callable
from typing import Any


def _cpu(call: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    best, result = float("inf"), None
    for _ in range(repeat):
        started = time.process_time()
        result = call()
        best = min(best, time.process_time() - started)
    return best, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=10_000_000)
    parser.add_argument("--quarantined", type=int, default=10_000)
    parser.add_argument("--filter-size", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    import datasets
    import numpy as np
    import pyarrow as pa

    from datalint.hf import drop_quarantined, row_key
    from datalint.training.quarantine import Quarantine

    datasets.disable_progress_bars()
    ids = pa.array(np.arange(args.size)).cast(pa.string())
    ds = datasets.Dataset(pa.table({"id": ids, "x": np.arange(args.size)}))
    bad = np.sort(np.random.default_rng(0).choice(args.size, size=args.quarantined, replace=False))
    row_keys = [row_key(ds._fingerprint, int(i)) for i in bad]
    by_row = Quarantine.from_indices(bad, length=args.size, keys=row_keys)
    by_id = Quarantine.from_indices(bad, length=args.size, keys=[str(int(i)) for i in bad])

    figures: dict[str, Any] = {"size": args.size, "quarantined": args.quarantined}
    seconds, kept = _cpu(lambda: drop_quarantined(ds, by_row), args.repeat)
    assert len(kept) == args.size - args.quarantined
    figures["drop_quarantined by position, CPU s"] = round(seconds, 3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        seconds, kept = _cpu(lambda: drop_quarantined(ds, by_id, key_column="id"), args.repeat)
    assert len(kept) == args.size - args.quarantined
    figures["drop_quarantined by id column, CPU s"] = round(seconds, 3)

    small = ds.select(range(min(args.filter_size, args.size)))
    wanted = {str(int(i)) for i in bad}
    seconds, _ = _cpu(lambda: small.filter(lambda row: row["id"] not in wanted), 1)
    figures[f"ds.filter(lambda) on {len(small)} rows, CPU s"] = round(seconds, 3)
    figures["ds.filter(lambda) scaled to size, CPU s"] = round(seconds * args.size / len(small), 1)
    print(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
