"""A 1M-entry quarantine list from `datalint serve`: first GETs in every case, and the 304.

    python benchmarks/service_lists.py [--entries 1000000] [--repeat 1000] [--runs 3] [--ingests 20]
                                       [--keep INDEX | --index INDEX]

Targets: the first GET of a 1M-entry list under 1 s, a 304 (If-None-Match) under 5 ms. The index is
written through the scan's store (one scan run, every sample an `error` finding marked for
quarantine), then the service is started on it. Measured, in order: the first GET of an index the
service has never listed (it waits for the first build), GETs of the built list, the first GET after
each of `--ingests` batches of guard failures, the first GET after another program changed the index
(and when the new list was published), `--runs` x `--repeat` 304s, then a restart: its first GET and
its 304s. Timings are client-side wall time over loopback (one keep-alive httpx client), bodies read.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
from service_common import Service, environment, load, percentile

from datalint.index import store


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


def scan_list_of(index: Path) -> Path:
    """Where --keep puts the scan's list of a kept index."""
    return index.with_name(index.name + ".quarantine.json")


def write_scan_list(index: Path, path: Path) -> None:
    """The list a scan writes beside its index (`datalint quarantine` writes it the same way)."""
    command = [sys.executable, "-m", "datalint", "quarantine", str(index), "--kinds", "error"]
    command += ["-o", str(path)]
    done = subprocess.run(command, capture_output=True, env=environment())
    if done.returncode not in (0, 1):  # 1: the list holds samples, as a scan's exit
        raise subprocess.CalledProcessError(done.returncode, command, done.stdout, done.stderr)


def timed_get(client: httpx.Client, url: str, **headers: str) -> tuple[float, httpx.Response]:
    started = time.perf_counter()
    answer = client.get(url, headers=headers)
    return time.perf_counter() - started, answer


def not_modified(
    service: Service, client: httpx.Client, url: str, etag: str, repeat: int
) -> dict[str, float]:
    """`repeat` 304s: client-side p50/p99 (ms) and the service's CPU per 304 (us, load-independent)."""
    times = []
    cpu = service.cpu_seconds()
    for _ in range(repeat):
        elapsed, answer = timed_get(client, url, **{"If-None-Match": etag})
        assert answer.status_code == 304, answer.status_code
        times.append(elapsed)
    cpu = service.cpu_seconds() - cpu
    return {"p50_ms": ms(times, 0.5), "p99_ms": ms(times, 0.99), "service_cpu_us": round(cpu / repeat * 1e6)}


def foreign_change(index: Path, sample: int) -> None:
    """Another program marks one more sample for quarantine (as `datalint quarantine` or a watcher would)."""
    db = store.open_index(index)
    try:
        with store.transaction(db):
            db.conn.execute(
                "INSERT INTO findings (idx, kind, detail, quarantine) VALUES (?, 'truncated', 'cut', 1)",
                (sample,),
            )
    finally:
        db.close()


def ms(values: list[float], q: float) -> float:
    return round(percentile(values, q) * 1000, 2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=1000, help="304s per run")
    parser.add_argument("--runs", type=int, default=3, help="runs of --repeat 304s, on each service start")
    parser.add_argument("--ingests", type=int, default=20, help="ingest-then-GET rounds")
    parser.add_argument(
        "--index", type=Path, help="copy this index instead of writing one (a previous run's)"
    )
    parser.add_argument("--keep", type=Path, help="copy the written index here, for --index next time")
    parser.add_argument(
        "--no-scan-list",
        action="store_true",
        help="no quarantine.json beside the index: the first GET waits for the first build",
    )
    args = parser.parse_args()
    figures: dict[str, object] = {"entries": args.entries}
    with tempfile.TemporaryDirectory() as folder:
        base = Path(folder)
        index = base / "state" / "datasets" / "big" / "index.db"
        started = time.perf_counter()
        scan_list = index.parent / "quarantine.json"
        if args.index:
            index.parent.mkdir(parents=True)
            shutil.copyfile(args.index, index)
            if scan_list_of(args.index).is_file():
                shutil.copyfile(scan_list_of(args.index), scan_list)
        else:
            write_index(index, args.entries)
            write_scan_list(index, scan_list)
            if args.keep:
                shutil.copyfile(index, args.keep)
                shutil.copyfile(scan_list, scan_list_of(args.keep))
        if args.no_scan_list:
            scan_list.unlink(missing_ok=True)
        figures["index_write_s"] = round(time.perf_counter() - started, 1)
        table = '\n[[datasets]]\nname = "big"\nimages = "/nonexistent"\n'
        service = Service(base, table)
        url = service.base + "/v1/datasets/big/quarantine"
        identity = {"Accept-Encoding": "identity"}
        try:
            with httpx.Client(headers=service.headers, timeout=120) as client:
                # 1. an index the service has never listed: the scan's quarantine.json is served until
                #    the first build is published (without one, this GET waits for the build)
                elapsed, first = timed_get(client, url, **{"Accept-Encoding": "gzip"})
                assert len(first.json()["samples"]) == args.entries
                figures["first_list_ever_mb"] = round(len(first.content) / 1e6, 1)
                figures["first_list_ever_s"] = round(elapsed, 3)
                figures["first_list_ever_was_the_scans"] = "list of big: the scan's" in service.log()
                while "list of big built" not in service.log():
                    time.sleep(0.1)
                elapsed, first = timed_get(client, url, **identity)
                assert len(first.json()["samples"]) == args.entries
                figures["body_mb"] = round(len(first.content) / 1e6, 1)
                figures["get_identity_s"] = round(timed_get(client, url, **identity)[0], 3)
                elapsed, gzipped = timed_get(client, url, **{"Accept-Encoding": "gzip"})
                assert len(gzipped.content) == len(
                    first.content
                )  # httpx decompresses, as datalint's client does
                figures["get_gzip_s"] = round(elapsed, 3)
                etag = first.headers["etag"]
                # 2. guard failures for new samples, then the first GET (appended, never rebuilt)
                after_ingest, posts = [], []  # a POST is answered once its entries are appended
                for round_ in range(args.ingests):
                    failures = [
                        {"index": args.entries + round_ * 100 + i, "error_type": "OSError", "message": "m"}
                        for i in range(100)
                    ]
                    started = time.perf_counter()
                    client.post(service.base + "/v1/datasets/big/failures", json={"failures": failures})
                    posts.append(time.perf_counter() - started)
                    elapsed, changed = timed_get(
                        client, url, **{"Accept-Encoding": "gzip", "If-None-Match": etag}
                    )
                    after_ingest.append(elapsed)
                    assert changed.status_code == 200 and changed.headers["etag"] != etag
                    etag = changed.headers["etag"]
                figures["post_100_into_the_list_p50_p99_ms"] = [ms(posts, 0.5), ms(posts, 0.99)]
                figures["first_get_after_ingest_p50_s"] = round(percentile(after_ingest, 0.5), 3)
                figures["first_get_after_ingest_p99_s"] = round(percentile(after_ingest, 0.99), 3)
                # 3. the index changed by another program: served at once (the previous list, its own
                #    ETag) while the new one is built; then the new one
                foreign_change(index, args.entries + args.ingests * 100 + 1)
                changed_at = time.perf_counter()
                elapsed, during = timed_get(client, url, **{"Accept-Encoding": "gzip"})
                figures["first_get_after_a_change_s"] = round(elapsed, 3)
                while during.headers["etag"] == etag:
                    time.sleep(0.05)
                    during = client.get(url, headers={"If-None-Match": etag})
                figures["new_list_published_after_s"] = round(time.perf_counter() - changed_at, 1)
                etag = during.headers["etag"]
                figures["not_modified"] = [
                    not_modified(service, client, url, etag, args.repeat) for _ in range(args.runs)
                ]
        finally:
            service.stop()
        # 4. a restart: the saved list is served at once
        service.start()
        try:
            with httpx.Client(headers=service.headers, timeout=120) as client:
                elapsed, restarted = timed_get(client, url, **{"Accept-Encoding": "gzip"})
                figures["first_get_after_restart_s"] = round(elapsed, 3)
                figures["etag_kept_across_restart"] = restarted.headers["etag"] == etag
                assert len(restarted.json()["samples"]) == args.entries + args.ingests * 100 + 1
                figures["not_modified_after_restart"] = [
                    not_modified(service, client, url, restarted.headers["etag"], args.repeat)
                    for _ in range(args.runs)
                ]
        finally:
            service.stop()
        log = service.log()
        builds = [float(x) for x in re.findall(r"list of big built: \d+ entries in ([0-9.]+) s", log)]
        figures["builds_s"] = builds
        figures["restored"] = "list of big restored" in log
    figures["load"] = load()
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
