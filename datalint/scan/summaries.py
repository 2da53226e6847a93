"""Population summaries of shard files: small, mergeable, and exact (docs/distributed.md).

The policy judges every sample against its population (`policy.population`): the majority
structure per field and per structure family, the median size overall and per family, the median
and p99 duration. Over a merged index of 1e8-1e9 rows that costs a sort of every row by signature
and a read of two whole columns into memory. A `PopulationSummary` holds what the population is
made of instead, as counts:

* the ok samples per signature text (a dataset has a handful of distinct signatures);
* a histogram of sizes per root type (the family medians need them apart) and one of durations,
  in buckets 1/16 of an octave wide (~4%): a few hundred buckets, whatever the number of rows.

Counts add, so summaries merge associatively and in any order: each shard writer writes its
file's summary into the file itself (`write_summary`), the scanner merges them (`merge_all`, a
tree reduce; on dask the reduce runs on the cluster), and `population` builds the same
`Population` the policy builds from the index. The quantiles stay exact: the histogram says which
bucket holds the wanted rank and how many values lie below it, and only that bucket's values are
read from the index (a range filter SQLite runs over the column, without a sort, and a few
thousand values into Python rather than every row). A summary that does not account for every
row of the index (rows another scan wrote, a bucket whose count differs) raises
`SummaryMismatch`, and the population is read from the index as before.
"""

from __future__ import annotations

import contextlib
import json
import math
import sqlite3
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SUMMARY_VERSION = 1
SUMMARY_TABLE = "population_summary"
PER_OCTAVE = 16  # buckets per doubling of a value
_LOW = -(2**31)  # the bucket of values <= 0
_HIGH = 2**31  # the bucket of +inf
_ROOT_TYPE = "json_extract(signature, '$.type')"  # what policy._family_medians groups sizes by

Pairs = tuple[tuple[Any, int], ...]


class SummaryMismatch(Exception):
    """The summary does not describe the index it is read against; read the index instead."""


@dataclass(frozen=True)
class PopulationSummary:
    """What the population of some rows is made of. Every field is a sorted tuple of pairs, so two
    summaries of the same rows are equal, whatever order they were merged in."""

    samples: int = 0  # rows of any status
    ok: int = 0
    signatures: Pairs = ()  # (signature text or None, ok rows)
    sizes: tuple[tuple[str | None, Pairs], ...] = ()  # (root type, nbytes histogram) of ok rows
    durations: Pairs = ()  # the duration histogram of ok rows

    def merge(self, other: PopulationSummary) -> PopulationSummary:
        sizes: dict[str | None, Counter[int]] = {}
        for root, histogram in (*self.sizes, *other.sizes):
            sizes.setdefault(root, Counter()).update(dict(histogram))
        return PopulationSummary(
            samples=self.samples + other.samples,
            ok=self.ok + other.ok,
            signatures=_added(self.signatures, other.signatures),
            sizes=tuple(sorted(((root, _pairs(counts)) for root, counts in sizes.items()), key=_text_first)),
            durations=_added(self.durations, other.durations),
        )

    def size_histogram(self, roots: Iterable[str | None] | None = None) -> Pairs:
        """The nbytes histogram of the rows whose root type is in `roots` (all rows: None)."""
        wanted = None if roots is None else set(roots)
        total: Counter[int] = Counter()
        for root, histogram in self.sizes:
            if wanted is None or root in wanted:
                total.update(dict(histogram))
        return _pairs(total)

    def to_json(self) -> str:
        return json.dumps({"version": SUMMARY_VERSION, **_as_lists(self)}, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> PopulationSummary | None:
        """The summary in `text`; None when it was written by another version (recompute it)."""
        body = json.loads(text)
        if body.get("version") != SUMMARY_VERSION:
            return None
        return cls(
            samples=int(body["samples"]),
            ok=int(body["ok"]),
            signatures=tuple((text, int(n)) for text, n in body["signatures"]),
            sizes=tuple((root, tuple((int(b), int(n)) for b, n in pairs)) for root, pairs in body["sizes"]),
            durations=tuple((int(b), int(n)) for b, n in body["durations"]),
        )


def _as_lists(summary: PopulationSummary) -> dict[str, Any]:
    return {
        "samples": summary.samples,
        "ok": summary.ok,
        "signatures": [list(pair) for pair in summary.signatures],
        "sizes": [[root, [list(pair) for pair in pairs]] for root, pairs in summary.sizes],
        "durations": [list(pair) for pair in summary.durations],
    }


def _text_first(pair: tuple[Any, Any]) -> tuple[int, str]:
    # The order of SQLite's GROUP BY signature: NULL first, then the text by its bytes (for UTF-8,
    # the order of code points), so the policy meets the signatures in the order it always has.
    return (0, "") if pair[0] is None else (1, pair[0])


def _pairs(counts: Counter[Any]) -> Pairs:
    key = _text_first if any(isinstance(k, str) or k is None for k in counts) else None
    return tuple(sorted(((k, n) for k, n in counts.items() if n), key=key))


def _added(a: Pairs, b: Pairs) -> Pairs:
    total: Counter[Any] = Counter(dict(a))
    total.update(dict(b))
    return _pairs(total)


def merge_all(parts: Sequence[PopulationSummary]) -> PopulationSummary:
    """One summary of all `parts`, merged pairwise level by level (a tree reduce, as on dask)."""
    level = list(parts) or [PopulationSummary()]
    while len(level) > 1:
        level = [merge_pair(*level[n : n + 2]) for n in range(0, len(level), 2)]
    return level[0]


def merge_pair(first: PopulationSummary, second: PopulationSummary | None = None) -> PopulationSummary:
    return first if second is None else first.merge(second)


# ----------------------------------------------------------------------------------------------
# Buckets: [2^(b/16), 2^((b+1)/16)), plus one for values <= 0 and one for +inf


def bound(bucket: int) -> float:
    """The smallest value of a (finite, positive) bucket."""
    try:
        return math.pow(2.0, bucket / PER_OCTAVE)
    except OverflowError:
        return math.inf


def bucket_of(value: float | int | None) -> int | None:
    if value is None:
        return None
    if value <= 0:
        return _LOW
    if math.isinf(value):
        return _HIGH
    bucket = math.floor(math.log2(value) * PER_OCTAVE)
    while value < bound(bucket):  # log2's rounding, set right by the bounds the queries use
        bucket -= 1
    while value >= bound(bucket + 1):
        bucket += 1
    return bucket


def bucket_clause(column: str, bucket: int) -> tuple[str, list[float]]:
    """The SQL test (and its parameters) for `column` lying in `bucket`, with the same bounds."""
    if bucket == _LOW:
        return f"{column} <= 0", []
    if bucket == _HIGH:
        return f"{column} >= ?", [math.inf]
    return f"{column} >= ? AND {column} < ?", [bound(bucket), bound(bucket + 1)]


# ----------------------------------------------------------------------------------------------
# Summaries of index files


def summarize(connection: sqlite3.Connection) -> PopulationSummary:
    """The summary of every row in an index or shard file: one pass per histogram, in SQLite."""
    connection.create_function("datalint_bucket", 1, bucket_of, deterministic=True)
    (samples,) = connection.execute("SELECT count(*) FROM samples").fetchone()
    signatures = connection.execute(
        "SELECT signature, count(*) FROM samples WHERE status = 'ok' GROUP BY signature"
    ).fetchall()
    sizes: dict[str | None, Counter[int]] = {}
    query = (
        f"SELECT {_ROOT_TYPE}, datalint_bucket(nbytes), count(*) FROM samples"
        " WHERE status = 'ok' AND nbytes IS NOT NULL GROUP BY 1, 2"
    )
    for root, bucket, count in connection.execute(query):
        sizes.setdefault(root, Counter())[bucket] = count
    durations = connection.execute(
        "SELECT datalint_bucket(duration), count(*) FROM samples"
        " WHERE status = 'ok' AND duration IS NOT NULL GROUP BY 1"
    ).fetchall()
    return PopulationSummary(
        samples=samples,
        ok=sum(count for _text, count in signatures),
        signatures=_pairs(Counter(dict(signatures))),
        sizes=tuple(sorted(((root, _pairs(counts)) for root, counts in sizes.items()), key=_text_first)),
        durations=_pairs(Counter(dict(durations))),
    )


def write_summary(connection: sqlite3.Connection, summary: PopulationSummary) -> None:
    """Keep `summary` inside the shard file it describes: it is renamed, merged and removed with it."""
    with connection:
        connection.execute(f"CREATE TABLE IF NOT EXISTS {SUMMARY_TABLE} (body TEXT NOT NULL)")
        connection.execute(f"DELETE FROM {SUMMARY_TABLE}")
        connection.execute(f"INSERT INTO {SUMMARY_TABLE} (body) VALUES (?)", (summary.to_json(),))


def read_summary(connection: sqlite3.Connection) -> PopulationSummary | None:
    """The summary a shard writer kept in its file; None when there is none or of another version."""
    try:
        row = connection.execute(f"SELECT body FROM {SUMMARY_TABLE}").fetchone()
    except sqlite3.OperationalError:  # no such table: a file written before summaries existed
        return None
    return PopulationSummary.from_json(row[0]) if row is not None else None


def summary_of_file(path: str | Path) -> PopulationSummary:
    """A shard file's summary: the one its writer kept, or (missing, or of an older version) one
    computed from its rows now."""
    uri = f"{Path(path).resolve().as_uri()}?mode=ro"
    with contextlib.closing(sqlite3.connect(uri, uri=True)) as connection:
        kept = read_summary(connection)
        return kept if kept is not None else summarize(connection)


# ----------------------------------------------------------------------------------------------
# From a summary back to the policy's population


def population(db: Any, summary: PopulationSummary) -> Any:
    """The `policy.Population` of the index `db`, from a summary of all its rows: equal to
    `policy.population(db)`. Raises SummaryMismatch when the summary is not the index's."""
    from datalint.scan import policy

    _check_covers(db, summary)
    tally = policy.tally_signatures(summary.signatures)
    fetch = _BucketReader(db)
    median_nbytes = quantiles(summary.size_histogram(), (0.5,), fetch.sizes(None))[0]
    durations = quantiles(summary.durations, (0.5, 0.99), fetch.durations())
    roots = tally.root_types
    if len(roots) <= 1:
        medians = {name: median_nbytes for name in roots}
    else:
        medians = {
            name: quantiles(summary.size_histogram(types), (0.5,), fetch.sizes(types))[0]
            for name, types in roots.items()
        }
    return policy.population_of(tally, median_nbytes, durations[0], durations[1], medians)


def _check_covers(db: Any, summary: PopulationSummary) -> None:
    (samples,) = db.execute("SELECT count(*) FROM samples").fetchone()
    (ok,) = db.execute("SELECT count(*) FROM samples WHERE status = 'ok'").fetchone()
    if (samples, ok) != (summary.samples, summary.ok):
        raise SummaryMismatch(
            f"the summary holds {summary.samples} rows ({summary.ok} ok), the index {samples} ({ok} ok)"
        )


def inverted_cdf_rank(count: int, q: float) -> int:
    """The 0-based rank numpy's `quantile(method="inverted_cdf")` picks among `count` sorted values."""
    virtual = count * q - 1
    below = math.floor(virtual)
    return max(0, below if virtual == below else below + 1)


def quantiles(
    histogram: Pairs, qs: Sequence[float], values_in: Callable[[int], list[float]]
) -> list[float | None]:
    """The exact quantiles (numpy's inverted_cdf) of the values a histogram counts; `values_in(b)`
    reads the values of bucket b, and only the buckets that hold a wanted rank are read."""
    count = sum(n for _bucket, n in histogram)
    if count == 0:
        return [None for _ in qs]
    read: dict[int, list[float]] = {}
    found: list[float | None] = []
    for q in qs:
        rank, below = inverted_cdf_rank(count, q), 0
        for bucket, n in histogram:
            if rank < below + n:
                if bucket not in read:
                    values = sorted(values_in(bucket))
                    if len(values) != n:
                        raise SummaryMismatch(
                            f"bucket {bucket}: {len(values)} values in the index, {n} summarised"
                        )
                    read[bucket] = values
                found.append(float(read[bucket][rank - below]))
                break
            below += n
    return found


class _BucketReader:
    """Reads one bucket's values of the ok rows from the index: a range filter over one column."""

    def __init__(self, db: Any) -> None:
        self.db = db

    def sizes(self, roots: Iterable[str | None] | None) -> Callable[[int], list[float]]:
        where, parameters = "", []
        if roots is not None:
            named = sorted(root for root in roots if root is not None)
            tests = [f"{_ROOT_TYPE} IN ({', '.join('?' for _ in named)})"] if named else []
            if None in set(roots):
                tests.append(f"{_ROOT_TYPE} IS NULL")
            where, parameters = f" AND ({' OR '.join(tests)})", named
        return lambda bucket: self._values("nbytes", bucket, where, parameters)

    def durations(self) -> Callable[[int], list[float]]:
        return lambda bucket: self._values("duration", bucket, "", [])

    def _values(self, column: str, bucket: int, where: str, parameters: list[Any]) -> list[float]:
        test, bounds = bucket_clause(column, bucket)
        query = f"SELECT {column} FROM samples WHERE status = 'ok' AND {test}{where}"
        return [value for (value,) in self.db.execute(query, [*bounds, *parameters])]
