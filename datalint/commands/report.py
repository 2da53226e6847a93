"""`datalint report DB -o report.html`: one self-contained HTML page from a scan index."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from datalint.commands.arguments import add_output_file, count
from datalint.errors import UsageError

DESCRIPTION = """\
Write one self-contained HTML page from a scan index: what was scanned and how, counts per
finding kind, the quarantine policy, duration and size charts with the policy's thresholds,
a filterable table of every flagged sample (tracebacks on demand), image previews for image
scans, and optionally the lint findings and the bench table. The page loads nothing from the
network, so it opens from a CI artifact.
"""

EPILOG = """\
examples:
  datalint report .datalint/scan.db -o report.html
  datalint check src --format json --output-file lint.json
  datalint report .datalint/scan.db -o report.html --lint lint.json --bench bench.json
  datalint report .datalint/scan.db --datasette-metadata meta.json
  datalint report --run .datalint/run.db -o run.html   # a `datalint run` record over time
  datasette .datalint/scan.db --metadata meta.json
"""


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "report",
        help="write a self-contained HTML report from a scan index",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "db", metavar="DB", type=Path, nargs="?", help="the scan index (.db) written by `datalint scan`",
    )
    parser.add_argument(
        "--run", type=Path, metavar="RECORD", dest="run_record",
        help="draw a `datalint run` record over time instead (memory, shm, CPU, GPU; limits, worker deaths)",
    )
    add_output_file(
        parser,
        type=Path,
        metavar="HTML",
        help="where to write the page (default: report.html, unless only --datasette-metadata is asked)",
    )
    parser.add_argument(
        "--lint", type=Path, metavar="JSON", help="findings from `datalint check --format json`"
    )
    parser.add_argument(
        "--bench", type=Path, metavar="JSON", help="results from `datalint bench ... --format json`"
    )
    parser.add_argument("--title", help="page title (default: the scanned spec)")
    parser.add_argument(
        "--max-rows",
        type=count,
        default=20_000,
        metavar="N",
        help="flagged samples in the table, quarantined first (default: 20000)",
    )
    parser.add_argument(
        "--thumbnails",
        type=count,
        default=200,
        metavar="N",
        help="previews of flagged images in an image scan; 0 for none (default: 200)",
    )
    parser.add_argument(
        "--quality-thumbnails",
        type=count,
        default=12,
        metavar="N",
        help="previews per quality kind, near-duplicate groups and leaks (default: 12)",
    )
    parser.add_argument(
        "--image-root",
        type=Path,
        metavar="DIR",
        help="folder the image keys are relative to, when it moved since the scan",
    )
    parser.add_argument(
        "--datasette-metadata",
        type=Path,
        metavar="JSON",
        help="also write datasette metadata for this index (table and column labels, canned queries)",
    )
    parser.set_defaults(run=run, extras=("scan",))


def run(args: argparse.Namespace) -> int:
    from datalint.report import ReportOptions, datasette_metadata, write_report

    if args.run_record is not None:
        return _run_report(args)
    if args.db is None:
        raise UsageError("name the scan index to report on (datalint report DB), or --run RECORD")
    if args.image_root is not None and not args.image_root.is_dir():
        raise UsageError(f"--image-root {args.image_root}: not a folder")
    if args.datasette_metadata is not None:
        _write_metadata(args.datasette_metadata, args.db, datasette_metadata(args.db))
        if args.output_file is None:
            return 0
    options = ReportOptions(
        title=args.title,
        lint=args.lint,
        bench=args.bench,
        max_rows=args.max_rows,
        thumbnails=args.thumbnails,
        quality_thumbnails=args.quality_thumbnails,
        image_root=args.image_root,
    )
    result = write_report(args.db, args.output_file or Path("report.html"), options)
    print(
        f"wrote {result.path} ({result.bytes / 1e6:.1f} MB): {result.samples:,} samples, "
        f"{result.flagged:,} flagged, {result.quarantined:,} quarantined"
        + (f", {result.rows:,} in the table" if result.rows < result.flagged else "")
        + (f", {result.previews:,} previews" if result.previews else ""),
        file=sys.stderr,
    )
    if result.pages:
        print(
            f"the table continues in {len(result.pages):,} more pages next to it: "
            f"{result.pages[0].name} ... {result.pages[-1].name}",
            file=sys.stderr,
        )
    return 0


def _run_report(args: argparse.Namespace) -> int:
    from datalint.report.run_page import render_run_page

    if args.db is not None:
        raise UsageError("--run draws a `datalint run` record on its own: drop DB, or --run")
    if not args.run_record.is_file():
        raise UsageError(f"--run {args.run_record}: no such record (written by `datalint run --record PATH`)")
    output = args.output_file or Path("run-report.html")
    page = render_run_page(args.run_record, args.title)
    try:
        output.write_text(page, encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"{output}: cannot write ({exc.strerror or exc})") from exc
    size = len(page.encode()) / 1e6
    print(f"wrote {output} ({size:.2f} MB) from the run record {args.run_record}", file=sys.stderr)
    return 0


def _write_metadata(path: Path, db: Path, metadata: dict[str, Any]) -> None:
    try:
        path.write_text(json.dumps(metadata, indent=2) + "\n", encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"--datasette-metadata {path}: cannot write ({exc.strerror or exc})") from exc
    print(f"wrote {path}; browse the index with: datasette {db} --metadata {path}", file=sys.stderr)
