"""Read a scan index (`datalint docs index`) into the plain values the report draws.

The report only reads: the index is opened read-only, so generating a page can never
change what the scan, the guard or `datalint quarantine` see. Everything here is bounded
by the caller's caps, not by the number of samples, except the two columns the histograms
need (duration, nbytes), which are streamed into numpy arrays. The questions themselves are
`datalint.index.report_queries`; this module gathers their answers into one value.
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from datalint.errors import DatalintError
from datalint.index import read, report_queries
from datalint.index.report_queries import FlaggedSample, KindCount  # values of the summary, named here too
from datalint.index.store import RunRecord, count_samples, reading_index
from datalint.report.charts import Threshold
from datalint.report.limits import policy_thresholds


@dataclass(frozen=True)
class ImageStats:
    """Format, mode and size mix of an image scan, from `samples.info`."""

    formats: dict[str, int]
    modes: dict[str, int]
    sizes: dict[tuple[int, int], int]  # (width, height) -> files
    file_bytes: tuple[int, ...]  # per file: the image scan keeps file sizes in info, not in nbytes
    max_pixels: int | None  # the scan's decompression-bomb limit (--max-pixels)


@dataclass(frozen=True)
class IndexSummary:
    path: Path
    runs: tuple[RunRecord, ...]
    sample_count: int
    status_counts: dict[str, int]
    kind_counts: tuple[KindCount, ...]
    flagged_total: int
    quarantined_total: int
    damaged_total: int  # samples with a file-damage finding: they loaded, but are no good sample
    unsupported_total: int  # valid files this installation cannot decode (not damage)
    flagged: tuple[FlaggedSample, ...]  # at most the caller's cap, quarantined first
    durations: Any  # numpy float array, seconds, one per sample that has a duration
    nbytes: Any  # numpy float array, bytes
    images: ImageStats | None
    thresholds: dict[str, Threshold]  # chart column ("duration", "nbytes") -> the policy's limit
    good_images: tuple[FlaggedSample, ...] = field(default=())  # a spread of unflagged images

    @property
    def scan_run(self) -> RunRecord | None:
        return latest_scan(self.runs)

    @property
    def is_image_scan(self) -> bool:
        run = self.scan_run
        return run is not None and run.kind == "images"


def latest_scan(runs: tuple[RunRecord, ...]) -> RunRecord | None:
    """The latest scan (not a guard session): the run the header describes, whose policy drew the lines."""
    scans = [run for run in runs if run.kind != "guard"] or list(runs)
    return scans[-1] if scans else None


def open_index(path: Path) -> sqlite3.Connection:
    """Open an index read-only, or say clearly why this file is not one."""
    connection = read.open_index(path, required=("runs", "samples"))
    connection.row_factory = sqlite3.Row
    return connection


def read_index(path: Path, *, max_rows: int, max_good_images: int) -> IndexSummary:
    """Everything the report shows, read through one read-only connection."""
    conn = open_index(path)
    try:
        with reading_index(path):  # a value of the wrong kind (an edit by hand) is a named error too
            return _summary(conn, path, max_rows, max_good_images)
    except sqlite3.DatabaseError as exc:
        raise DatalintError(f"{path}: cannot read the index ({exc}); is it a datalint index?") from exc
    finally:
        conn.close()


def _summary(conn: sqlite3.Connection, path: Path, max_rows: int, max_good_images: int) -> IndexSummary:
    has_findings = read.has_tables(conn, ("findings",))
    runs = tuple(report_queries.runs(conn))
    scan = latest_scan(runs)
    is_images = scan is not None and scan.kind == "images"
    good = tuple(report_queries.good_images(conn, has_findings, max_good_images)) if is_images else ()
    flagged_total, quarantined_total = report_queries.flagged_totals(conn, has_findings)
    damaged_total, unsupported_total = report_queries.file_verdict_totals(conn, has_findings)
    return IndexSummary(
        path=path,
        runs=runs,
        sample_count=count_samples(conn),
        status_counts=report_queries.status_counts_by_frequency(conn),
        kind_counts=tuple(report_queries.kind_counts(conn, has_findings)),
        flagged_total=flagged_total,
        quarantined_total=quarantined_total,
        damaged_total=damaged_total,
        unsupported_total=unsupported_total,
        flagged=tuple(report_queries.flagged_samples(conn, has_findings, max_rows)),
        durations=_column_array(conn, "duration"),
        nbytes=_column_array(conn, "nbytes"),
        images=_image_stats(conn, scan.options if scan is not None else {}) if is_images else None,
        thresholds=policy_thresholds(
            conn, scan.options if scan is not None and scan.kind != "guard" else None
        ),
        good_images=good,
    )


def _column_array(conn: sqlite3.Connection, column: str) -> Any:
    import numpy as np

    return np.fromiter(report_queries.column_values(conn, column), dtype=np.float64)


def _image_stats(conn: sqlite3.Connection, options: dict[str, Any]) -> ImageStats:
    formats: Counter[str] = Counter()
    modes: Counter[str] = Counter()
    sizes: Counter[tuple[int, int]] = Counter()
    file_bytes: list[int] = []
    for info in report_queries.sample_infos(conn):
        if info.get("format"):
            formats[str(info["format"])] += 1
        if info.get("mode"):
            modes[str(info["mode"])] += 1
        width, height = info.get("width"), info.get("height")
        if isinstance(width, int) and isinstance(height, int) and width > 0 and height > 0:
            sizes[(width, height)] += 1
        if isinstance(info.get("file_bytes"), int):
            file_bytes.append(info["file_bytes"])
    source = options.get("source_options")
    limit = source.get("max_pixels") if isinstance(source, dict) else None
    max_pixels = limit if isinstance(limit, int) and not isinstance(limit, bool) else None
    return ImageStats(dict(formats), dict(modes), dict(sizes), tuple(file_bytes), max_pixels)
