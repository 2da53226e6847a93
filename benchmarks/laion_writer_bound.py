"""Where the single writer is the bottleneck: measuring that costs nothing, so writing is all.

W producer processes make rows as a worker sends them (image-scan rows, ~274 bytes in the
index; the "measurement" is a copy of a template row, free), and the rows reach an index in one
of two ways, both through datalint's own writer code:

* `single`: the producers send batches of 2,000 rows over a pipe to one writer (the scanner's
  `store.SampleWriter`: JSON-encode, `INSERT` in one transaction per batch), as `--shard-index off`;
* `sharded`: each producer writes its shards' rows into shard files itself (`store.open_shard_file`,
  `store.write_samples`, the population summary counted as it writes), and one merge at the end
  (`merge_shard_indexes`, the summaries' tree reduce, the population from them), as
  `--shard-index on`.

Reported per mode and W: rows/s end to end, wall of the merge, and CPU seconds per row of each
role (producers, writer(s), merge), from which the rate on C cores follows (benchmarks/README.md).

    .venv/bin/python benchmarks/laion_writer_bound.py [--rows 400000] [--shards 40] [--workers 1,2,4]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import resource
import tempfile
import time
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from datalint.index import store
from datalint.index.shards import merge_shard_indexes
from datalint.scan import summaries

BATCH = 2000


IMAGE = {"type": "ndarray", "dtype": "uint8", "shape": [224, 224, 3]}
SIGNATURE = json.dumps(
    {"type": "dict", "fields": {"image": IMAGE, "label": {"type": "int"}}}, separators=(",", ":")
)


def row(idx: int) -> dict[str, Any]:
    """A row as a worker sends it for one image sample (JSON columns already text, as workers send)."""
    return {
        "idx": idx, "key": f"train-{idx // 10000:06d}.tar/{idx:09d}", "status": "ok", "run_id": 1,
        "duration": 0.002 + (idx * 7919 % 1000) * 1e-5, "nbytes": 150528 + (idx * 104729 % 13) * 1024,
        "signature": SIGNATURE,
        "info": f'{{"file_bytes":{40000 + idx % 977},"format":"JPEG","width":256,"height":256}}',
        "worker": os.getpid(), "measured_at": "2026-12-01T10:00:00+00:00",
    }  # fmt: skip


def shards_of(rows: int, shards: int) -> list[range]:
    size = rows // shards
    return [range(n * size, (n + 1) * size) for n in range(shards)]


def cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


# ------------------------------------------------------------------------------------ single


def produce(ranges: list[range], sender: Connection) -> None:
    started = cpu()
    for shard in ranges:
        for first in range(shard.start, shard.stop, BATCH):
            sender.send([row(idx) for idx in range(first, min(first + BATCH, shard.stop))])
    sender.send(("cpu", cpu() - started))
    sender.close()


def single(folder: Path, ranges: list[range], workers: int) -> dict[str, Any]:
    db = store.open_index(folder / f"single-{workers}.db")
    writer = store.SampleWriter(db, run_id=1)
    started, writer_cpu = time.perf_counter(), cpu()
    context = multiprocessing.get_context("fork")
    pipes, processes = [], []
    for w in range(workers):
        reader, sender = context.Pipe(duplex=False)
        process = context.Process(target=produce, args=(ranges[w::workers], sender))
        process.start()
        sender.close()
        pipes.append(reader)
        processes.append(process)
    producer_cpu = 0.0
    open_pipes = list(pipes)
    while open_pipes:
        for ready in multiprocessing.connection.wait(open_pipes):
            message = ready.recv()  # type: ignore[union-attr]
            if isinstance(message, tuple):
                producer_cpu += message[1]
                open_pipes.remove(ready)
            else:
                writer.add(message)
    writer.flush()
    for process in processes:
        process.join()
    elapsed, writer_cpu = time.perf_counter() - started, cpu() - writer_cpu
    db.close()
    rows = sum(len(r) for r in ranges)
    return {
        "mode": "single", "workers": workers, "seconds": round(elapsed, 2),
        "rows_per_s": round(rows / elapsed),
        "producer_cpu_us_per_row": round(producer_cpu / rows * 1e6, 1),
        "writer_cpu_us_per_row": round(writer_cpu / rows * 1e6, 1),
    }  # fmt: skip


# ------------------------------------------------------------------------------------ sharded


def write_own(folder: Path, ranges: list[range], results: Any) -> None:
    started = cpu()
    for shard in ranges:
        path = folder / f"{shard.start:012d}-{shard.stop - 1:012d}.db"
        db = store.open_shard_file(path)
        counter = summaries.Summarizer()
        for first in range(shard.start, shard.stop, BATCH):
            values = [store.sample_values(row(idx)) for idx in range(first, min(first + BATCH, shard.stop))]
            store.write_samples(db, values)
            counter.add_values(values)
        summaries.write_summary(db.conn, counter.summary())
        db.conn.close()
    results.put(cpu() - started)


def sharded(folder: Path, ranges: list[range], workers: int) -> dict[str, Any]:
    files = folder / f"shards-{workers}"
    files.mkdir()
    context = multiprocessing.get_context("fork")
    results = context.Queue()
    started = time.perf_counter()
    processes = [
        context.Process(target=write_own, args=(files, ranges[w::workers], results)) for w in range(workers)
    ]
    for process in processes:
        process.start()
    writers_cpu = sum(results.get() for _ in processes)
    for process in processes:
        process.join()
    written = time.perf_counter() - started
    merge_cpu = cpu()
    paths = sorted(files.glob("*.db"))
    summary = summaries.merge_all([summaries.summary_of_file(path) for path in paths])
    target = folder / f"sharded-{workers}.db"
    merge_shard_indexes(target, paths, run_id=1)
    db = store.open_index(target)
    summaries.population(db, summary)
    db.close()
    merge_cpu = cpu() - merge_cpu
    elapsed = time.perf_counter() - started
    rows = sum(len(r) for r in ranges)
    return {
        "mode": "sharded", "workers": workers, "seconds": round(elapsed, 2),
        "rows_per_s": round(rows / elapsed),
        "writers_seconds": round(written, 2), "merge_seconds": round(elapsed - written, 2),
        "producer_and_writer_cpu_us_per_row": round(writers_cpu / rows * 1e6, 1),
        "merge_cpu_us_per_row": round(merge_cpu / rows * 1e6, 1),
    }  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=400_000)
    parser.add_argument("--shards", type=int, default=40)
    parser.add_argument("--workers", default="1,2,4")
    args = parser.parse_args()
    ranges = shards_of(args.rows, args.shards)
    results = []
    with tempfile.TemporaryDirectory() as name:
        for workers in (int(w) for w in args.workers.split(",")):
            load = round(os.getloadavg()[0], 1)
            for measure in (single, sharded):
                result = measure(Path(name), ranges, workers)
                result["load_average"] = load
                results.append(result)
                print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
