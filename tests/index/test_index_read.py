"""An index its first writer has created but not yet filled holds no tables for a moment: the service
reads it as empty (it answered 500, and a training job filed the failures it sent as refused)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from datalint.index import read
from datalint.index.failures import FailureRecord
from datalint.service.ingest import refusals_by_index


def test_a_created_but_empty_index_is_read_as_empty_not_as_an_error(tmp_path: Path) -> None:
    index = tmp_path / "index.db"
    sqlite3.connect(index).close()  # the file exists; the writer has not created its tables yet
    with read.reading(index) as connection:
        assert read.has_tables(connection) is False
        assert read.totals(connection) == read.Totals(0, 0, 0, None)
    failure = FailureRecord(5000, "k", "OSError", "flaky")
    assert refusals_by_index(index, [(0, failure)]) == {}  # nothing to check against: all accepted
