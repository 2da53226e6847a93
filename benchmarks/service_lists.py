"""A 1M-entry quarantine list from `datalint serve`: the first GET, after an ingest too, and a 304.

    python benchmarks/service_lists.py [--entries 1000000] [--repeat 200] [--ingests 20]

Targets: the first GET of a 1M-entry list under 1 s, a 304 (If-None-Match) under 5 ms. The index is
written through the scan's store (one scan run, every sample an `error` finding marked for
quarantine), then the service is started on it; timings are client-side wall time over loopback,
the whole body read.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import tempfile
import time
from pathlib import Path

import httpx
from service_common import Service, load, percentile

from datalint.scan import store


def write_index(path: Path, entries: int) -> None:
    db = store.open_index(path)
    try:
        store.start_run(
            db,
            kind="dataset",
            spec="bench:big",
            length=entries,
            fingerprint=None,
            options={"policy": {"kinds": ["error"]}},
            environment={},
        )
        with store.transaction(db):
            db.conn.executemany(
                "INSERT INTO samples (idx, key, status, run_id, error_type, error_message) "
                "VALUES (?, ?, 'error', 1, 'OSError', 'truncated')",
                ((i, f"train/{i:07d}.jpg") for i in range(entries)),
            )
            db.conn.executemany(
                "INSERT INTO findings (idx, kind, detail, quarantine)"
                " VALUES (?, 'error', 'OSError: truncated', 1)",
                ((i,) for i in range(entries)),
            )
    finally:
        db.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=200)
    parser.add_argument("--ingests", type=int, default=20, help="ingest-then-GET rounds")
    parser.add_argument(
        "--index", type=Path, help="copy this index instead of writing one (a previous run's)"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        base = Path(folder)
        index = base / "state" / "datasets" / "big" / "index.db"
        started = time.perf_counter()
        if args.index:
            index.parent.mkdir(parents=True)
            shutil.copyfile(args.index, index)
        else:
            write_index(index, args.entries)
        written = time.perf_counter() - started
        service = Service(base, '\n[[datasets]]\nname = "big"\nimages = "/nonexistent"\n')
        url = service.base + "/v1/datasets/big/quarantine"
        try:
            with httpx.Client(headers=service.headers, timeout=120) as client:
                client.get(service.base + "/healthz")
                started = time.perf_counter()
                first = client.get(
                    url, headers={"Accept-Encoding": "identity"}
                )  # waits for the build at start
                first_s = time.perf_counter() - started
                assert len(first.json()["samples"]) == args.entries
                started = time.perf_counter()
                client.get(url, headers={"Accept-Encoding": "identity"})
                cached_s = time.perf_counter() - started
                started = time.perf_counter()
                gzipped = client.get(url, headers={"Accept-Encoding": "gzip"})
                assert len(gzipped.content) == len(
                    first.content
                )  # httpx decompresses, as datalint's client does
                gzip_s = time.perf_counter() - started
                etag = first.headers["etag"]
                after_ingest = []  # a batch of guard failures for new samples, then the first GET
                for round_ in range(args.ingests):
                    failures = [
                        {"index": args.entries + round_ * 100 + i, "error_type": "OSError", "message": "m"}
                        for i in range(100)
                    ]
                    client.post(service.base + "/v1/datasets/big/failures", json={"failures": failures})
                    started = time.perf_counter()
                    changed = client.get(url, headers={"Accept-Encoding": "gzip", "If-None-Match": etag})
                    after_ingest.append(time.perf_counter() - started)
                    assert changed.status_code == 200 and changed.headers["etag"] != etag
                    etag = changed.headers["etag"]
                times = []
                for _ in range(args.repeat):
                    started = time.perf_counter()
                    answer = client.get(url, headers={"If-None-Match": etag})
                    times.append(time.perf_counter() - started)
                    assert answer.status_code == 304
        finally:
            service.stop()
        built = re.search(
            r"list of big built: \d+ entries in ([0-9.]+) s", (base / "service.log").read_text()
        )
    print(
        json.dumps(
            {
                "entries": args.entries,
                "body_mb": round(len(first.content) / 1e6, 1),
                "index_write_s": round(written, 1),
                "build_s": float(built.group(1)) if built else None,
                "first_get_after_start_s": round(first_s, 3),
                "get_built_s": round(cached_s, 3),
                "get_built_gzip_s": round(gzip_s, 3),
                "first_get_after_ingest_p50_s": round(percentile(after_ingest, 0.5), 3),
                "first_get_after_ingest_p99_s": round(percentile(after_ingest, 0.99), 3),
                "not_modified_p50_ms": round(percentile(times, 0.5) * 1000, 2),
                "not_modified_p99_ms": round(percentile(times, 0.99) * 1000, 2),
                "load": load(),
            }
        )
    )


if __name__ == "__main__":
    main()
