"""How big, how fast and how heavy `datalint report` is, next to what a user would do otherwise.

    .venv/bin/python benchmarks/report_page.py [--sizes 1000,10000,100000] [--out DIR]

For each size it writes a scan index through the scan's own store (2% of samples failed, each
with a distinct ~1.5 KB traceback, plus 1% slow), then measures, each in a fresh process:
- `datalint report DB -o report.html`: wall time, peak RSS, page size;
- the alternative without datalint: `sqlite-utils query DB "<every flagged row>" --fmt html`,
  one plain HTML table of the same rows (no charts, no filtering): wall time, page size;
- both pages opened in headless Chromium (`--dump-dom`, browser start included): wall time.
A last case is the worst one the caps exist for: 100k samples of which 25% failed.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from datalint.index import store

FLAGGED_SQL = (
    "select s.idx, s.key, s.status, group_concat(f.kind, ' ') as kinds, s.error_type, s.error_message, "
    "s.traceback from samples s join findings f on f.idx = s.idx group by s.idx order by s.idx"
)
REPORT = (
    "import resource, sys\n"
    "from datalint.cli import main\n"
    "code = main(sys.argv[1:])\n"
    "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)\n"
    "sys.exit(code)\n"
)


def make_index(path: Path, n: int, failed_share: float, seed: int = 0) -> None:
    rng = random.Random(seed)
    db = store.open_index(path)
    db["runs"].insert(
        {
            "id": 1,
            "kind": "dataset",
            "spec": "bench:ds",
            "length": n,
            "options": json.dumps({"timeout": 60}),
            "started": "2026-11-30T10:00:00+00:00",
            "finished": "2026-11-30T10:05:00+00:00",
        }
    )
    columns = store.SAMPLE_COLUMNS
    rows, findings = [], []
    for idx in range(n):
        row = dict.fromkeys(columns)
        row.update(
            idx=idx,
            key=f"train/{idx % 1000:03d}/{idx:07d}.jpg",
            status="ok",
            run_id=1,
            duration=rng.lognormvariate(-6, 0.5),
            nbytes=int(rng.lognormvariate(12, 0.3)),
        )
        if rng.random() < failed_share:
            frames = "".join(
                f'  File "/src/data/{idx % 97}.py", line {k}, in load_{k}\n    x = f(x)\n' for k in range(20)
            )
            row.update(
                status="error",
                error_type="OSError",
                error_message=f"image file is truncated ({idx})",
                traceback=f"Traceback (most recent call last):\n{frames}OSError: truncated {idx}",
            )
            findings.append(
                {"idx": idx, "kind": "error", "detail": "OSError: image file is truncated", "quarantine": 1}
            )
        elif rng.random() < 0.01:
            row["duration"] = 0.5 + rng.random()
            findings.append(
                {"idx": idx, "kind": "slow", "detail": "far slower than its peers", "quarantine": 0}
            )
        rows.append([row[c] for c in columns])
    sql = f"INSERT INTO samples ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})"
    db.conn.execute("BEGIN")
    db.conn.executemany(sql, rows)
    db.conn.execute("COMMIT")
    store.write_findings(db, findings)
    db.conn.close()


def timed(command: list[str], stdout: int | None = subprocess.PIPE) -> tuple[float, str]:
    start = time.perf_counter()
    done = subprocess.run(command, stdout=stdout, stderr=subprocess.PIPE, text=True, check=True)
    return time.perf_counter() - start, done.stdout or ""


def open_in_chromium(page: Path) -> float | None:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        return None
    with tempfile.TemporaryDirectory() as profile:
        command = [
            chromium,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            f"--user-data-dir={profile}",
            "--dump-dom",
            page.resolve().as_uri(),
        ]
        seconds, _ = timed(command)
    return seconds


def measure(n: int, failed_share: float, out: Path) -> dict[str, object]:
    db = out / f"scan_{n}_{int(failed_share * 100)}.db"
    db.unlink(missing_ok=True)
    make_index(db, n, failed_share)
    page, naive = db.with_suffix(".html"), db.with_suffix(".naive.html")
    seconds, rss_kib = timed([sys.executable, "-c", REPORT, "report", str(db), "-o", str(page)])
    sqlite_utils = str(Path(sys.executable).parent / "sqlite-utils")
    with naive.open("w") as handle:
        naive_seconds, _ = timed(
            [sqlite_utils, "query", str(db), FLAGGED_SQL, "--fmt", "html"], stdout=handle
        )
    flagged = sum(1 for _ in store.iter_samples(store.open_index(db), ("idx",), "WHERE status != 'ok'"))
    return {
        "samples": n,
        "failed": flagged,
        "report_s": round(seconds, 2),
        "report_rss_mib": int(rss_kib) // 1024,
        "report_mb": round(page.stat().st_size / 1e6, 2),
        "naive_s": round(naive_seconds, 2),
        "naive_mb": round(naive.stat().st_size / 1e6, 2),
        "chromium_report_s": _round(open_in_chromium(page)),
        "chromium_naive_s": _round(open_in_chromium(naive)),
    }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument(
        "--worst",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also measure 100k samples with 25%% failed",
    )
    parser.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "datalint-report-bench")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    cases = [(int(n), 0.02) for n in args.sizes.split(",")] + ([(100_000, 0.25)] if args.worst else [])
    print(f"cpus: {os.cpu_count()}, load average: {os.getloadavg()[0]:.1f}")
    header = (
        "samples",
        "failed",
        "report_s",
        "report_rss_mib",
        "report_mb",
        "naive_s",
        "naive_mb",
        "chromium_report_s",
        "chromium_naive_s",
    )
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for n, share in cases:
        result = measure(n, share, args.out)
        print("| " + " | ".join(str(result[h]) for h in header) + " |", flush=True)


if __name__ == "__main__":
    main()
