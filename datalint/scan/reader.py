"""`datalint.open_index(db)`: a scan index read as tables, for notebooks ("show me the blurriest 50").

Each method returns a pandas DataFrame when pandas is installed (the `frames` extra) and a list of
plain dicts otherwise; `as_frames=False` asks for the dicts either way. The index is only read.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

from datalint.index import read, tables
from datalint.index.store import IndexFileError
from datalint.scan.quality import SCORE_NAMES, with_derived_scores


class IndexReader:
    """A read-only view of one scan index: `samples()`, `findings()`, `scores()`."""

    def __init__(self, path: str | Path, as_frames: bool | None = None) -> None:
        self.path = Path(path)
        if not self.path.is_file():
            raise IndexFileError(
                f"no scan index at {self.path}; run `datalint scan` first (or pass its --db path)"
            )
        self._connection = read.connect(self.path)
        self._pandas = _pandas() if as_frames is not False else None
        if as_frames and self._pandas is None:
            raise ImportError("as_frames=True needs pandas: pip install 'datalint[frames]'")

    def samples(self) -> Any:
        """One row per sample: idx, key, status, the error's type and message, and `info` decoded."""
        rows = self._rows(tables.samples)
        for row in rows:
            row["info"] = json.loads(row["info"]) if row["info"] else {}
        return self._table(rows, ["idx", "key", "status", "error_type", "error_message", "info"])

    def findings(self, kind: str | None = None) -> Any:
        """idx, key, kind, detail, quarantine (bool), optionally of one kind only."""
        rows = self._rows(lambda connection: tables.findings(connection, kind))
        for row in rows:
            row["quarantine"] = bool(row["quarantine"])
        return self._table(rows, ["idx", "key", "kind", "detail", "quarantine"])

    def scores(self) -> Any:
        """idx, key, width, height and the raw quality scores of every scored image."""
        rows = []
        for idx, key, text in tables.scored_samples(self._connection):
            info = json.loads(text)
            rows.append(
                {
                    "idx": idx,
                    "key": key,
                    "width": info.get("width"),
                    "height": info.get("height"),
                    **with_derived_scores(info["quality"]),
                }
            )
        return self._table(rows, ["idx", "key", "width", "height", *SCORE_NAMES, "phash"])

    def close(self) -> None:
        self._connection.close()

    def __enter__(self) -> IndexReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _rows(self, table: Callable[[sqlite3.Connection], sqlite3.Cursor]) -> list[dict[str, Any]]:
        try:
            cursor = table(self._connection)
        except sqlite3.DatabaseError as exc:
            raise IndexFileError(f"{self.path} is not a usable datalint index: {exc}") from None
        names = [column[0] for column in cursor.description]
        return [dict(zip(names, values, strict=True)) for values in cursor]

    def _table(self, rows: list[dict[str, Any]], columns: list[str]) -> Any:
        if self._pandas is None:
            return rows
        return self._pandas.DataFrame(rows, columns=columns)


def _pandas() -> Any:
    try:
        import pandas  # type: ignore[import-untyped]
    except ImportError:
        return None
    return pandas


def open_index(path: str | Path, *, as_frames: bool | None = None) -> IndexReader:
    """Open a scan index for reading: `open_index(db).scores().nsmallest(50, "focus")`."""
    return IndexReader(path, as_frames)
