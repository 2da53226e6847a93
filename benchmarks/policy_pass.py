"""The policy pass alone (majorities, medians, findings) over a large index, one family or mixed.

    .venv/bin/python benchmarks/policy_pass.py --samples 200000

Writes indexes through the scan's store (`store.write_samples`) and times `policy.population`
plus `policy.derive_findings` (best of three), which a scan runs once after its last batch and `datalint
quarantine` runs on every re-derivation. Indexes: every sample a {"image", "label"} dict, with
and without `--label label`; then the same with 5% of samples None or a tuple (two more families)
and 1% of labels missing. Run it with PYTHONPATH pointing at another checkout to compare.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

DICT = {"type": "dict", "fields": {"image": {"type": "Tensor", "shape": [3, 32, 32], "dtype": "float32",
        "device": "cpu"}, "label": {"type": "int"}}}  # fmt: skip
TUPLE = {"type": "tuple", "length": 2, "fields": {"0": DICT["fields"]["image"], "1": {"type": "int"}}}
NONE = {"type": "NoneType"}
STAMP = "2026-01-01T00:00:00+00:00"


def sample_row(index: int, mixed: bool) -> tuple[Any, ...]:
    signature: dict[str, Any] = DICT
    labels: dict[str, Any] = {"label": [index % 10]}
    if mixed and index % 20 == 7:
        signature, labels = (NONE if index % 40 == 7 else TUPLE), {"label": None}
    elif mixed and index % 100 == 3:
        signature = {"type": "dict", "fields": {"image": DICT["fields"]["image"]}}
        labels = {"label": None}
    nbytes = 12_296 if signature is not NONE else 0
    return (index, None, "ok", 1, 1e-4 + (index % 7) * 1e-6, nbytes, json.dumps(signature), 0, 0, 0, 0,
            json.dumps(labels), None, None, None, None, None, 1, STAMP)  # fmt: skip


def build(path: Path, samples: int, mixed: bool) -> None:
    from datalint.index import store

    db = store.open_index(path)
    for start in range(0, samples, 2000):
        store.write_samples(db, [sample_row(i, mixed) for i in range(start, min(samples, start + 2000))])
    db.close()


def time_policy(path: Path, labelled: bool) -> tuple[float, int]:
    from datalint.index import store
    from datalint.scan import policy

    db = store.open_index(path, create=False)
    options = policy.PolicyOptions()  # no --num-classes: the candidate filter is in play
    if not labelled:
        db.execute("UPDATE samples SET labels = NULL")
        db.conn.commit()
    times = []
    for _ in range(3):  # best of three: the machine is shared, the pass is short
        started = time.perf_counter()
        findings = policy.derive_findings(db, options, policy.population(db))
        times.append(time.perf_counter() - started)
    db.close()
    return min(times), len(findings)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=200_000)
    args = parser.parse_args()
    print("| index | --label | samples | policy pass (s) | findings |")
    print("|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as folder:
        for mixed in (False, True):
            for labelled in (True, False):  # labels are cleared for the second run
                path = Path(folder) / f"{'mixed' if mixed else 'dicts'}.db"
                if labelled:
                    build(path, args.samples, mixed)
                elapsed, found = time_policy(path, labelled)
                name = "dicts, 5% None/tuples, 1% no label" if mixed else "dicts"
                label = "yes" if labelled else "no"
                print(f"| {name} | {label} | {args.samples:,} | {elapsed:.2f} | {found:,} |")


if __name__ == "__main__":
    main()
