"""Incremental scans of a large index keep its population summary current, so it is still judged
from the summary (part by part, in bounded memory) instead of whole; and an index large enough
that has none gets one counted.

Real webdataset shards, real forked shard writers, real SQLite files; the reference is a
single-writer scan of the changed shards from an empty index.
"""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from datalint.scan import api, summaries
from tests.scan.scan_support import rows, write_limit_images
from tests.shards.shard_support import good_sample, write_shard
from tests.shards.test_shard_index import measured, populations, quarantine, scan, webdataset_folder


def kept_summary(db: Path) -> tuple[summaries.PopulationSummary | None, summaries.PopulationSummary]:
    """(the summary the index keeps, the summary of its rows counted now)."""
    with contextlib.closing(sqlite3.connect(db)) as connection:
        return summaries.read_summary(connection), summaries.summarize(connection)


def recounts(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The rows of each summary counted again from a whole index, recorded as it is counted."""
    counted: list[int] = []
    recount = summaries.recount

    def recorded(connection: sqlite3.Connection) -> summaries.PopulationSummary:
        summary = recount(connection)
        counted.append(summary.samples)
        return summary

    monkeypatch.setattr(summaries, "recount", recorded)
    return counted


def assert_same_as_a_full_scan(
    db: Path, summary: dict[str, Any], reference: Path, full: dict[str, Any]
) -> None:
    assert measured(db) == measured(reference)
    findings = (
        "SELECT position_of(idx) AS position, kind, detail, quarantine FROM findings ORDER BY position, kind"
    )
    assert rows(db, findings) == rows(reference, findings)
    assert quarantine(summary) == quarantine(full)


def test_summaries_subtract_what_they_add(tmp_path: Path) -> None:
    folder = write_limit_images(tmp_path / "images")
    db = tmp_path / "images.db"
    scan(str(folder), db, "--workers", "0", source="--images")
    with contextlib.closing(sqlite3.connect(db)) as connection:
        first = summaries.summarize_rows(connection, "WHERE idx < 6")
        rest = summaries.summarize_rows(connection, "WHERE idx >= 6")
        assert first.scored and rest.scored and first.shapes  # images with scores on both sides
        whole = first.merge(rest)
        assert whole == summaries.summarize(connection)
        assert whole.without(rest) == first and whole.without(first) == rest
        assert whole.without(whole) == summaries.PopulationSummary()
        with pytest.raises(summaries.SummaryMismatch):
            first.without(rest)  # rows the summary never counted


def test_an_incremental_scan_keeps_the_summary_of_a_sharded_index_current(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = webdataset_folder(tmp_path / "shards")
    pattern = str(folder / "train-*.tar")
    db = tmp_path / "sharded.db"
    scan(pattern, db, "--shard-index", "on", "--workers", "2")
    # A shard added after the others, one removed from the middle: positions move, rows leave.
    write_shard(folder / "train-000009.tar", [good_sample(f"n{n:04d}", 900 + n) for n in range(5)])
    (folder / "train-000004.tar").unlink()
    sources, counted = populations(monkeypatch), recounts(monkeypatch)
    summary = scan(pattern, db, "--shard-index", "on", "--workers", "2")
    assert summary["changes"]["added"] == 5 and summary["changes"]["removed"] == 5
    assert summary["changes"]["moved"] > 0
    # Judged from the summary the scan kept current, with no count of the whole index.
    assert sources == ["summaries"] and counted == []
    kept, now = kept_summary(db)
    assert kept == now
    reference = tmp_path / "reference.db"
    full = scan(pattern, reference, "--shard-index", "off", "--workers", "2")
    assert_same_as_a_full_scan(db, summary, reference, full)

    # A lower --max-pixels measures every image again: their old rows leave the summary, the new come in.
    sources.clear()
    lowered = scan(pattern, db, "--shard-index", "on", "--workers", "2", "--max-pixels", "1000")
    assert lowered["changes"]["remeasured"] == lowered["changes"]["measured"] > 0
    assert sources == ["summaries"] and counted == []
    kept, now = kept_summary(db)
    assert kept == now
    full = scan(pattern, reference, "--shard-index", "off", "--workers", "2", "--max-pixels", "1000")
    assert lowered["findings"]["decompression_bomb"] == full["findings"]["decompression_bomb"] > 0
    assert_same_as_a_full_scan(db, lowered, reference, full)


def test_a_large_index_that_does_not_fit_in_memory_gets_a_summary_counted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = webdataset_folder(tmp_path / "shards")
    pattern = str(folder / "train-*.tar")
    reference = tmp_path / "reference.db"
    full = scan(pattern, reference, "--shard-index", "off", "--workers", "2")
    monkeypatch.setattr(api, "JUDGED_BY_SUMMARY_FROM", 10)  # the index of these shards counts as large
    sources, counted = populations(monkeypatch), recounts(monkeypatch)
    # With memory to spare it is judged whole, as a small one is: that is faster.
    monkeypatch.setattr(api, "memory_left_now", lambda: 1 << 40)
    roomy = scan(pattern, tmp_path / "roomy.db", "--shard-index", "off", "--workers", "2")
    assert counted == [] and sources == ["index"]
    assert_same_as_a_full_scan(tmp_path / "roomy.db", roomy, reference, full)
    # `datalint quarantine` on it with little memory left: judged from a summary counted in memory,
    # the index left as it was (it writes nothing).
    monkeypatch.setattr(api, "memory_left_now", lambda: 1000)
    sources.clear()
    listed = api.derive_quarantine(tmp_path / "roomy.db", kinds="all")
    assert sources == ["summaries"] and kept_summary(tmp_path / "roomy.db")[0] is None
    monkeypatch.setattr(api, "memory_left_now", lambda: 1 << 40)
    assert listed["samples"] == api.derive_quarantine(tmp_path / "roomy.db", kinds="all")["samples"]
    assert sources == ["summaries", "index"]
    # Where a quarter of the memory left would not hold it, its summary is counted and judged by.
    tight = 4 * api.WHOLE_INDEX_BYTES_PER_ROW * full["length"] - 1
    monkeypatch.setattr(api, "memory_left_now", lambda: tight)
    sources.clear()
    db = tmp_path / "single.db"
    summary = scan(pattern, db, "--shard-index", "off", "--workers", "2")  # one writer: it keeps no summary
    assert counted == [full["length"]] and sources == ["summaries"]
    kept, now = kept_summary(db)
    assert kept == now
    assert_same_as_a_full_scan(db, summary, reference, full)
    # A row rewritten behind the scan's back: the summary is stale, so it is counted again, not dropped.
    with contextlib.closing(sqlite3.connect(db)) as connection, connection:
        connection.execute("UPDATE samples SET status = 'error', error_type = 'OSError' WHERE idx = 3")
    counted.clear()
    sources.clear()
    again = scan(pattern, db, "--shard-index", "off", "--workers", "2")
    # (The stale summary may give a population before the parts find it stale: a "summaries" more.)
    assert counted == [full["length"]] and "index" not in sources and sources[-1] == "summaries"
    assert 3 in {entry["index"] for entry in quarantine(again)}
    kept, now = kept_summary(db)
    assert kept == now
