"""What `datalint report` asks of an index, answered as plain values.

Every answer is bounded by the caller's limits, not by the number of samples, except the columns the
histograms need (duration, nbytes) and the image facts of `info`, which are streamed. The report opens
the index read-only (`read.open_index`); these functions never write. They work with either row
factory (tuples or `sqlite3.Row`); runs and samples are read with the columns their tables have (a
column an older index lacks reads as empty).

The queries the page prints for the user to run (`sqlite-utils query DB "..."`) live here too, beside
the ones the report runs, so a table renamed is renamed in both.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from datalint.index import positions
from datalint.index.kinds import DAMAGE_KINDS, UNSUPPORTED_KIND
from datalint.index.store import STATUSES, RunRecord, read_key

# Statuses that are findings in their own right even before policy has written `findings`
# (a scan killed before the end leaves samples but no derived findings).
FAILED_STATUSES = tuple(status for status in STATUSES if status != "ok")
# Characters of a flagged sample's message and of each finding's detail read from the index: more
# than the page shows of them (render.MESSAGE_LIMIT, DETAIL_LIMIT), so a cut is still marked, and
# far less than the 3 KB messages a dataset can raise 100,000 times (the rest stays in the index).
TEXT_READ_LIMIT = 2_000

# A sample's position (the row's idx unless an incremental scan moved it: datalint.index.positions).
_POSITION = positions.sql("s.idx")

# What the page tells the user to run for what it leaves out.
ALL_FINDINGS_QUERY = "select * from findings order by idx"
KIND_COUNTS_QUERY = "select kind, count(*) from findings group by kind"
NEAR_DUPLICATES_QUERY = "select idx, detail from findings where kind = 'near_duplicate' order by detail"
LEAKS_QUERY = "select f.idx, s.key, f.detail from findings f join samples s using (idx) where f.kind = 'leak'"


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


def _json_object(text: str | None) -> dict[str, Any]:
    """A JSON column as a dict; anything else (NULL, junk, a list) as an empty or wrapped dict."""
    if not text:
        return {}
    try:
        value = json.loads(text)
    except (TypeError, ValueError):
        return {"value": text}
    return value if isinstance(value, dict) else {"value": value}


def _named_rows(cursor: sqlite3.Cursor) -> Iterator[dict[str, Any]]:
    """Each row as {column: value}, whatever the connection's row factory."""
    names = [column[0] for column in cursor.description]
    for row in cursor:
        yield dict(zip(names, row, strict=True))


# ---- the index at a glance -------------------------------------------------------------------------


def runs(conn: sqlite3.Connection) -> Iterator[RunRecord]:
    """Every run, oldest first; a column an older index lacks reads as empty."""
    for row in _named_rows(conn.execute("SELECT * FROM runs ORDER BY id")):
        yield RunRecord(
            id=row["id"],
            kind=str(row["kind"] or "dataset"),
            spec=str(row["spec"] or ""),
            length=row.get("length"),
            fingerprint=row.get("fingerprint"),
            options=_json_object(row.get("options")),
            environment=_json_object(row.get("environment")),
            started=row.get("started"),
            finished=row.get("finished"),
            counts=_json_object(row.get("counts")),
        )


def status_counts_by_frequency(conn: sqlite3.Connection) -> dict[str, int]:
    """Samples per status, the most frequent first (only statuses some sample has)."""
    rows = conn.execute("SELECT status, count(*) FROM samples GROUP BY status ORDER BY count(*) DESC")
    return {str(status): n for status, n in rows}


def file_verdict_totals(conn: sqlite3.Connection, has_findings: bool) -> tuple[int, int]:
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


def kind_counts(conn: sqlite3.Connection, has_findings: bool) -> Iterator[KindCount]:
    """Samples per finding kind, the most frequent first; a failed status that policy has not (yet)
    turned into a finding counts as its own kind."""
    seen = set()
    if has_findings:
        rows = conn.execute(
            "SELECT kind, count(DISTINCT idx), max(quarantine) FROM findings "
            "GROUP BY kind ORDER BY count(DISTINCT idx) DESC, kind"
        )
        for kind, n, quarantine in rows:
            seen.add(kind)
            yield KindCount(str(kind), n, bool(quarantine))
    for status, n in _underived_failures(conn, seen):
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


def flagged_totals(conn: sqlite3.Connection, has_findings: bool) -> tuple[int, int]:
    """(flagged, quarantined) samples."""
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


# ---- samples, bounded ------------------------------------------------------------------------------


def flagged_samples(conn: sqlite3.Connection, has_findings: bool, limit: int) -> Iterator[FlaggedSample]:
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
            ORDER BY (coalesce(f.quarantine, 0) = 1 OR s.status != 'ok') DESC, {_POSITION}
            LIMIT ?
        """
    else:
        sql = f"""
            SELECT {_sample_columns(conn)}, NULL AS kinds, NULL AS details, 1 AS q FROM samples s
            WHERE {_flagged_filter(False, "s.")} ORDER BY {_POSITION} LIMIT ?
        """
    for row in _named_rows(conn.execute(sql, (limit,))):
        yield _flagged_sample(row)


def _sample_columns(conn: sqlite3.Connection) -> str:
    """`s.*` with the position as `idx` and the message read only as far as the page can show it (an
    older index may lack columns, so they are the table's own)."""
    names = [row[1] for row in conn.execute("PRAGMA table_info(samples)")]
    shown = {
        "error_message": f"substr(s.error_message, 1, {TEXT_READ_LIMIT}) AS error_message",
        "idx": f'{_POSITION} AS "idx"',
    }
    return ", ".join(shown.get(name, f's."{name}"') for name in names)


def _flagged_sample(row: dict[str, Any]) -> FlaggedSample:
    kinds = list(row["kinds"].split("\x1f")) if row["kinds"] else []
    details = list(row["details"].split("\x1f")) if row["details"] else [""] * len(kinds)
    status = str(row["status"] or "ok")
    if status in FAILED_STATUSES and status not in kinds:
        kinds.insert(0, status)
        details.insert(0, "")
    return FlaggedSample(
        idx=row["idx"],
        key=read_key(row.get("key")),
        status=status,
        kinds=tuple(kinds),
        details=tuple(details),
        quarantined=bool(row["q"]) or status in FAILED_STATUSES,
        duration=row.get("duration"),
        nbytes=row.get("nbytes"),
        error_type=row.get("error_type"),
        error_message=row.get("error_message"),
        traceback=row.get("traceback"),
        info=_json_object(row.get("info")),
    )


def good_images(conn: sqlite3.Connection, has_findings: bool, limit: int) -> Iterator[FlaggedSample]:
    """An even spread of unflagged images across the index (not just the first few files)."""
    if limit <= 0:
        return
    where = f"NOT {_flagged_filter(has_findings)}"
    total = conn.execute(f"SELECT count(*) FROM samples WHERE {where}").fetchone()[0]
    step = max(1, total // limit)
    rows = conn.execute(
        f"SELECT {_sample_columns(conn)}, NULL AS kinds, NULL AS details, 0 AS q FROM ("
        f"  SELECT *, row_number() OVER (ORDER BY {positions.sql('idx')}) - 1 AS rank"
        f"  FROM samples WHERE {where}"
        f") s WHERE rank % ? = 0 ORDER BY {_POSITION} LIMIT ?",
        (step, limit),
    )
    for row in _named_rows(rows):
        yield _flagged_sample(row)


# ---- columns, streamed -----------------------------------------------------------------------------

CHART_COLUMNS = ("duration", "nbytes")


def column_values(conn: sqlite3.Connection, column: str) -> Iterator[Any]:
    """Every sample's value of a chart column that has one, in no particular order."""
    if column not in CHART_COLUMNS:  # the name goes into the SQL: only the report's own
        raise ValueError(f"not a chart column: {column!r}")
    cursor = conn.execute(f"SELECT {column} FROM samples WHERE {column} IS NOT NULL")
    return (row[0] for row in cursor)


def sample_infos(conn: sqlite3.Connection) -> Iterator[dict[str, Any]]:
    """Each sample's `info` that has one (an image scan keeps format, mode and size there)."""
    for (text,) in conn.execute("SELECT info FROM samples WHERE info IS NOT NULL"):
        yield _json_object(text)


def smallest_flagged(conn: sqlite3.Connection, kind: str, column: str) -> Any:
    """The smallest `column` value of a sample flagged with `kind` (None: no such sample), where the
    index's findings show a limit its policy no longer tells."""
    if column not in CHART_COLUMNS:
        raise ValueError(f"not a chart column: {column!r}")
    row = conn.execute(
        f"SELECT min(s.{column}) FROM samples s JOIN findings f ON f.idx = s.idx WHERE f.kind = ?",
        (kind,),
    ).fetchone()
    return row[0]


# ---- the quality views -----------------------------------------------------------------------------

# One image that has a kind: (index, key, the finding's detail as stored).
KindSample = tuple[int, str | None, str | None]


def has_scores(conn: sqlite3.Connection) -> bool:
    """Whether some image was scored (a scan with --no-scores, or of a dataset, scores none)."""
    row = conn.execute("SELECT 1 FROM samples WHERE json_extract(info, '$.quality') IS NOT NULL LIMIT 1")
    return row.fetchone() is not None


def samples_with_kind(conn: sqlite3.Connection, kind: str) -> int:
    return int(conn.execute("SELECT count(DISTINCT idx) FROM findings WHERE kind = ?", (kind,)).fetchone()[0])


def _score_order(score: str, direction: str) -> str:
    """The most extreme score first: the highest for a kind judged "high", else the lowest."""
    return f"json_extract(s.info, '$.quality.{score}') {'DESC' if direction == 'high' else 'ASC'}"


def _shape_order(kind: str, typical: float) -> str:
    """The farthest from typical first, either way: max(x / typical, typical / x); `typical` is an
    aspect (odd_aspect) or the side of a typical image, whose area is compared (odd_size)."""
    width, height = "json_extract(s.info, '$.width')", "json_extract(s.info, '$.height')"
    value = f"({width} * 1.0 / {height})" if kind == "odd_aspect" else f"({width} * {height} * 1.0)"
    usual = f"{typical if kind == 'odd_aspect' else typical**2:.6g}"
    return f"max({value} / {usual}, {usual} / {value}) DESC"


def most_scored(
    conn: sqlite3.Connection, kind: str, score: str, direction: str, limit: int
) -> list[KindSample]:
    """The first `limit` images with a quality `kind`, the most extreme `score` first."""
    return _with_kind(conn, kind, _score_order(score, direction), limit)


def most_odd(conn: sqlite3.Connection, kind: str, typical: float, limit: int) -> list[KindSample]:
    """The first `limit` images with a shape `kind`, the farthest from `typical` first."""
    return _with_kind(conn, kind, _shape_order(kind, typical), limit)


def _with_kind(conn: sqlite3.Connection, kind: str, order: str, limit: int) -> list[KindSample]:
    rows = conn.execute(
        f"SELECT {_POSITION}, s.key, f.detail FROM findings f JOIN samples s ON s.idx = f.idx "
        f"WHERE f.kind = ? ORDER BY {order}, {_POSITION} LIMIT ?",
        (kind, limit),
    )
    return [(idx, read_key(key), detail) for idx, key, detail in rows]


def scored_kind_query(kind: str, score: str, direction: str) -> str:
    """The query that lists every image of a quality kind, in the gallery's order."""
    path = f"$.quality.{score}"
    order = "desc" if direction == "high" else "asc"
    return (
        f"select s.idx, s.key, json_extract(s.info, '{path}') as {score} from findings f "
        f"join samples s using (idx) where f.kind = '{kind}' order by {score} {order}"
    )


def shape_kind_query(kind: str, typical: float) -> str:
    """The query that lists every image of a shape kind, in the gallery's order."""
    order = _shape_order(kind, typical).replace(" DESC", " desc")
    return (
        "select s.idx, s.key, f.detail from findings f join samples s using (idx) "
        f"where f.kind = '{kind}' order by {order}"
    )


def near_duplicates(conn: sqlite3.Connection) -> list[KindSample]:
    """Every near-duplicate finding by index (its detail names the group's representative)."""
    rows = conn.execute(
        f"SELECT {_POSITION} AS position, s.key, f.detail FROM findings f JOIN samples s ON s.idx = f.idx "
        "WHERE f.kind = 'near_duplicate' ORDER BY position"
    )
    return [(idx, read_key(key), detail) for idx, key, detail in rows]


def sample_key(conn: sqlite3.Connection, position: int) -> str | None:
    """The key of the sample at `position`."""
    row = positions.read(conn).id_at(position)
    found = None if row is None else conn.execute("SELECT key FROM samples WHERE idx = ?", (row,)).fetchone()
    return read_key(found[0]) if found else None


def leaks(conn: sqlite3.Connection, limit: int) -> list[KindSample]:
    """The first `limit` leaked images by index (each detail names the other split's file)."""
    rows = conn.execute(
        f"SELECT {_POSITION} AS position, s.key, f.detail FROM findings f JOIN samples s ON s.idx = f.idx "
        "WHERE f.kind = 'leak' ORDER BY position LIMIT ?",
        (limit,),
    )
    return [(idx, read_key(key), detail) for idx, key, detail in rows]


def latest_scan_source(conn: sqlite3.Connection) -> tuple[str, str] | None:
    """(kind, spec) of the index's latest scan (not a guard session), or None."""
    query = "SELECT kind, spec FROM runs WHERE kind != 'guard' ORDER BY id DESC LIMIT 1"
    row = conn.execute(query).fetchone()
    return None if row is None else (str(row[0]), str(row[1]))
