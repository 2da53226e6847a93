"""Per-shard index files merged into the one index every command reads.

Past ~100M samples one SQLite writer is the bottleneck (docs/distributed.md). The way out is one
index file per shard of work, each with the index schema and one writer, merged once at the end.
`merge_shard_indexes` is that merge: the target's secondary indexes are dropped first and built
once after (building them row by row costs more than the copy), the shard files are attached in
batches (SQLite attaches at most 10 databases by default), each batch is copied in one transaction
with `INSERT ... SELECT`, and every merged row is credited to the target's run. A row present in
two shard files is a bug upstream and fails the merge instead of being silently overwritten.
"""

from __future__ import annotations

import contextlib
import sqlite3
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from datalint.errors import DatalintError
from datalint.index import positions, read, store

ATTACH_BATCH = 8  # below SQLite's default SQLITE_MAX_ATTACHED of 10

# The secondary indexes of the schema (store._SCHEMA), built once after the copy.
_SECONDARY = ("idx_samples_status", "idx_samples_key", "idx_findings_kind")
_COLUMNS = ", ".join(store.SAMPLE_COLUMNS)
_COPY_SAMPLES = f"INSERT {{}} INTO samples ({_COLUMNS}) SELECT {{}} FROM {{}}.samples ORDER BY idx"
# A shard file keys its rows by position; the index, by row id (`datalint.index.positions`): where
# the two differ (after an incremental scan moved samples), each row takes the id of its position.
_ROW_OF = "row_at(idx)"


def _selected(keep_run_ids: bool, translate: bool) -> str:
    """The shard file's columns as the index's rows take them."""
    chosen = {"idx": _ROW_OF if translate else "idx", "run_id": "run_id" if keep_run_ids else "?"}
    return ", ".join(chosen.get(column, column) for column in store.SAMPLE_COLUMNS)
KEEP_RUN_IDS = -1  # `run_id=KEEP_RUN_IDS`: every row keeps the run id its shard file gave it


class ShardMergeError(DatalintError):
    """A shard index that cannot be merged (not an index, another schema, overlapping rows)."""


@dataclass(frozen=True)
class MergeResult:
    shards: int
    samples: int
    findings: int
    copy_seconds: float
    index_seconds: float


def merge_shard_indexes(
    target: str | Path,
    shard_files: Sequence[str | Path],
    *,
    run_id: int | None,
    batch: int = ATTACH_BATCH,
    replace: bool = False,
    supersede: bool = False,
) -> MergeResult:
    """Copy the samples and findings of every shard file into `target` (created with the schema).

    `run_id`: the run every merged row is credited to (`KEEP_RUN_IDS`: the one each row has).
    `replace`: a row already in the target is replaced instead of failing the merge; for the files a
    killed scan left, which a merge cut short may already have copied.
    `supersede`: a row of another run already in the target (an earlier scan's, the training
    guard's) is replaced by the shard file's, as the single writer replaces it; two shard files of
    one run holding the same sample still fail the merge.
    """
    db = store.open_index(target)
    connection: sqlite3.Connection = db.conn
    started = time.perf_counter()
    samples = findings = 0
    try:
        for name in _SECONDARY:
            connection.execute(f"DROP INDEX IF EXISTS {name}")
        for start in range(0, len(shard_files), batch):
            part = [Path(p) for p in shard_files[start : start + batch]]
            if supersede and run_id is not None and run_id != KEEP_RUN_IDS:
                _drop_superseded(connection, part, run_id)
            counts = _merge_batch(connection, part, run_id, replace)
            samples, findings = samples + counts[0], findings + counts[1]
        copied = time.perf_counter()
        _rebuild_indexes(connection)
        indexed = time.perf_counter()
    finally:
        connection.close()
    return MergeResult(len(shard_files), samples, findings, copied - started, indexed - copied)


def _drop_superseded(connection: sqlite3.Connection, shard_files: Sequence[Path], run_id: int) -> None:
    """Remove the target's rows of other runs for the samples these files hold (one range probe per
    file first: a fresh scan has none, and pays only that)."""
    order = positions.read(connection)
    for path in shard_files:
        with contextlib.closing(read.connect(path)) as shard:
            first, last = shard.execute("SELECT min(idx), max(idx) FROM samples").fetchone()
            if first is None:
                continue
            probe = "SELECT 1 FROM samples WHERE idx BETWEEN ? AND ? AND run_id IS NOT ? LIMIT 1"
            if order.identity and connection.execute(probe, (first, last, run_id)).fetchone() is None:
                continue
            indices = [order.id_at(index) for (index,) in shard.execute("SELECT idx FROM samples")]
        with connection:
            connection.executemany(
                "DELETE FROM samples WHERE idx = ? AND run_id IS NOT ?",
                ((i, run_id) for i in indices if i is not None),
            )


def _rebuild_indexes(connection: sqlite3.Connection) -> None:
    for statement in store._SCHEMA.split(";"):
        if "CREATE INDEX" in statement:
            connection.execute(statement)
    connection.commit()


def _merge_batch(
    connection: sqlite3.Connection, shard_files: Sequence[Path], run_id: int | None, replace: bool
) -> tuple[int, int]:
    verb = "OR REPLACE" if replace else ""
    keep = run_id == KEEP_RUN_IDS
    translate = not positions.read(connection).identity
    copy_samples = _COPY_SAMPLES.format(verb, _selected(keep, translate), "{}")
    copy_findings = f"SELECT {_ROW_OF}, kind, detail, quarantine" if translate else "SELECT *"
    parameters = () if keep else (run_id,)
    aliases = [f"shard{n}" for n in range(len(shard_files))]
    for alias, path in zip(aliases, shard_files, strict=True):
        if not path.is_file():
            raise ShardMergeError(f"{path}: no such shard index")
        connection.execute(f"ATTACH DATABASE ? AS {alias}", (read.uri(path),))
    try:
        for alias, path in zip(aliases, shard_files, strict=True):
            version = connection.execute(f"PRAGMA {alias}.user_version").fetchone()[0]
            if version != store.SCHEMA_VERSION:
                raise ShardMergeError(
                    f"{path}: index schema version {version}, expected {store.SCHEMA_VERSION}"
                )
        before_samples = connection.execute("SELECT count(*) FROM samples").fetchone()[0]
        before_findings = connection.execute("SELECT count(*) FROM findings").fetchone()[0]
        with connection:  # one transaction per batch
            for alias, path in zip(aliases, shard_files, strict=True):
                try:
                    connection.execute(copy_samples.format(alias), parameters)
                    connection.execute(f"INSERT {verb} INTO findings {copy_findings} FROM {alias}.findings")
                except sqlite3.IntegrityError as exc:
                    raise ShardMergeError(f"{path}: a sample is in another shard index too ({exc})") from None
        after_samples = connection.execute("SELECT count(*) FROM samples").fetchone()[0]
        after_findings = connection.execute("SELECT count(*) FROM findings").fetchone()[0]
    finally:
        for alias in aliases:
            with contextlib.suppress(sqlite3.OperationalError):
                connection.execute(f"DETACH DATABASE {alias}")
    return after_samples - before_samples, after_findings - before_findings
