"""The index read as tables for a notebook (`datalint.open_index`): samples, findings, and the scored
images, each a cursor whose rows the caller shapes (dicts or a DataFrame). Only read.
"""

from __future__ import annotations

import sqlite3

# Each row's position (`position_of`, datalint.index.positions) is shown as `idx`, as a list says it.
_SAMPLES = (
    "SELECT coalesce(position_of(idx), idx) AS idx, key, status, error_type, error_message, info "
    "FROM samples ORDER BY 1"
)
_FINDINGS = (
    "SELECT coalesce(position_of(f.idx), f.idx) AS idx, s.key, f.kind, f.detail, f.quarantine "
    "FROM findings f LEFT JOIN samples s ON s.idx = f.idx {} ORDER BY 1, f.kind"
)
_SCORED_SAMPLES = """
SELECT coalesce(position_of(idx), idx) AS idx, key, info FROM samples
WHERE json_extract(info, '$.quality') IS NOT NULL ORDER BY 1
"""


def samples(connection: sqlite3.Connection) -> sqlite3.Cursor:
    """idx (the position), key, status, error_type, error_message, info (JSON text) of every sample,
    by position."""
    return connection.execute(_SAMPLES)


def findings(connection: sqlite3.Connection, kind: str | None = None) -> sqlite3.Cursor:
    """idx (the position), key, kind, detail, quarantine of every finding (of one kind only, when named)."""
    where, parameters = ("WHERE f.kind = ?", [kind]) if kind else ("", [])
    return connection.execute(_FINDINGS.format(where), parameters)


def scored_samples(connection: sqlite3.Connection) -> sqlite3.Cursor:
    """idx (the position), key, info (JSON text) of every sample whose info holds quality scores, by
    position."""
    return connection.execute(_SCORED_SAMPLES)
