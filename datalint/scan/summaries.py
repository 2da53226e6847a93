"""Population summaries of shard files: small, mergeable, and exact (docs/distributed.md).

The policy judges every sample against its population (`policy.population`): the majority
structure per field and per structure family, the median size overall and per family, the median
and p99 duration. Over a merged index of 1e8-1e9 rows that costs a sort of every row by signature
and a read of two whole columns into memory. A `PopulationSummary` holds what the population is
made of instead, as counts:

* the ok samples per signature text (a dataset has a handful of distinct signatures);
* a histogram of sizes per root type (the family medians need them apart) and one of durations,
  in buckets 1/16 of an octave wide (at most 6.25%): a few hundred buckets, whatever the number
  of rows. A bucket is the value's binary exponent and the top 4 bits of its mantissa, so its
  bounds are exact floating-point numbers and SQLite's comparisons agree with the count.

The images' population is counted the same way (datalint/scan/summary_findings.py judges with it):

* each quality score's values, one count per distinct value (the probes round scores to 4
  decimals, so a score has at most 10^4 distinct values per unit of its range, whatever the
  number of images): the median and the MAD the quality limits come from are exact;
* the undamaged images per (width, height), from which the `odd_size` and `odd_aspect` limits come.

A part with more than MAX_DISTINCT distinct values is dropped and named in `overflow`; the
findings are then read from the index. Each summary also carries `coverage`, the sum (mod 2^64)
of a 64-bit hash of every row it counted (its key, status and the columns the summary reads; not
its position, which files inserted before it change): a summary of as many rows, but other ones,
is refused.

Counts add, so summaries merge associatively and in any order; and they subtract, so an
incremental scan keeps the index's summary current (`follow_changes`): it takes away the rows it
removes and the old rows of the samples it measures again, and adds the rows it writes.

Each shard writer counts its rows as it writes them and keeps the summary inside its file
(`write_summary`); the scanner merges them (`merge_all`; on dask a tree reduce on the cluster) and
the index keeps the result (`keep_in_index`), so a resumed scan or a later command finds it; an
index too large to judge whole that keeps none (one writer's) or a stale one gets it counted again
once (`recount`); and `population` builds the very `Population` the policy builds from the index.

The quantiles stay exact: the histogram says which bucket holds the wanted rank and how many values
lie below it, and only those buckets' values are read back, grouped by value and in order by SQLite
(one row per distinct value, streamed: bounded memory however many rows a bucket holds), rather
than every row sorted by signature and two whole columns in memory. A summary that does not account
for every row of the index (rows another scan wrote, a bucket whose count differs) raises
`SummaryMismatch`, and the population is read from the index as before.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import math
import sqlite3
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from datalint.index import read
from datalint.index import summaries as index_summaries
from datalint.index.summaries import MARKED as MARKED  # what `row_mark` hashes
from datalint.index.summaries import SUMMARY_TABLE as SUMMARY_TABLE  # where a file keeps its summary
from datalint.scan import quality

if TYPE_CHECKING:
    from datalint.scan.policy import Population

SUMMARY_VERSION = 3  # 3: a row's mark leaves out its position
MAX_DISTINCT = 1 << 20  # distinct values kept per score (and shapes); past it that part is dropped
MASK = (1 << 64) - 1
PER_OCTAVE = 16  # buckets per doubling of a value: the top 4 bits of the mantissa
_LOW = -(2**31)  # the bucket of values <= 0
_HIGH = 2**31  # the bucket of +inf

Pairs = tuple[tuple[Any, int], ...]
Shape = tuple[int, int]


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
    scored: int = 0  # ok rows with quality scores: the images the quality kinds judge
    scores: tuple[tuple[str, Pairs], ...] = ()  # (score name, (value, images) per distinct value)
    shapes: tuple[tuple[Shape, int], ...] = ()  # ((width, height), undamaged images)
    coverage: int = 0  # the sum of the rows' marks (`row_mark`), mod 2^64
    overflow: tuple[str, ...] = ()  # the parts dropped for holding too many distinct values

    def merge(self, other: PopulationSummary) -> PopulationSummary:
        return merge_many([self, other])

    def without(self, other: PopulationSummary) -> PopulationSummary:
        """This summary less the rows `other` counts (rows removed from the index, or about to be
        measured again). Counts subtract as they add; `other` counting anything this summary
        does not hold raises SummaryMismatch."""
        return subtract(self, other)

    def score_values(self, name: str) -> Pairs:
        """(value, images) of one quality score, by value."""
        return dict(self.scores).get(name, ())

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
            scored=int(body["scored"]),
            scores=tuple(
                (name, tuple((float(v), int(n)) for v, n in pairs)) for name, pairs in body["scores"]
            ),
            shapes=tuple(((int(w), int(h)), int(n)) for (w, h), n in body["shapes"]),
            coverage=int(body["coverage"]),
            overflow=tuple(str(name) for name in body["overflow"]),
        )


def _as_lists(summary: PopulationSummary) -> dict[str, Any]:
    return {
        "samples": summary.samples,
        "ok": summary.ok,
        "signatures": [list(pair) for pair in summary.signatures],
        "sizes": [[root, [list(pair) for pair in pairs]] for root, pairs in summary.sizes],
        "durations": [list(pair) for pair in summary.durations],
        "scored": summary.scored,
        "scores": [[name, [list(pair) for pair in pairs]] for name, pairs in summary.scores],
        "shapes": [[list(shape), n] for shape, n in summary.shapes],
        "coverage": summary.coverage,
        "overflow": list(summary.overflow),
    }


def _bounded(summary: PopulationSummary) -> PopulationSummary:
    """The summary without the parts that hold more than MAX_DISTINCT distinct values, named in
    `overflow` (the findings then come from the index: a summary as large as the rows saves nothing)."""
    dropped = {name for name, pairs in summary.scores if len(pairs) > MAX_DISTINCT}
    if len(summary.shapes) > MAX_DISTINCT:
        dropped.add("shapes")
    gone = set(summary.overflow) | dropped
    if (
        not dropped
        and not any(name in gone for name, _ in summary.scores)
        and not ("shapes" in gone and summary.shapes)
    ):
        return summary
    return dataclasses.replace(
        summary,
        scores=tuple((name, pairs) for name, pairs in summary.scores if name not in gone),
        shapes=() if "shapes" in gone else summary.shapes,
        overflow=tuple(sorted(gone)),
    )


def _text_first(pair: tuple[Any, Any]) -> tuple[int, str]:
    # The order of SQLite's GROUP BY signature: NULL first, then the text by its bytes (for UTF-8,
    # the order of code points), so the policy meets the signatures in the order it always has.
    return (0, "") if pair[0] is None else (1, pair[0])


def _pairs(counts: Counter[Any]) -> Pairs:
    key = _text_first if any(isinstance(k, str) or k is None for k in counts) else None
    return tuple(sorted(((k, n) for k, n in counts.items() if n), key=key))


def merge_all(parts: Sequence[PopulationSummary]) -> PopulationSummary:
    """One summary of all `parts` (any grouping gives the same value: on dask they are merged
    pairwise, level by level)."""
    return merge_many(parts) if parts else PopulationSummary()


def merge_many(parts: Sequence[PopulationSummary]) -> PopulationSummary:
    """All `parts` in one pass: each score's value counts are merged as arrays (a shard's summary
    holds tens of thousands of distinct values; merging them pair by pair in dicts costs ~10x more)."""
    sizes: dict[str | None, Counter[int]] = {}
    signatures: Counter[str | None] = Counter()
    durations: Counter[int] = Counter()
    shapes: Counter[Shape] = Counter()
    scores: dict[str, list[Pairs]] = {}
    for part in parts:
        for root, histogram in part.sizes:
            sizes.setdefault(root, Counter()).update(dict(histogram))
        signatures.update(dict(part.signatures))
        durations.update(dict(part.durations))
        shapes.update(dict(part.shapes))
        for name, pairs in part.scores:
            scores.setdefault(name, []).append(pairs)
    return _bounded(
        PopulationSummary(
            samples=sum(part.samples for part in parts),
            ok=sum(part.ok for part in parts),
            signatures=_pairs(signatures),
            sizes=tuple(sorted(((root, _pairs(c)) for root, c in sizes.items()), key=_text_first)),
            durations=_pairs(durations),
            scored=sum(part.scored for part in parts),
            scores=tuple(sorted((name, _added_values(lists)) for name, lists in scores.items())),
            shapes=_pairs(shapes),
            coverage=sum(part.coverage for part in parts) & MASK,
            overflow=tuple(sorted({name for part in parts for name in part.overflow})),
        )
    )


def _added_values(lists: Sequence[Pairs]) -> Pairs:
    """(value, count) pairs added up, by value."""
    import numpy as np

    given = [pairs for pairs in lists if pairs]
    if len(given) <= 1:
        return given[0] if given else ()
    values = np.fromiter((value for pairs in given for value, _n in pairs), dtype=np.float64)
    counts = np.fromiter((n for pairs in given for _value, n in pairs), dtype=np.int64)
    unique, inverse = np.unique(values, return_inverse=True)
    totals = np.zeros(len(unique), dtype=np.int64)
    np.add.at(totals, inverse, counts)
    return tuple(zip(unique.tolist(), totals.tolist(), strict=True))


def subtract(whole: PopulationSummary, part: PopulationSummary) -> PopulationSummary:
    """`whole` without the rows of `part` (`PopulationSummary.without`)."""

    def less(have: Pairs, gone: Pairs, what: str) -> Pairs:
        counts: Counter[Any] = Counter(dict(have))
        counts.subtract(dict(gone))
        if any(n < 0 for n in counts.values()):
            raise SummaryMismatch(f"the rows taken away are not all in the summary ({what})")
        return _pairs(counts)

    kept_sizes = dict(whole.sizes)
    for root, histogram in part.sizes:
        kept_sizes[root] = less(kept_sizes.get(root, ()), histogram, "sizes")
    gone_scores = dict(part.scores)
    scores = tuple((name, less(pairs, gone_scores.pop(name, ()), name)) for name, pairs in whole.scores)
    overflow = set(whole.overflow) | set(part.overflow)
    if any(name not in overflow for name in gone_scores):
        raise SummaryMismatch(f"the rows taken away hold scores the summary does not: {sorted(gone_scores)}")
    counts = (whole.samples - part.samples, whole.ok - part.ok, whole.scored - part.scored)
    if min(counts) < 0:
        raise SummaryMismatch("more rows taken away than the summary counts")
    return _bounded(
        PopulationSummary(
            samples=counts[0],
            ok=counts[1],
            signatures=less(whole.signatures, part.signatures, "signatures"),
            sizes=tuple(sorted(((r, h) for r, h in kept_sizes.items() if h), key=_text_first)),
            durations=less(whole.durations, part.durations, "durations"),
            scored=counts[2],
            scores=tuple((name, pairs) for name, pairs in scores if pairs),
            shapes=() if "shapes" in overflow else less(whole.shapes, part.shapes, "shapes"),
            coverage=(whole.coverage - part.coverage) & MASK,
            overflow=tuple(sorted(overflow)),
        )
    )


def merge_pair(first: PopulationSummary, second: PopulationSummary | None = None) -> PopulationSummary:
    return first if second is None else first.merge(second)


# ----------------------------------------------------------------------------------------------
# Buckets: [2^(b/16), 2^((b+1)/16)), plus one for values <= 0 and one for +inf


def bound(bucket: int) -> float:
    """The smallest value of a (finite, positive) bucket: exact, (16 + sub) x 2^(exponent - 5)."""
    exponent, sub = divmod(bucket, PER_OCTAVE)
    try:
        return math.ldexp(PER_OCTAVE + sub, exponent - 5)
    except OverflowError:
        return math.inf


def bucket_of(value: float | int | None) -> int | None:
    """The bucket a value is counted in; None for no value (None, or NaN, which SQLite stores as NULL)."""
    if value is None or value != value:
        return None
    if value <= 0:
        return _LOW
    if math.isinf(value):
        return _HIGH
    mantissa, exponent = math.frexp(value)  # value = mantissa x 2^exponent, 0.5 <= mantissa < 1
    return exponent * PER_OCTAVE + int((mantissa - 0.5) * 2 * PER_OCTAVE)


def bucket_clause(column: str, bucket: int) -> tuple[str, list[float]]:
    """The SQL test (and its parameters) for `column` lying in `bucket`, with the same bounds."""
    if bucket == _LOW:
        return f"{column} <= 0", []
    if bucket == _HIGH:
        return f"{column} >= ?", [math.inf]
    return f"{column} >= ? AND {column} < ?", [bound(bucket), bound(bucket + 1)]


# ----------------------------------------------------------------------------------------------
# Summaries of index files


class Summarizer:
    """Counts rows into a summary as they go by: a shard writer's rows as it writes them, or an
    index file's as they are read back."""

    def __init__(self) -> None:
        self.samples = 0
        self.coverage = 0
        self.signatures: Counter[str | None] = Counter()
        self.sizes: dict[str | None, Counter[int]] = {}
        self.durations: Counter[int] = Counter()
        self.scored = 0
        self.scores: dict[str, Counter[float]] = {}
        self.shapes: Counter[Shape] = Counter()
        self.unusable: set[str] = set()  # scores that are not numbers: judged from the index
        self._roots: dict[str | None, str | None] = {}  # signature text -> its root type

    def add(
        self,
        status: str,
        signature: str | None,
        nbytes: float | None,
        duration: float | None,
        info: str | None = None,
        key: Any = None,
    ) -> None:
        self.samples += 1
        self.coverage = (self.coverage + row_mark(key, status, signature, nbytes, duration, info)) & MASK
        if status != "ok":
            return
        self.signatures[signature] += 1
        size = bucket_of(nbytes)
        if size is not None:
            root = self._roots.get(signature, _UNSEEN)
            if root is _UNSEEN:
                root = self._roots[signature] = root_type(signature)
            self.sizes.setdefault(root, Counter())[size] += 1
        seconds = bucket_of(duration)
        if seconds is not None:
            self.durations[seconds] += 1
        if info is not None and ('"quality"' in info or '"sha256"' in info):
            self._add_image(json.loads(info))

    def _add_image(self, info: Any) -> None:
        """What the policy reads of an image's info: its scores (`policy.quality_rows`) and, for an
        undamaged file, its shape (`policy.image_shapes`)."""
        if not isinstance(info, dict):
            return
        scores = info.get("quality")
        if scores is not None:
            scores = quality.with_derived_scores(scores)  # as the policy reads them
            self.scored += 1
            for name, value in scores.items() if isinstance(scores, dict) else ():
                if type(value) is not float:  # a str: the perceptual hash; an int is counted as its float
                    if value is None or isinstance(value, str):
                        continue
                    try:
                        value = float(value)
                    except (TypeError, ValueError):
                        self.unusable.add(name)
                        continue
                counts = self.scores.get(name)
                if counts is None:
                    counts = self.scores[name] = Counter()
                counts[value] += 1
        width, height = info.get("width"), info.get("height")
        if info.get("sha256") is not None and width is not None and height:
            try:
                if width > 0:
                    self.shapes[(int(width), int(height))] += 1
            except (TypeError, ValueError):
                self.unusable.add("shapes")

    def add_values(self, rows: Iterable[Sequence[Any]]) -> None:
        """Rows as `store.sample_values` makes them (SAMPLE_COLUMNS order, JSON as text)."""
        for row in rows:
            self.add(row[_STATUS], row[_SIGNATURE], row[_NBYTES], row[_DURATION], row[_INFO], row[_KEY])

    def summary(self) -> PopulationSummary:
        return _bounded(
            PopulationSummary(
                samples=self.samples,
                ok=sum(self.signatures.values()),
                signatures=_pairs(self.signatures),
                sizes=tuple(sorted(((root, _pairs(c)) for root, c in self.sizes.items()), key=_text_first)),
                durations=_pairs(self.durations),
                scored=self.scored,
                scores=tuple(sorted((name, _pairs(c)) for name, c in self.scores.items())),
                shapes=_pairs(self.shapes),
                coverage=self.coverage,
                overflow=tuple(sorted(self.unusable)),
            )
        )


_UNSEEN: Any = object()


def _positions() -> tuple[int, ...]:
    from datalint.index.store import SAMPLE_COLUMNS

    return tuple(
        SAMPLE_COLUMNS.index(c) for c in ("status", "signature", "nbytes", "duration", "info", "key")
    )


_STATUS, _SIGNATURE, _NBYTES, _DURATION, _INFO, _KEY = _positions()


def row_mark(key: Any, status: Any, signature: Any, nbytes: Any, duration: Any, info: Any) -> int:
    """A 64-bit hash of one row's identity (its key) and of what the summary counts of it. Values
    are taken as SQLite stores them (an integral float in an INTEGER column is an integer, a REAL
    column's integer a float, a key text), so a row hashes alike before it is written and read back.

    Not its position: files inserted before a row move it (an incremental scan stores the new order)
    and change nothing the summary counts, so the summary still covers the index after it."""
    if isinstance(nbytes, float) and nbytes.is_integer() and abs(nbytes) < 2**63:
        nbytes = int(nbytes)
    if isinstance(duration, int) and not isinstance(duration, bool):
        duration = float(duration)
    if key is not None and not isinstance(key, (str, bytes)):
        key = str(key)
    # The JSON texts as they are (a repr would escape their quotes: 3x the cost), the rest by repr.
    text = f"{key!r}\x1f{status!r}\x1f{signature}\x1f{nbytes!r}\x1f{duration!r}\x1f{info}"
    digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return int.from_bytes(digest, "little")


def coverage_of(connection: Any) -> tuple[int, int]:
    """(rows, the sum of their marks): what a summary of every row of this index must hold."""
    total = rows = 0
    for row in index_summaries.marked_rows(connection):
        total += row_mark(*row)
        rows += 1
    return rows, total & MASK


def root_type(signature: str | None) -> str | None:
    """The sample's own type in a signature text, as SQLite's json_extract(signature, '$.type')."""
    if not signature:
        return None
    try:
        value = json.loads(signature)
    except ValueError:
        return None
    kind = value.get("type") if isinstance(value, dict) else None
    return kind if isinstance(kind, str) or kind is None else str(kind)


def summarize(connection: sqlite3.Connection) -> PopulationSummary:
    """The summary of every row in an index or shard file, in one read of six columns."""
    return summarize_rows(connection)


def summarize_rows(
    connection: sqlite3.Connection, where: str = "", parameters: Sequence[Any] = ()
) -> PopulationSummary:
    """The summary of the rows `where` selects (all of them: none)."""
    counter = Summarizer()
    for status, signature, nbytes, duration, info, key in index_summaries.counted_rows(
        connection, where, parameters
    ):
        counter.add(status, signature, nbytes, duration, info, key)
    return counter.summary()


def write_summary(connection: sqlite3.Connection, summary: PopulationSummary) -> None:
    """Keep `summary` inside the file it describes: a shard file (renamed, merged and removed with
    it) or the merged index (`keep_in_index`). Its version and the rows it covers (how many, and
    the sum of their marks) are columns beside it, for whoever looks at the file."""
    with connection:
        _store(connection, summary)


def _store(connection: sqlite3.Connection, summary: PopulationSummary) -> None:
    """`write_summary` inside the caller's transaction."""
    index_summaries.store_summary(
        connection, SUMMARY_VERSION, summary.samples, f"{summary.coverage:016x}", summary.to_json()
    )


def read_summary(connection: sqlite3.Connection) -> PopulationSummary | None:
    """The summary a shard writer kept in its file (or a scan in its index); None when there is
    none or of another version."""
    body = index_summaries.summary_body(connection)
    return PopulationSummary.from_json(body) if body is not None else None


def forget_summary(connection: sqlite3.Connection) -> None:
    with connection:
        index_summaries.drop_summary(connection)


def keep_in_index(index_path: str | Path, merged: PopulationSummary, *, was_empty: bool) -> None:
    """After shard files were merged into an index: the summary it keeps becomes the one it kept
    plus `merged` (the files'), so that it still covers every row; `merged` alone when the index
    was empty (new, or cleared by a --rescan). An index that held rows but no summary (a single
    writer's, or one whose summary was found stale) keeps none: what it holds is not known without
    reading it.

    Nothing is checked here: the rows a merge replaced, or another writer's since, make the kept
    summary cover other rows than the index's, and `check_covers` refuses it where it is used."""
    with contextlib.closing(sqlite3.connect(index_path, timeout=60)) as connection:
        before = read_summary(connection)
        if before is None and not was_empty:
            return
        write_summary(connection, merged if before is None or was_empty else before.merge(merged))


# ----------------------------------------------------------------------------------------------
# An incremental scan keeps the index's summary current


@dataclass(frozen=True)
class Followed:
    """An incremental scan's hold on the summary the index keeps: what it is once the samples about
    to be measured again (`positions`, in the index's new numbering) lose their old rows."""

    base: PopulationSummary
    positions: tuple[int, ...]


def take_away(connection: sqlite3.Connection, where: str, parameters: Sequence[Any] = ()) -> None:
    """Inside the caller's transaction, before the rows `where` selects are deleted: the kept
    summary without them. One that does not hold them (it was stale) is dropped."""
    summary = read_summary(connection)
    if summary is None:
        return
    try:
        _store(connection, summary.without(summarize_rows(connection, where, parameters)))
    except SummaryMismatch:
        index_summaries.drop_summary(connection)


def follow_changes(connection: sqlite3.Connection, positions: Sequence[int]) -> Followed | None:
    """Before an incremental scan measures `positions`: the kept summary less the rows those
    positions hold now (the old rows of changed samples; an added one holds none). None when
    the index keeps no summary, or one that does not hold those rows."""
    summary = read_summary(connection)
    if summary is None:
        return None
    try:
        return Followed(summary.without(summarize_positions(connection, positions)), tuple(positions))
    except SummaryMismatch:
        return None


def finish_following(connection: sqlite3.Connection, followed: Followed) -> None:
    """Inside the caller's transaction, once the scan has measured: the index keeps `followed.base`
    plus whatever rows its positions hold now (the new ones; an old one still there if a sample was
    not measured). The findings' pass checks it covers every row, as always: a row another writer
    changed meanwhile is caught there."""
    _store(connection, followed.base.merge(summarize_positions(connection, followed.positions)))


_POSITIONS_PER_QUERY = 500


def summarize_positions(connection: sqlite3.Connection, positions: Sequence[int]) -> PopulationSummary:
    """The summary of the rows at `positions` (by primary key, a few hundred per query)."""
    counter = Summarizer()
    ordered = sorted(positions)
    for start in range(0, len(ordered), _POSITIONS_PER_QUERY):
        chunk = ordered[start : start + _POSITIONS_PER_QUERY]
        for status, signature, nbytes, duration, info, key in index_summaries.counted_rows_at(
            connection, chunk
        ):
            counter.add(status, signature, nbytes, duration, info, key)
    return counter.summary()


def recount(connection: sqlite3.Connection) -> PopulationSummary:
    """Count the summary of every row again and keep it: one read of the index, where the summary
    was missing or stale and the index is too large to judge whole in memory."""
    summary = summarize(connection)
    write_summary(connection, summary)
    return summary


def is_empty(index_path: str | Path) -> bool:
    with contextlib.closing(sqlite3.connect(index_path, timeout=60)) as connection:
        return index_summaries.no_samples(connection)


def summary_of_file_rows(path: str | Path) -> PopulationSummary:
    """A shard or index file's summary counted from its rows now, whatever summary it keeps."""
    with read.reading(path) as connection:
        return summarize(connection)


def summary_of_file(path: str | Path) -> PopulationSummary:
    """A shard file's summary: the one its writer kept, or (missing, or of an older version) one
    computed from its rows now."""
    with read.reading(path) as connection:
        summary = read_summary(connection)
        return summary if summary is not None else summarize(connection)


# ----------------------------------------------------------------------------------------------
# From a summary back to the policy's population


def population(db: Any, summary: PopulationSummary, *, checked: bool = False) -> Population:
    """The `policy.Population` of the index `db`, from a summary of all its rows: equal to
    `policy.population(db)`. Raises SummaryMismatch when the summary is not the index's
    (`checked`: `check_covers` has just said it is)."""
    from datalint.scan import policy

    if not checked:
        check_covers(db, summary)
    tally = policy.tally_signatures(summary.signatures)
    roots = tally.root_types
    wanted: list[tuple[str, frozenset[str | None] | None, Pairs, tuple[float, ...]]] = [
        ("nbytes", None, summary.size_histogram(), (0.5,)),
        ("duration", None, summary.durations, (0.5, 0.99)),
    ]
    if len(roots) > 1:
        for family_roots in roots.values():
            wanted.append(("nbytes", frozenset(family_roots), summary.size_histogram(family_roots), (0.5,)))
    ranks = {
        (column, types, q): rank_bucket(histogram, q) for column, types, histogram, qs in wanted for q in qs
    }
    counts = {(column, types, bucket): n for column, types, histogram, _ in wanted for bucket, n in histogram}
    picked: dict[tuple[str, frozenset[str | None] | None, float], float] = {}
    by_bucket: dict[Wanted, dict[float, int]] = {}
    for (column, types, q), found in ranks.items():
        if found is not None:
            by_bucket.setdefault((column, types, found[0]), {})[q] = found[1]
    for column in ("nbytes", "duration"):  # one pass over the table per column, for all its buckets
        mine = {key: offsets for key, offsets in by_bucket.items() if key[0] == column}
        for (_, types, _bucket), at_ranks in _ranked_values(db, column, mine, counts).items():
            picked.update({(column, types, q): value for q, value in at_ranks.items()})

    def value(column: str, types: frozenset[str | None] | None, q: float) -> float | None:
        return picked.get((column, types, q))

    median_nbytes = value("nbytes", None, 0.5)
    if len(roots) > 1:
        medians = {name: value("nbytes", frozenset(members), 0.5) for name, members in roots.items()}
    else:
        medians = {name: median_nbytes for name in roots}
    return policy.population_of(
        tally, median_nbytes, value("duration", None, 0.5), value("duration", None, 0.99), medians
    )


def check_covers(db: Any, summary: PopulationSummary) -> None:
    """Raise SummaryMismatch unless the summary counted exactly the index's rows, as they are now:
    as many, and the same ones (the sum of their marks), in one read of the columns it counts."""
    raise_unless_covers(summary, *coverage_of(db))


def raise_unless_covers(summary: PopulationSummary, samples: int, marks: int) -> None:
    """SummaryMismatch unless the summary counted `samples` rows whose marks sum to `marks`."""
    if samples != summary.samples:
        raise SummaryMismatch(f"the summary holds {summary.samples} rows, the index {samples}")
    if marks != summary.coverage:
        raise SummaryMismatch(
            f"the summary holds {samples} rows, as the index does, but other ones (or as they were "
            "before a change)"
        )


def inverted_cdf_rank(count: int, q: float) -> int:
    """The 0-based rank numpy's `quantile(method="inverted_cdf")` picks among `count` sorted values."""
    virtual = count * q - 1
    below = math.floor(virtual)
    return max(0, below if virtual == below else below + 1)


def rank_bucket(histogram: Pairs, q: float) -> tuple[int, int] | None:
    """(bucket, rank within it) of the q-quantile (numpy's inverted_cdf) of the values a histogram
    counts; None when it counts none."""
    rank, below = inverted_cdf_rank(sum(n for _bucket, n in histogram), q), 0
    for bucket, n in histogram:
        if rank < below + n:
            return bucket, rank - below
        below += n
    return None


Wanted = tuple[str, "frozenset[str | None] | None", int]  # (column, root types or all, bucket)


def _ranked_values(
    db: Any, column: str, wanted: dict[Wanted, dict[float, int]], expected: dict[Wanted, int]
) -> dict[Wanted, dict[float, float]]:
    """For each wanted (column, root types, bucket) with its ranks (q -> rank within the bucket),
    the values at those ranks among the ok rows, in one pass over the table.

    SQLite groups the buckets' values and hands them over in order, one row per distinct value
    (and root type) with its count: a bucket of one repeated size (every tensor of one shape) is
    one row, a bucket of distinct durations streams through in constant memory (SQLite's sorter
    spills to disk)."""
    if not wanted:
        return {}
    tests, parameters = [], []
    for bucket in sorted({key[2] for key in wanted}):
        test, bounds = bucket_clause(column, bucket)
        tests.append(f"({test})")
        parameters.extend(bounds)
    found: dict[Wanted, dict[float, float]] = {key: {} for key in wanted}
    below = dict.fromkeys(wanted, 0)
    for value, root, count in index_summaries.grouped_ok_values(db, column, tests, parameters):
        in_bucket = bucket_of(value)
        for key, ranks in wanted.items():
            _, types, wanted_bucket = key
            if in_bucket != wanted_bucket or (types is not None and root not in types):
                continue
            for q, rank in ranks.items():
                if q not in found[key] and rank < below[key] + count:
                    found[key][q] = float(value)
            below[key] += count
    for key, seen in below.items():
        if seen != expected[key]:
            raise SummaryMismatch(f"bucket {key}: {seen} values in the index, {expected[key]} summarised")
    return found
