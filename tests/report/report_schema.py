"""Indexes written row by row through the scan's own store (datalint.index.store), for tests that
need exact control over the rows (hostile strings, 100k samples, unfinished scans). Tests of the
whole pipeline use an index from a real `datalint scan` instead (see conftest.py)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from datalint.index import store


def write_index(
    path: Path,
    *,
    run: dict[str, Any],
    samples: Iterable[dict[str, Any]],
    findings: Iterable[dict[str, Any]] = (),
    columns: Sequence[str] = store.SAMPLE_COLUMNS,
) -> Path:
    """The schema and writes of the scan's store, with rows (and run times) chosen by the test.

    `columns`: the sample columns to write (the others stay NULL); fewer is faster at 100k rows.
    """
    db = store.open_index(path)
    row = {"id": 1, "started": "2026-11-30T10:00:00+00:00", "finished": "2026-11-30T10:00:42+00:00", **run}
    for column in ("options", "environment", "counts"):
        if not isinstance(row.get(column), str | None):
            row[column] = json.dumps(row[column])
    db["runs"].insert(row, replace=True)
    sql = f"INSERT OR REPLACE INTO samples ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})"
    # one executemany in one transaction: sqlite-utils' per-row work would dominate a 100k-row test
    db.conn.execute("BEGIN")
    db.conn.executemany(sql, ([_json(sample.get(name)) for name in columns] for sample in samples))
    db.conn.execute("COMMIT")
    store.write_findings(db, findings)
    db.conn.close()
    return path


def _json(value: Any) -> Any:
    return json.dumps(value) if isinstance(value, dict | list) else value


# Untrusted input as the index can hold it: file names and messages come from the data.
HOSTILE_KEY = 'train/<img src=x onerror="alert(1)">.jpg'
HOSTILE_MESSAGE = "</script><script>alert('owned')</script> & <b>bold</b> &amp;"
HOSTILE_TRACEBACK = (
    'Traceback (most recent call last):\n  File "/data/ds.py", line 9, in __getitem__\n'
    "    raise ValueError(name)\nValueError: </pre></details><script>alert(2)</script> <!-- ]]>"
)

CRASH, ERROR, TIMEOUT = 17, 42, 99
OVERSIZED = range(200, 205)
SLOW = range(300, 304)
DTYPE = range(310, 420)  # enough flagged samples for more than one page of the table (100 rows)
FLAGGED = {CRASH, ERROR, TIMEOUT, *OVERSIZED, *SLOW, *DTYPE}
QUARANTINED = {CRASH, ERROR, TIMEOUT, *OVERSIZED}


def dataset_samples(n: int) -> list[dict[str, Any]]:
    samples = []
    for i in range(n):
        samples.append(
            {
                "idx": i,
                "key": f"train/{i % 7}/{i:05d}.npy",
                "status": "ok",
                "run_id": 1,
                # a deterministic spread over two decades, so the histograms have a shape
                "duration": 0.001 * (1 + (i * 37 % 100) / 10),
                "nbytes": 12_288 + (i * 53 % 4096),
            }
        )
    return samples


def dataset_index(path: Path, n: int = 500) -> Path:
    """A dataset scan with a crash, an error, a timeout, oversized and slow samples."""
    samples = dataset_samples(n)
    findings = []
    failures = {
        CRASH: (
            "crash",
            "SIGSEGV",
            "the worker died: a native decoder crashed",
            "Fatal Python error: Segfault",
        ),
        ERROR: ("error", "ValueError", HOSTILE_MESSAGE, HOSTILE_TRACEBACK),
        TIMEOUT: ("timeout", None, "no result within 5 s", 'File "/data/ds.py", line 12 in __getitem__'),
    }
    for idx, (status, error_type, message, traceback) in failures.items():
        samples[idx].update(status=status, error_type=error_type, error_message=message, traceback=traceback)
        findings.append({"idx": idx, "kind": status, "detail": f"{error_type}: {message}", "quarantine": 1})
    samples[ERROR]["key"] = HOSTILE_KEY
    findings.append(
        {
            "idx": ERROR,
            "kind": "shape_mismatch",
            "detail": "[1, 8, 8] where most are [3, 8, 8]",
            "quarantine": 1,
        }
    )
    for idx in OVERSIZED:
        samples[idx]["nbytes"] = 40_000_000
        findings.append(
            {"idx": idx, "kind": "oversized", "detail": "38 MiB, 3000x the median", "quarantine": 1}
        )
    for idx in SLOW:
        samples[idx]["duration"] = 2.0
        findings.append({"idx": idx, "kind": "slow", "detail": "2.00 s (median 0.0055 s)", "quarantine": 0})
    for idx in DTYPE:
        findings.append(
            {
                "idx": idx,
                "kind": "dtype_mismatch",
                "detail": "float64 where most are float32",
                "quarantine": 0,
            }
        )
    run = {
        "kind": "dataset",
        "spec": "fixtures/datasets/demo.py:ds",
        "length": n,
        "options": {
            "timeout": 5,
            "workers": 2,
            "labels": ["label"],
            "note": HOSTILE_MESSAGE,
            "policy": {"timeout": 5.0, "kinds": ["error", "crash", "timeout", "oversized"]},
        },
        "environment": {"python": "3.11", "torch": "2.13.0"},
        "counts": {"ok": n - 3, "error": 1, "crash": 1, "timeout": 1},
    }
    return write_index(path, run=run, samples=samples, findings=findings)
