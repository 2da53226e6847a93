"""The report's worst case: every sample of 100,000 failed, each with long, distinct text.

    .venv/bin/python benchmarks/report_worst.py [--samples 100000] [--shape long-text|3kb-messages]
        [--no-browser] [--out DIR]

The index is written through the scan's own store. Every sample failed with a distinct 2 KB
exception message and a distinct ~6 KB traceback, and carries a second finding with a 1.5 KB
detail: the text a real scan stores when a dataset raises long messages (a JSON decoder quoting
its input, a shape error listing every tensor). `--shape 3kb-messages`: every sample failed with a
distinct 3 KB message in a 3-byte script (1,000 CJK characters), repeated as its finding's detail,
and no traceback (issue 31's report: 16.8 MB for the first page). Then, each in a fresh process:
- `datalint report DB -o report.html`: wall time and page size;
- the page, and the largest of the table's sibling pages, opened in headless Chromium over the DevTools
  protocol (the tests' driver): the time
  from navigation to the load event and to the first page of rows drawn, browser start excluded.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from datalint.index import store

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "report"))
from report_browser import Browser


def make_index(path: Path, n: int, shape: str = "long-text") -> None:
    db = store.open_index(path)
    store.start_run(
        db,
        kind="dataset",
        spec="worst:ds",
        length=n,
        fingerprint=None,
        options={"timeout": 60},
        environment={},
    )
    rows, findings = [], []
    for idx in range(n):
        if shape == "3kb-messages":
            text = f"sample {idx}: " + "数据" * 500
            rows.append(store.sample_values(_failed(idx, text, None)))
            findings.append({"idx": idx, "kind": "error", "detail": f"ValueError: {text}", "quarantine": 1})
            continue
        message = f"sample {idx}: " + " ".join(f"field_{idx}_{k}=<{'x' * 12}>" for k in range(80))
        frames = "".join(
            f'  File "/src/data/loader_{idx}.py", line {k}, in step_{k}\n    x = f(x)\n' for k in range(90)
        )
        row = {
            "idx": idx,
            "key": f"train/{idx % 1000:03d}/{idx:07d}.json",
            "status": "error",
            "run_id": 1,
            "duration": 0.01,
            "error_type": "ValueError",
            "error_message": message[:2000],
            "traceback": f"Traceback (most recent call last):\n{frames}ValueError: {message[:200]}",
        }
        rows.append(store.sample_values(row))
        findings.append(
            {"idx": idx, "kind": "error", "detail": f"ValueError: {message[:2000]}", "quarantine": 1}
        )
        findings.append({"idx": idx, "kind": "missing_field", "detail": message[:1500], "quarantine": 1})
    store.write_samples(db, rows)
    store.write_findings(db, findings)
    db.conn.close()


def _failed(idx: int, message: str, traceback: str | None) -> dict[str, object]:
    return {
        "idx": idx,
        "key": f"train/{idx % 1000:03d}/{idx:07d}.json",
        "status": "error",
        "run_id": 1,
        "duration": 0.01,
        "error_type": "ValueError",
        "error_message": message,
        "traceback": traceback,
    }


def time_in_browser(page: Path) -> tuple[float, float]:
    """(seconds to the load event, seconds until the table's first page is drawn), from navigation."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        raise SystemExit("no chromium on PATH")
    with tempfile.TemporaryDirectory() as profile:
        browser = Browser(chromium, Path(profile))
        try:
            start = time.perf_counter()
            tab = browser.open(page.resolve().as_uri())
            loaded = time.perf_counter() - start
            while not tab.evaluate("document.querySelectorAll('#samples tbody tr').length > 0"):
                time.sleep(0.01)
            drawn = time.perf_counter() - start
            inside = tab.evaluate("performance.getEntriesByType('navigation')[0].loadEventEnd")
            print(f"  in-page loadEventEnd: {inside / 1000:.2f} s", file=sys.stderr)
        finally:
            browser.close()
    return loaded, drawn


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=100_000)
    parser.add_argument("--shape", choices=("long-text", "3kb-messages"), default="long-text")
    parser.add_argument("--no-browser", action="store_true", help="the report's time and size only")
    parser.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "datalint-report-worst")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    db, page = args.out / "worst.db", args.out / "worst.html"
    for stale in (*args.out.glob("worst.db*"), *args.out.glob("worst.rows-*.html")):
        stale.unlink()
    make_index(db, args.samples, args.shape)
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "datalint", "report", str(db), "-o", str(page)], check=True)
    report_s = time.perf_counter() - start
    siblings = sorted(args.out.glob("worst.rows-*.html"), key=lambda p: p.stat().st_size)
    loaded = drawn = sibling_load = None
    if not args.no_browser:
        loaded, drawn = time_in_browser(page)
        sibling_load = time_in_browser(siblings[-1])[0] if siblings else None
    print(
        json.dumps(
            {
                "samples": args.samples,
                "index_mb": round(db.stat().st_size / 1e6, 1),
                "report_s": round(report_s, 2),
                "page_mb": round(page.stat().st_size / 1e6, 2),
                "chromium_load_s": round(loaded, 2) if loaded else None,
                "chromium_first_rows_s": round(drawn, 2) if drawn else None,
                "table_pages": 1 + len(siblings),
                "largest_sibling_mb": round(siblings[-1].stat().st_size / 1e6, 2) if siblings else None,
                "chromium_largest_sibling_load_s": round(sibling_load, 2) if sibling_load else None,
            }
        )
    )


if __name__ == "__main__":
    main()
