"""Population summaries of shard files: mergeable in any grouping, and the same population (so the
same findings) as the policy reads from the merged index.

Real SQLite files written with the index schema; the reference is always `policy.population` and
`policy.derive_findings` over the merged index.
"""

from __future__ import annotations

import contextlib
import json
import random
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from datalint.index import store
from datalint.index.shards import merge_shard_indexes
from datalint.scan import policy, summaries

SIGNATURES: list[dict[str, Any] | None] = [
    {"type": "dict", "fields": {
        "image": {"type": "Tensor", "shape": [3, 32, 32], "dtype": "torch.uint8"}, "label": {"type": "int"}}},
    {"type": "dict", "fields": {
        "image": {"type": "Tensor", "shape": [3, 30, 32], "dtype": "torch.uint8"}, "label": {"type": "int"}}},
    {"type": "dict", "fields": {"image": {"type": "NoneType"}, "label": {"type": "int"}}},
    {"type": "tuple", "length": 2, "fields": {
        "0": {"type": "Tensor", "shape": [3, 32, 32], "dtype": "torch.float32"}, "1": {"type": "int"}}},
    {"type": "list", "length": 1, "fields": {"0": {"type": "str"}}},
    None,
]  # fmt: skip


def random_rows(rng: random.Random, first: int, count: int) -> list[tuple[Any, ...]]:
    """Rows with the variety the policy meets: statuses, families, missing and zero sizes, sizes
    and durations over many octaves, a few far out (oversized, slow)."""
    made = []
    for idx in range(first, first + count):
        nbytes = rng.choice([None, 0, 3072, 3072, 3072, 12288, rng.randint(1, 5000), rng.randint(1, 10**9)])
        duration = rng.choice(
            [None, 0.0, rng.uniform(0.001, 0.004), rng.uniform(0.001, 0.004), 30.0 * rng.random()]
        )
        row = {
            "idx": idx, "key": f"train-{idx // 50:04d}.tar/{idx:06d}", "run_id": 1,
            "status": rng.choice(["ok"] * 9 + ["error", "timeout"]),
            "nbytes": nbytes, "duration": duration,
            "signature": rng.choices(SIGNATURES, [60, 3, 2, 20, 10, 5])[0],
            "labels": json.dumps({"label": rng.randint(0, 12)}),
        }  # fmt: skip
        made.append(store.sample_values(row))
    return made


def shard_file(folder: Path, rows: list[tuple[Any, ...]], *, with_summary: bool = True) -> Path:
    """A shard file as a shard writer leaves it: its rows, then its summary kept inside."""
    first, last = rows[0][0], rows[-1][0]
    path = folder / f"{first:012d}-{last:012d}.db"
    db = store.open_shard_file(path)
    store.write_samples(db, rows)
    if with_summary:
        summaries.write_summary(db.conn, summaries.summarize(db.conn))
    db.conn.close()
    return path


@pytest.fixture(scope="module")
def sharded(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[Path], Path]:
    """Seven shard files of 300 random rows and the index they merge into."""
    folder = tmp_path_factory.mktemp("summaries")
    rng = random.Random(18)
    files = [shard_file(folder, random_rows(rng, 300 * n, 300)) for n in range(7)]
    merged = folder / "merged.db"
    merge_shard_indexes(merged, files, run_id=1)
    return files, merged


def test_merged_summaries_give_the_population_and_findings_of_the_merged_index(
    sharded: tuple[list[Path], Path],
) -> None:
    files, merged = sharded
    summary = summaries.merge_all([summaries.summary_of_file(path) for path in files])
    db = store.open_index(merged)
    try:
        from_index = policy.population(db)
        from_summary = summaries.population(db, summary)
        assert from_summary == from_index
        assert set(from_index.families) == {"mapping", "sequence", "unknown"}  # sequence: tuples and lists
        assert from_index.median_nbytes and from_index.p99_duration
        options = policy.PolicyOptions(timeout=60.0)
        found = policy.derive_findings(db, options, from_summary)
        assert found == policy.derive_findings(db, options, from_index)
        assert {"oversized", "slow", "error"} <= {finding.kind for finding in found}
    finally:
        db.close()
    # Small whatever the rows: the buckets and signatures, not the values.
    assert len(summary.to_json()) < 8000


def test_summaries_merge_to_the_same_value_in_any_order_and_grouping(
    sharded: tuple[list[Path], Path],
) -> None:
    files, merged = sharded
    parts = [summaries.summary_of_file(path) for path in files]
    tree = summaries.merge_all(parts)
    left = parts[0]
    for part in parts[1:]:
        left = left.merge(part)
    shuffled = parts[:]
    random.Random(1).shuffle(shuffled)
    assert tree == left == summaries.merge_all(shuffled)
    # ...and equal to the summary of the merged index itself.
    with contextlib.closing(sqlite3.connect(merged)) as connection:
        assert summaries.summarize(connection) == tree
    assert summaries.PopulationSummary.from_json(tree.to_json()) == tree


def test_a_file_without_a_summary_or_with_an_older_one_is_summarised_from_its_rows(
    sharded: tuple[list[Path], Path], tmp_path: Path
) -> None:
    files, _ = sharded
    kept = summaries.summary_of_file(files[0])
    with contextlib.closing(sqlite3.connect(files[0])) as connection:
        rows = connection.execute(
            f"SELECT {', '.join(store.SAMPLE_COLUMNS)} FROM samples ORDER BY idx"
        ).fetchall()
    bare = shard_file(tmp_path, rows, with_summary=False)
    assert summaries.summary_of_file(bare) == kept  # no table: computed from the rows
    with contextlib.closing(sqlite3.connect(bare)) as connection:
        summaries.write_summary(connection, summaries.PopulationSummary(samples=1))
        connection.execute(
            f"UPDATE {summaries.SUMMARY_TABLE} SET body = json_set(body, '$.version', 0)"
        )  # an older datalint's summary
        connection.commit()
    assert summaries.summary_of_file(bare) == kept


def test_a_summary_that_does_not_hold_every_row_is_refused(sharded: tuple[list[Path], Path]) -> None:
    files, merged = sharded
    partial = summaries.merge_all([summaries.summary_of_file(path) for path in files[1:]])
    db = store.open_index(merged)
    try:
        with pytest.raises(summaries.SummaryMismatch, match="rows"):
            summaries.population(db, partial)
        whole = summaries.merge_all([summaries.summary_of_file(path) for path in files])
        median = db.execute(
            "SELECT idx FROM samples WHERE status = 'ok' AND nbytes = 3072 LIMIT 1"
        ).fetchone()[0]
        with store.transaction(db):  # the same number of rows, one of them changed behind the summary
            db.conn.execute("UPDATE samples SET nbytes = 6000 WHERE idx = ?", (median,))
        with pytest.raises(summaries.SummaryMismatch, match="other ones"):
            summaries.population(db, whole)
        with store.transaction(db):
            db.conn.execute("UPDATE samples SET nbytes = 3072 WHERE idx = ?", (median,))
    finally:
        db.close()


@pytest.mark.parametrize("count", [1, 2, 3, 99, 100, 101, 1000, 12345])
def test_the_rank_is_numpys_inverted_cdf(count: int) -> None:
    import numpy as np

    values = np.arange(count, dtype=np.float64)
    for q in (0.0, 0.01, 0.25, 0.5, 0.9, 0.99, 1.0):
        assert summaries.inverted_cdf_rank(count, q) == int(np.quantile(values, q, method="inverted_cdf"))


def test_bucket_bounds_agree_with_the_values_on_them() -> None:
    """A value lies in the bucket the summary counts it in by the very bounds the index is queried with."""
    values = [2.0 ** (n / 16) for n in range(-400, 400)] + [1e-300, 3.0, 150528, 2**62, 1e300, 0, -1.0]
    with contextlib.closing(sqlite3.connect(":memory:")) as connection:
        connection.execute("CREATE TABLE t (v REAL)")
        for value in values:
            bucket = summaries.bucket_of(value)
            assert bucket is not None
            test, bounds = summaries.bucket_clause("v", bucket)
            connection.execute("DELETE FROM t")
            connection.execute("INSERT INTO t VALUES (?)", (value,))
            assert connection.execute(f"SELECT count(*) FROM t WHERE {test}", bounds).fetchone() == (1,), (
                value
            )
            if bucket not in (summaries.bucket_of(0), summaries.bucket_of(float("inf"))):
                assert summaries.bucket_of(summaries.bound(bucket)) == bucket
