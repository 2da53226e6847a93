"""What the policy reads of the index to judge each sample against its population: the ok samples'
signatures, sizes and durations, the images' scores, shapes and hashes, the keys several samples
share, and the statuses a scan measured. Every function only reads; each returns the rows as
SQLite gives them (a cursor, or a list where the caller keeps them), for `datalint.scan.policy`
to count and judge.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

# ----------------------------------------------------------------------------------------------
# The ok samples' structure, sizes and durations


def ok_signature_counts(db: Any) -> Iterable[tuple[Any, int]]:
    """(signature text, count) of the ok samples, one row per distinct signature."""
    return db.execute("SELECT signature, COUNT(*) FROM samples WHERE status = 'ok' GROUP BY signature")


def ok_signatures(db: Any) -> Iterable[tuple[Any]]:
    """(signature text,) of each distinct signature the ok samples have."""
    return db.execute("SELECT DISTINCT signature FROM samples WHERE status = 'ok'")


def ok_sizes_by_root_type(db: Any) -> Iterable[tuple[Any, Any]]:
    """(the sample's own type in its signature, nbytes) of every ok sample with a size."""
    query = (
        "SELECT json_extract(signature, '$.type'), nbytes FROM samples"
        " WHERE status = 'ok' AND nbytes IS NOT NULL"
    )
    return db.execute(query)


def ok_values(db: Any, column: str) -> Iterable[tuple[Any]]:
    """(value,) of `column` (a column name datalint chose) for every ok sample that has one."""
    return db.execute(f"SELECT {column} FROM samples WHERE status = 'ok' AND {column} IS NOT NULL")


def first_ok_labels(db: Any) -> Any:
    """The labels JSON text of the first ok sample that has labels, or None."""
    row = db.execute(
        "SELECT labels FROM samples WHERE status = 'ok' AND labels IS NOT NULL LIMIT 1"
    ).fetchone()
    return row[0] if row else None


def any_ok_label(db: Any, path: str) -> bool:
    """True when some ok sample's labels hold the JSON `path`."""
    held = db.execute(
        "SELECT 1 FROM samples WHERE status = 'ok' AND json_extract(labels, ?) IS NOT NULL LIMIT 1",
        (path,),
    ).fetchone()
    return held is not None


# ----------------------------------------------------------------------------------------------
# Images


_IMAGES = (
    "SELECT idx, key, json_extract(info, '$.quality'), json_extract(info, '$.sha256'), "
    "json_extract(info, '$.width'), json_extract(info, '$.height') "
    "FROM samples WHERE status = 'ok' ORDER BY idx"
)


def ok_images(db: Any) -> list[tuple[Any, ...]]:
    """(index, key, scores JSON, sha256, width, height) of every ok sample, by index (an image's
    facts; None for a sample that is no image)."""
    return list(db.execute(_IMAGES).fetchall())


def image_shapes(db: Any) -> Iterable[tuple[Any, Any, Any]]:
    """(index, width, height) of every undamaged image with a width."""
    query = (
        "SELECT idx, json_extract(info, '$.width'), json_extract(info, '$.height') FROM samples "
        "WHERE status = 'ok' AND json_extract(info, '$.sha256') IS NOT NULL "
        "AND json_extract(info, '$.width') > 0"
    )
    return db.execute(query)


def hashed_images(db: Any) -> Iterable[tuple[Any, Any, Any, Any]]:
    """(index, key as stored, sha256, phash) of every undamaged image, by index."""
    query = (
        "SELECT idx, key, json_extract(info, '$.sha256'), json_extract(info, '$.quality.phash') FROM samples "
        "WHERE status = 'ok' AND json_extract(info, '$.sha256') IS NOT NULL ORDER BY idx"
    )
    return db.execute(query)


# An image file scan's own per-file findings: the few rows past the shape limits, and the files
# whose bytes another file holds too, each narrowed in SQL so a clean index of a million files
# costs one pass of json_extract.
_ODD_SHAPES = """
SELECT idx, w, h FROM (
    SELECT idx, json_extract(info, '$.width') AS w, json_extract(info, '$.height') AS h FROM samples
    WHERE status = 'ok' AND json_extract(info, '$.sha256') IS NOT NULL
)
WHERE w IS NOT NULL AND h IS NOT NULL AND (min(w, h) < ? OR max(w, h) > ? * min(w, h))
"""
_SHARED_HASHES = """
WITH hashed AS (
    SELECT idx, key, json_extract(info, '$.sha256') AS digest FROM samples
    WHERE status = 'ok' AND json_extract(info, '$.sha256') IS NOT NULL
)
SELECT idx, key, digest FROM hashed
WHERE digest IN (SELECT digest FROM hashed GROUP BY digest HAVING COUNT(*) > 1)
"""


def images_past_shape_limits(db: Any, min_side: int, max_aspect: float) -> Iterable[tuple[int, Any, Any]]:
    """(index, width, height) of every undamaged image with a side under `min_side` or a long side
    over `max_aspect` times its short one."""
    return db.execute(_ODD_SHAPES, [min_side, max_aspect])


def images_sharing_bytes(db: Any) -> Iterable[tuple[int, Any, Any]]:
    """(index, key as stored, sha256) of every undamaged image whose sha256 another one has too."""
    return db.execute(_SHARED_HASHES)


# ----------------------------------------------------------------------------------------------
# Keys and statuses


# Through the key index: the groups come from one pass over it, the rows of a shared key from a lookup.
_SHARED_KEYS = """
SELECT idx, key FROM samples
WHERE key IN (SELECT key FROM samples WHERE key IS NOT NULL GROUP BY key HAVING count(*) > 1)
ORDER BY key, idx
"""


def shared_keys(db: Any) -> Iterable[tuple[int, Any]]:
    """(index, key as stored) of every sample whose key another sample has too, by key then index."""
    return db.execute(_SHARED_KEYS)


def scanned_statuses(db: Any, indexes: Sequence[int]) -> dict[int, str]:
    """The status a scan (not the guard) measured for each of these samples."""
    statuses: dict[int, str] = {}
    for start in range(0, len(indexes), 500):
        part = indexes[start : start + 500]
        marks = ", ".join("?" for _ in part)
        statuses.update(
            db.execute(
                f"SELECT idx, status FROM samples WHERE idx IN ({marks})"
                " AND run_id IN (SELECT id FROM runs WHERE kind != 'guard')",
                part,
            ).fetchall()
        )
    return statuses
