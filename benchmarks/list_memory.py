"""Peak memory of building a quarantine list from 1e7 indices: numpy arrays against Python objects.

    PYTHONPATH=. .venv/bin/python benchmarks/list_memory.py [--n 10000000] [--json-n 1000000]

Each case runs in a fresh child process. Once its input exists, the child notes its RSS and resets
its peak (`/proc/self/clear_refs`, 5), builds, and reads the peak again (`VmHWM`): "build MB" is the
build's own peak over what the process held with its input (the input is the caller's). "process
peak MB" is `getrusage().ru_maxrss`, the whole life of the process (making the input included).
"before" is `Quarantine.from_indices` and `restricted_to` as they were (Python ints, a keyed sort
of (index, key) tuples, a tuple of keys and of kinds per entry); "now" is the library's. The JSON
cases write a `quarantine.json` document of `--json-n` samples with `json.dumps` (before) and with
`write_json_atomically` (now, in parts).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

CASES = (
    "from_indices array before",
    "from_indices array now",
    "from_indices list before",
    "from_indices list now",
    "from_indices + restricted_to before",
    "from_indices + restricted_to now",
    "quarantine.json before",
    "quarantine.json now",
)


def from_indices_before(indices: Iterable[int], *, length: int | None, kind: str = "manual") -> Any:
    from datalint.training.quarantine import Quarantine, _check_unique

    index_list = [int(i) for i in indices]
    key_list: list[str | None] = [None] * len(index_list)
    pairs = sorted(zip(index_list, key_list, strict=True), key=lambda pair: pair[0])
    _check_unique([i for i, _ in pairs], "<in memory>")
    return Quarantine(
        indices=np.array([i for i, _ in pairs], dtype=np.int64),
        keys=tuple(k for _, k in pairs),
        kinds=((kind,),) * len(pairs),
        length=length,
    )


def restricted_before(quarantine: Any, positions: Any) -> Any:
    from dataclasses import replace

    chosen = np.flatnonzero(positions).tolist()
    return replace(
        quarantine,
        indices=quarantine.indices[positions],
        keys=tuple(quarantine.keys[p] for p in chosen),
        kinds=tuple(quarantine.kinds[p] for p in chosen),
        details=tuple(quarantine.details[p] for p in chosen),
    )


def status_mb(field: str) -> float:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    raise LookupError(field)


def start_measuring() -> float:
    """The RSS now; the peak from here on is read by `build_peak`."""
    with open("/proc/self/clear_refs", "w", encoding="ascii") as clear:
        clear.write("5")  # resets VmHWM to the current RSS
    return status_mb("VmRSS")


def figures(rss: float, **more: float) -> dict[str, float]:
    return {
        "rss": rss,
        "peak": status_mb("VmHWM"),
        "process": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        **more,
    }


def run_case(case: str, n: int, json_n: int) -> dict[str, float]:
    from datalint.scan.api import write_json_atomically
    from datalint.training.quarantine import Quarantine

    build = from_indices_before if case.endswith("before") else Quarantine.from_indices
    if case.startswith("quarantine.json"):
        document = {
            "format": "datalint-quarantine/1",
            "samples": [
                {"index": i, "key": f"images/{i:08d}.jpg", "kinds": ["corrupt"]} for i in range(json_n)
            ],
        }
        with tempfile.TemporaryDirectory() as folder:
            target = Path(folder) / "quarantine.json"
            rss = start_measuring()
            if case.endswith("before"):
                target.write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
            else:
                write_json_atomically(target, document)
            return figures(rss, bytes=target.stat().st_size)
    indices: Any = np.random.default_rng(0).permutation(n)
    if " list " in case:
        indices = indices.tolist()
    rss = start_measuring()
    quarantine = build(indices, length=n)
    if "restricted_to" in case:
        half = quarantine.indices < n // 2
        quarantine = (
            restricted_before(quarantine, half) if case.endswith("before") else quarantine.restricted_to(half)
        )
    return figures(rss, entries=len(quarantine))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10_000_000)
    parser.add_argument("--json-n", type=int, default=1_000_000)
    parser.add_argument("--case", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.case:
        print(json.dumps(run_case(args.case, args.n, args.json_n)))
        return 0
    print(f"n = {args.n:,} indices; quarantine.json with {args.json_n:,} samples")
    print(f"{'case':<38}{'RSS with input MB':>18}{'build MB':>10}{'process peak MB':>17}")
    for case in CASES:
        done = subprocess.run(
            [sys.executable, __file__, "--case", case, "--n", str(args.n), "--json-n", str(args.json_n)],
            capture_output=True, text=True, check=True, env={**os.environ},
        )  # fmt: skip
        got = json.loads(done.stdout)
        print(f"{case:<38}{got['rss']:>18.0f}{got['peak'] - got['rss']:>10.0f}{got['process']:>17.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
