"""Read a scan index (`datalint docs index`) into the plain values the report draws.

The report only reads: the index is opened read-only, so generating a page can never
change what the scan, the guard or `datalint quarantine` see. Everything here is bounded
by the caller's caps, not by the number of samples, except the two columns the histograms
need (duration, nbytes), which are streamed into numpy arrays.
"""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from datalint.errors import DatalintError
from datalint.index import read
from datalint.index.kinds import DAMAGE_KINDS, UNSUPPORTED_KIND
from datalint.index.store import RunRecord, read_key, reading_index
from datalint.report.charts import Threshold
from datalint.report.limits import policy_thresholds

# Statuses that are findings in their own right even before policy has written `findings`
# (a scan killed before the end leaves samples but no derived findings).
FAILED_STATUSES = ("error", "crash", "timeout")
# Characters of a flagged sample's message and of each finding's detail read from the index: more
# than the page shows of them (render.MESSAGE_LIMIT, DETAIL_LIMIT), so a cut is still marked, and
# far less than the 3 KB messages a dataset can raise 100,000 times (the rest stays in the index).
TEXT_READ_LIMIT = 2_000


@dataclass(frozen=True)
class FlaggedSample:
    """A sample with at least one finding (or a failed status), as the table shows it."""

    idx: int
    key: str | None
    status: str
    kinds: tuple[str, ...]
    details: tuple[str, ...]
    quarantined: bool
    duration: float | None
    nbytes: int | None
    error_type: str | None
    error_message: str | None
    traceback: str | None
    info: dict[str, Any]


@dataclass(frozen=True)
class KindCount:
    kind: str
    samples: int
    quarantined: bool


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
    has_findings = _has_table(conn, "findings")
    runs = tuple(_read_runs(conn))
    scan = latest_scan(runs)
    is_images = scan is not None and scan.kind == "images"
    flagged_total, quarantined_total = _flagged_totals(conn, has_findings)
    damaged_total, unsupported_total = _file_verdict_totals(conn, has_findings)
    return IndexSummary(
        path=path,
        runs=runs,
        sample_count=conn.execute("SELECT count(*) FROM samples").fetchone()[0],
        status_counts=_status_counts(conn),
        kind_counts=tuple(_kind_counts(conn, has_findings)),
        flagged_total=flagged_total,
        quarantined_total=quarantined_total,
        damaged_total=damaged_total,
        unsupported_total=unsupported_total,
        flagged=tuple(_read_flagged(conn, has_findings, max_rows)),
        durations=_column_array(conn, "duration"),
        nbytes=_column_array(conn, "nbytes"),
        images=_image_stats(conn, scan.options if scan is not None else {}) if is_images else None,
        thresholds=policy_thresholds(
            conn, scan.options if scan is not None and scan.kind != "guard" else None
        ),
        good_images=tuple(_good_images(conn, has_findings, max_good_images)) if is_images else (),
    )


def _has_table(conn: sqlite3.Connection, name: str) -> bool:
    row = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (name,))
    return row.fetchone() is not None


def _json_object(text: str | None) -> dict[str, Any]:
    """A JSON column as a dict; anything else (NULL, junk, a list) as an empty or wrapped dict."""
    if not text:
        return {}
    try:
        value = json.loads(text)
    except (TypeError, ValueError):
        return {"value": text}
    return value if isinstance(value, dict) else {"value": value}


def _read_runs(conn: sqlite3.Connection) -> Iterator[RunRecord]:
    for row in conn.execute("SELECT * FROM runs ORDER BY id"):
        cols = row.keys()
        yield RunRecord(
            id=row["id"],
            kind=str(row["kind"] or "dataset"),
            spec=str(row["spec"] or ""),
            length=row["length"] if "length" in cols else None,
            fingerprint=row["fingerprint"] if "fingerprint" in cols else None,
            options=_json_object(row["options"] if "options" in cols else None),
            environment=_json_object(row["environment"] if "environment" in cols else None),
            started=row["started"] if "started" in cols else None,
            finished=row["finished"] if "finished" in cols else None,
            counts=_json_object(row["counts"] if "counts" in cols else None),
        )


def _file_verdict_totals(conn: sqlite3.Connection, has_findings: bool) -> tuple[int, int]:
    """(damaged, unsupported-and-not-damaged) samples, as the scan's headline counts them."""
    if not has_findings:
        return 0, 0
    marks = ", ".join("?" for _ in DAMAGE_KINDS)
    damaged = conn.execute(
        f"SELECT count(DISTINCT idx) FROM findings WHERE kind IN ({marks})", DAMAGE_KINDS
    ).fetchone()[0]
    unsupported = conn.execute(
        f"SELECT count(DISTINCT idx) FROM findings WHERE kind = ? AND idx NOT IN "
        f"(SELECT idx FROM findings WHERE kind IN ({marks}))",
        (UNSUPPORTED_KIND, *DAMAGE_KINDS),
    ).fetchone()[0]
    return int(damaged), int(unsupported)


def _status_counts(conn: sqlite3.Connection) -> dict[str, int]:
    rows = conn.execute("SELECT status, count(*) FROM samples GROUP BY status ORDER BY count(*) DESC")
    return {str(status): n for status, n in rows}


def _kind_counts(conn: sqlite3.Connection, has_findings: bool) -> Iterator[KindCount]:
    if has_findings:
        rows = conn.execute(
            "SELECT kind, count(DISTINCT idx), max(quarantine) FROM findings "
            "GROUP BY kind ORDER BY count(DISTINCT idx) DESC, kind"
        )
        seen = set()
        for kind, n, quarantine in rows:
            seen.add(kind)
            yield KindCount(str(kind), n, bool(quarantine))
        # failed samples that policy has not (yet) turned into findings still count
        for status, n in _underived_failures(conn, seen):
            yield KindCount(status, n, True)
    else:
        for status, n in _underived_failures(conn, set()):
            yield KindCount(status, n, True)


def _underived_failures(conn: sqlite3.Connection, derived: set[str]) -> Iterator[tuple[str, int]]:
    placeholders = ",".join("?" * len(FAILED_STATUSES))
    rows = conn.execute(
        f"SELECT status, count(*) FROM samples WHERE status IN ({placeholders}) GROUP BY status",
        FAILED_STATUSES,
    )
    for status, n in rows:
        if status not in derived:
            yield str(status), n


def _flagged_filter(has_findings: bool, alias: str = "") -> str:
    """SQL condition on `samples` (aliased or not) for "has a finding or a failed status"."""
    failed = f"{alias}status IN ('error', 'crash', 'timeout')"
    if not has_findings:
        return failed
    return f"({failed} OR {alias}idx IN (SELECT idx FROM findings))"


def _flagged_totals(conn: sqlite3.Connection, has_findings: bool) -> tuple[int, int]:
    flagged = conn.execute(f"SELECT count(*) FROM samples WHERE {_flagged_filter(has_findings)}").fetchone()[
        0
    ]
    if has_findings:
        quarantined = conn.execute(
            "SELECT count(*) FROM samples WHERE status IN ('error', 'crash', 'timeout') "
            "OR idx IN (SELECT idx FROM findings WHERE quarantine = 1)"
        ).fetchone()[0]
    else:
        quarantined = flagged
    return flagged, quarantined


def _read_flagged(conn: sqlite3.Connection, has_findings: bool, limit: int) -> Iterator[FlaggedSample]:
    """Flagged samples, quarantined ones first, then by index, at most `limit`."""
    if has_findings:
        # Kinds and details are gathered per row read, not for every finding of the index before
        # the LIMIT: 100,000 findings of 3 KB each took 4.4 s to aggregate, these 20,000 rows 0.9 s.
        sql = f"""
            SELECT {_sample_columns(conn)},
                   (SELECT group_concat(kind, char(31)) FROM findings WHERE idx = s.idx) AS kinds,
                   (SELECT group_concat(substr(coalesce(detail, ''), 1, {TEXT_READ_LIMIT}), char(31))
                    FROM findings WHERE idx = s.idx) AS details,
                   coalesce(f.quarantine, 0) AS q
            FROM samples s LEFT JOIN (
                SELECT idx, max(quarantine) AS quarantine FROM findings GROUP BY idx
            ) f ON f.idx = s.idx
            WHERE {_flagged_filter(True, "s.")}
            ORDER BY (coalesce(f.quarantine, 0) = 1 OR s.status != 'ok') DESC, s.idx
            LIMIT ?
        """
    else:
        sql = f"""
            SELECT {_sample_columns(conn)}, NULL AS kinds, NULL AS details, 1 AS q FROM samples s
            WHERE {_flagged_filter(False, "s.")} ORDER BY s.idx LIMIT ?
        """
    for row in conn.execute(sql, (limit,)):
        yield _flagged_sample(row)


def _sample_columns(conn: sqlite3.Connection) -> str:
    """`s.*` with the message read only as far as the page can show it (an older index may lack
    columns, so they are the table's own)."""
    names = [row[1] for row in conn.execute("PRAGMA table_info(samples)")]
    clipped = f"substr(s.error_message, 1, {TEXT_READ_LIMIT}) AS error_message"
    return ", ".join(clipped if name == "error_message" else f's."{name}"' for name in names)


def _flagged_sample(row: sqlite3.Row) -> FlaggedSample:
    cols = row.keys()

    def col(name: str) -> Any:
        return row[name] if name in cols else None

    kinds = list(row["kinds"].split("\x1f")) if row["kinds"] else []
    details = list(row["details"].split("\x1f")) if row["details"] else [""] * len(kinds)
    status = str(row["status"] or "ok")
    if status in FAILED_STATUSES and status not in kinds:
        kinds.insert(0, status)
        details.insert(0, "")
    return FlaggedSample(
        idx=row["idx"],
        key=read_key(col("key")),
        status=status,
        kinds=tuple(kinds),
        details=tuple(details),
        quarantined=bool(row["q"]) or status in FAILED_STATUSES,
        duration=col("duration"),
        nbytes=col("nbytes"),
        error_type=col("error_type"),
        error_message=col("error_message"),
        traceback=col("traceback"),
        info=_json_object(col("info")),
    )


def _good_images(conn: sqlite3.Connection, has_findings: bool, limit: int) -> Iterator[FlaggedSample]:
    """An even spread of unflagged images across the index (not just the first few files)."""
    if limit <= 0:
        return
    where = f"NOT {_flagged_filter(has_findings)}"
    total = conn.execute(f"SELECT count(*) FROM samples WHERE {where}").fetchone()[0]
    step = max(1, total // limit)
    rows = conn.execute(
        f"SELECT *, NULL AS kinds, NULL AS details, 0 AS q FROM ("
        f"  SELECT *, row_number() OVER (ORDER BY idx) - 1 AS rank FROM samples WHERE {where}"
        f") WHERE rank % ? = 0 ORDER BY idx LIMIT ?",
        (step, limit),
    )
    for row in rows:
        yield _flagged_sample(row)


def _column_array(conn: sqlite3.Connection, column: str) -> Any:
    import numpy as np

    cursor = conn.execute(f"SELECT {column} FROM samples WHERE {column} IS NOT NULL")
    return np.fromiter((row[0] for row in cursor), dtype=np.float64)


def _image_stats(conn: sqlite3.Connection, options: dict[str, Any]) -> ImageStats:
    formats: Counter[str] = Counter()
    modes: Counter[str] = Counter()
    sizes: Counter[tuple[int, int]] = Counter()
    file_bytes: list[int] = []
    for (text,) in conn.execute("SELECT info FROM samples WHERE info IS NOT NULL"):
        info = _json_object(text)
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
