"""Every finding of an index from its merged population summary, judged part by part
(docs/distributed.md, "Findings from summaries").

`policy.derive_findings` reads the merged index whole: every image's scores parsed into memory for
the quality limits, a count of every content hash, every perceptual hash. Over 1e8-1e9 rows that
is the memory of the whole index in Python objects. Here the work is split as the scan's is:

1. The parent decides the limits once, from the merged summary (`limits_of`): the population
   (`summaries.population`), each quality kind's limit (the exact median and MAD of the scores,
   from their value counts), the `odd_size` and `odd_aspect` limits (from the shape counts) and the
   signatures that carry findings. Nothing here reads a row.
2. Each part of the index (the rows of a range of indices, a shard's rows) is judged alone against
   those limits (`judge_part`): every finding a sample has by itself or against the limits.
   A part returns its findings and two small arrays per image: the first 64 bits of its content
   hash and its perceptual hash. Parts are independent: they run in worker processes, each with
   its own read-only connection, or one after the other.
3. The parent finds what crosses parts (`cross_part_findings`): exact duplicates (a 64-bit prefix
   seen twice; only those images' full digests and keys are read, to confirm and to name them) and
   near-duplicate groups (the components over all perceptual hashes; keys are read for the members
   only). The hashes are gathered as the parts come in (`hash_partitions`): in arrays for a few
   million images, in partition files beside the index past that, each partition grouped alone.
   Keys that name several samples (`duplicate_key`) come from `policy.index_wide_findings`, the
   one SQL pass over the key index that `policy.derive_findings` makes too.

The findings are `policy.derive_findings`'s, kind by kind and detail for detail
(tests/shards/test_summary_findings.py). A summary that does not cover the index's rows, or that
dropped a part (`summaries.PopulationSummary.overflow`), raises `SummaryMismatch`: the caller reads
the index instead.
"""

from __future__ import annotations

import hashlib
import multiprocessing
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from datalint.index import parts as index_parts
from datalint.index import positions, store
from datalint.scan import hash_partitions, policy, quality, summaries
from datalint.scan.hash_partitions import GatheredHashes
from datalint.scan.images import ShapeThresholds, duplicate_findings, shape_findings
from datalint.scan.policy import Finding, PolicyOptions, Population
from datalint.scan.summaries import Pairs, PopulationSummary, SummaryMismatch, check_covers

PART_ROWS = 1 << 16  # indices per part: a few shards of rows; ~30 MB of a worker's memory for images
_LOOKUP = 500  # indices per `idx IN (...)` when the parent reads the few rows it names
_MANY_SIGNATURES = 2000  # as `policy._SignatureJudge.bad_signatures`: more, and every row is read


@dataclass(frozen=True)
class Limits:
    """What every sample is judged against, decided once by the parent from the merged summary."""

    options: PolicyOptions
    peers: Population
    quality_limits: dict[str, quality.KindLimit]  # per scored kind (the report and the warnings use them too)
    shapes: dict[str, quality.ShapeLimit]  # odd_size, odd_aspect; empty when too few images to judge
    relative: bool  # enough scored images (min_peers) for the quality kinds and shapes to be judged
    bad_signatures: tuple[str, ...] | None  # the ok signatures with findings; None: too many to list


@dataclass(frozen=True)
class Part:
    """One part's findings, and what the parent needs of its images to find what crosses parts."""

    findings: list[tuple[int, str, str]]
    digest_rows: Any  # int64 indices of the undamaged images
    digests: Any  # uint64: the first 64 bits of each one's content hash
    phash_rows: Any  # int64 indices of the images with a perceptual hash
    phashes: Any  # uint64
    rows: int  # the part's rows, and the sum of their marks: its share of the coverage check
    marks: int


def findings(
    db: Any,
    summary: PopulationSummary,
    options: PolicyOptions,
    *,
    workers: int = 0,
    part_rows: int | None = None,
    partition_rows: int | None = None,
) -> tuple[Limits, list[Finding]]:
    """The limits and every finding of the index `db`, from the summary of all its rows: equal to
    `policy.derive_findings(db, options)`. Raises SummaryMismatch when the summary is not the index's.

    The parts (`part_rows` indices each, PART_ROWS by default) go to `workers` forked processes
    when there are several. The coverage is checked by the parts, in the pass that judges them: a
    summary of other rows is refused once they are judged (the common case, a summary that covers,
    costs no pass of its own).
    Past `partition_rows` undamaged samples the images' hashes go to partition files beside the
    index as the parts come in (datalint/scan/hash_partitions.py), so memory stays bounded."""
    limits = limits_of(db, summary, options, checked=True)
    ranges = list(part_ranges(db, part_rows or PART_ROWS))
    partition_rows = partition_rows or hash_partitions.PARTITION_ROWS
    with hash_partitions.gathered_hashes(_folder_of(db), summary.ok, partition_rows) as hashes:
        found = judge_parts(db, summary, limits, ranges, hashes, workers)
        found.extend(cross_part_findings(db, hashes, options))
    if options.against:  # the other split's images against all of ours (its own index, read whole)
        found.extend(policy._leaks(db, options.against, policy.quality_thresholds(options).near_duplicate))
    judged = [Finding(idx, kind, text, kind in options.kinds) for idx, kind, text in found]
    return limits, policy._merged(policy.with_failures(judged, db))


# ----------------------------------------------------------------------------------------------
# 1. The limits, from the summary alone (and the population's few exact values from the index)


def limits_of(
    db: Any, summary: PopulationSummary, options: PolicyOptions, *, checked: bool = False
) -> Limits:
    """The limits of every kind, from the summary (`checked`: whoever calls checks the coverage)."""
    if summary.overflow:
        raise SummaryMismatch(f"the summary dropped {', '.join(summary.overflow)}: too many distinct values")
    if not checked:
        check_covers(db, summary)
    peers = summaries.population(db, summary, checked=True)
    thresholds = policy.quality_thresholds(options)
    judge = policy._SignatureJudge(peers, options)
    bad = [text for text, _n in summary.signatures if text and judge.findings(text)]
    images = sum(n for _shape, n in summary.shapes)
    return Limits(
        options=options,
        peers=peers,
        quality_limits=kind_limits(summary, thresholds, fixed=dict(options.thresholds)),
        shapes=shape_limits(summary, thresholds) if images >= options.min_peers else {},
        relative=summary.scored >= options.min_peers,
        bad_signatures=None if len(bad) > _MANY_SIGNATURES else tuple(bad),
    )


def kind_limits(
    summary: PopulationSummary, thresholds: quality.QualityThresholds, fixed: dict[str, float]
) -> dict[str, quality.KindLimit]:
    """`quality.kind_limits` from the scores' value counts: the same median, MAD and counts."""
    limits: dict[str, quality.KindLimit] = {}
    for kind, (score, direction) in quality.SCORED_KINDS.items():
        values = summary.score_values(score)
        if not values:
            continue
        absolute = float(getattr(thresholds, kind))
        median, spread = robust_center(values)
        total = sum(n for _value, n in values)
        if direction == "high":
            past = sum(n for value, n in values if value > absolute)
            shifted = median > absolute and kind not in fixed
            limit = median + thresholds.outlier_mads * spread if shifted else absolute
        else:
            past = sum(n for value, n in values if value < absolute)
            shifted = median < absolute and kind not in fixed
            limit = median - thresholds.outlier_mads * spread if shifted else absolute
        limits[kind] = quality.KindLimit(kind, score, direction, limit, median, spread, past, total)
    return limits


def shape_limits(
    summary: PopulationSummary, thresholds: quality.QualityThresholds
) -> dict[str, quality.ShapeLimit]:
    """`quality.shape_limits` from the counts of (width, height)."""
    limits: dict[str, quality.ShapeLimit] = {}
    for kind, measure in quality.SHAPE_MEASURES.items():
        measured: Counter[float] = Counter()
        for (width, height), n in summary.shapes:
            measured[measure(width, height)] += n
        median, spread = robust_center(tuple(sorted(measured.items())))
        limits[kind] = quality.ShapeLimit(kind, median, max(spread, 0.1), float(getattr(thresholds, kind)))
    return limits


def robust_center(values: Pairs) -> tuple[float, float]:
    """`quality.robust_center` of the values that (value, count) pairs, sorted by value, stand for."""
    median = weighted_median(values)
    deviations: Counter[float] = Counter()
    for value, n in values:
        deviations[abs(value - median)] += n  # float64 arithmetic, as numpy's array - median
    return median, float(1.4826 * weighted_median(tuple(sorted(deviations.items()))))


def weighted_median(values: Pairs) -> float:
    """numpy.median of the values (value, count) pairs sorted by value stand for: the middle one, or
    the mean of the two middle ones (numpy's `mean` of two float64 values, (a + b) / 2)."""
    total = sum(n for _value, n in values)
    low, high = (total - 1) // 2, total // 2
    a = b = None
    seen = 0
    for value, n in values:
        if a is None and low < seen + n:
            a = float(value)
        if high < seen + n:
            b = float(value)
            break
        seen += n
    if a is None or b is None:
        raise ValueError("the median of no values")
    return a if low == high else (a + b) / 2


# ----------------------------------------------------------------------------------------------
# 2. Each part judged alone


def part_ranges(db: Any, part_rows: int = PART_ROWS) -> Iterator[tuple[int, int]]:
    """(first, last) index of each part: consecutive ranges of `part_rows` indices."""
    first, last = index_parts.bounds(db)
    if first is None or last is None:
        return
    for start in range(first, last + 1, part_rows):
        yield start, min(last, start + part_rows - 1)


def judge_parts(
    db: Any,
    summary: PopulationSummary,
    limits: Limits,
    ranges: Sequence[tuple[int, int]],
    hashes: GatheredHashes,
    workers: int = 0,
) -> list[tuple[int, str, str]]:
    """Every part's findings; their images' hashes go to `hashes` as each part comes in. Raises
    SummaryMismatch once all are read when the summary is not of these rows."""
    found: list[tuple[int, str, str]] = []
    rows = marks = 0
    for part in _judged_parts(db, limits, list(ranges), workers):
        found.extend(part.findings)
        rows, marks = rows + part.rows, marks + part.marks
        hashes.add(part.digest_rows, part.digests, part.phash_rows, part.phashes)
    summaries.raise_unless_covers(summary, rows, marks & summaries.MASK)
    return found


def judge_part(db: Any, limits: Limits, first: int, last: int) -> Part:
    """The findings of the rows `first`..`last` against the limits, and their images' hashes."""
    import numpy as np

    found = list(_sample_findings(db, limits, first, last))
    read, count, marks = _read_part(db, first, last)
    rows = [
        (idx, key if type(key) is str else policy._image_key(idx, key), scores)
        for idx, key, scores, _digest, _w, _h in read
        if scores is not None
    ]
    found.extend(_image_findings(read, rows, limits))
    digests = [
        (idx, digest_prefix(digest)) for idx, _key, _text, digest, _w, _h in read if digest is not None
    ]
    phashes = [(idx, scores["phash"]) for idx, _key, scores in rows if scores.get("phash")]
    return Part(
        findings=found,
        digest_rows=np.array([idx for idx, _ in digests], dtype=np.int64),
        digests=np.array([prefix for _, prefix in digests], dtype=np.uint64),
        phash_rows=np.array([idx for idx, _ in phashes], dtype=np.int64),
        phashes=quality.hashes_from_hex([value for _, value in phashes])
        if phashes
        else np.zeros(0, np.uint64),
        rows=count,
        marks=marks,
    )


def _read_part(db: Any, first: int, last: int) -> tuple[list[tuple[Any, ...]], int, int]:
    """(index, key, scores, content hash, width, height) of the part's ok samples with an image's
    info (what `policy.quality_rows` reads), and the count and sum of the marks of all its rows."""
    found: list[tuple[Any, Any, str]] = []
    count = marks = 0
    for row in index_parts.rows_between(db, first, last):
        count += 1
        marks += summaries.row_mark(*row[1:])
        idx, key, status, _signature, _nbytes, _duration, info = row
        if status == "ok" and info is not None and ('"quality"' in info or '"sha256"' in info):
            found.append((idx, key, info))
    images: list[tuple[Any, ...]] = []
    for (idx, key, _info), parsed in zip(found, policy._parsed_scores(found), strict=True):
        if isinstance(parsed, dict):
            get = parsed.get
            scores = quality.with_derived_scores(get("quality"))  # as `policy.quality_rows` reads them
            images.append((idx, key, scores, get("sha256"), get("width"), get("height")))
    return images, count, marks


def _sample_findings(db: Any, limits: Limits, first: int, last: int) -> Iterator[tuple[int, str, str]]:
    """The per-sample pass of `policy.derive_findings`, over one part."""
    options, peers = limits.options, limits.peers
    judge = policy._SignatureJudge(peers, options)
    bad = None if limits.bad_signatures is None else list(limits.bad_signatures)
    where, parameters = policy.candidate_clauses(peers, options, bad)
    clause = "WHERE idx BETWEEN ? AND ?" + (f" AND ({where.removeprefix('WHERE ')})" if where else "")
    rows = store.iter_samples(
        db, policy.SAMPLE_PASS_COLUMNS, clause, raw=("signature",), parameters=[first, last, *parameters]
    )
    for row in rows:
        details: dict[str, list[str]] = {}
        for kind, detail in policy.sample_findings(row, peers, judge, options):
            details.setdefault(kind, []).append(detail)
        for kind, parts in details.items():
            yield row["idx"], kind, "; ".join(dict.fromkeys(parts))


def _image_findings(
    read: list[tuple[Any, ...]], rows: list[tuple[int, str, Any]], limits: Limits
) -> list[tuple[int, str, str]]:
    """tiny and extreme_aspect (fixed limits), the quality kinds past their limits, odd shapes, for
    a part's images as `_read_part` reads them and their scores."""
    fixed = policy.shape_thresholds(limits.options)
    found = [
        (idx, f.kind, f.detail)
        for idx, _key, _text, digest, w, h in read
        if digest is not None and _odd_by_fixed_limits(w, h, fixed)
        for f in shape_findings(int(w), int(h), fixed)
    ]
    if not limits.relative:
        return found
    found.extend(policy._past_limits(rows, limits.quality_limits))
    if limits.shapes:
        shapes = {
            idx: (int(w), int(h))
            for idx, _key, _text, digest, w, h in read
            if digest is not None and w is not None and w > 0 and h
        }
        found.extend(quality.odd_shapes(shapes, limits.shapes))
    return found


def _odd_by_fixed_limits(width: Any, height: Any, fixed: ShapeThresholds) -> bool:
    # images.index_findings' SQL test: a side under the least, or the longer over max_aspect x the shorter
    if width is None or height is None:
        return False
    short = min(width, height)
    return bool(short < fixed.min_side or max(width, height) > fixed.max_aspect * short)


def digest_prefix(digest: Any) -> int:
    """The first 64 bits of a hex content hash; a 64-bit hash of anything else. Two images with one
    prefix are only candidates: their full digests are compared."""
    text = str(digest)
    if len(text) >= 16:
        try:
            return int(text[:16], 16)
        except ValueError:
            pass
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")


def _judged_parts(db: Any, limits: Limits, ranges: list[tuple[int, int]], workers: int) -> Iterator[Part]:
    if workers <= 1 or len(ranges) <= 1:
        for first, last in ranges:
            yield judge_part(db, limits, first, last)
        return
    path = store.index_path(db)
    # fork: the workers inherit the limits instead of unpickling them; each opens the index read-only.
    with multiprocessing.get_context("fork").Pool(min(workers, len(ranges))) as pool:
        yield from pool.imap(_judge_part_of, [(path, limits, first, last) for first, last in ranges])


def _judge_part_of(task: tuple[str, Limits, int, int]) -> Part:
    path, limits, first, last = task
    db = store.open_index(Path(path), create=False)
    try:
        return judge_part(db, limits, first, last)
    finally:
        db.close()


# ----------------------------------------------------------------------------------------------
# 3. What crosses parts


def cross_part_findings(
    db: Any, hashes: GatheredHashes, options: PolicyOptions
) -> list[tuple[int, str, str]]:
    radius = policy.quality_thresholds(options).near_duplicate
    return [*duplicates(db, hashes), *near_duplicates(db, hashes, radius), *policy.index_wide_findings(db)]


def duplicates(db: Any, hashes: GatheredHashes) -> list[tuple[int, str, str]]:
    """`duplicate` over all parts: only images whose 64-bit prefix is seen twice are read again."""
    read = _rows_by_index(db, "key, json_extract(info, '$.sha256')", hashes.duplicate_candidates())
    seen = Counter(digest for _key, digest in read.values())
    named = {
        idx: (store.read_key(key) or f"#{idx}", digest)
        for idx, (key, digest) in read.items()
        if seen[digest] > 1
    }
    return [(idx, f.kind, f.detail) for idx, f in duplicate_findings(named).items()]


def near_duplicates(db: Any, hashes: GatheredHashes, radius: int) -> list[tuple[int, str, str]]:
    """`near_duplicate` over all parts: the groups are the components over every perceptual hash,
    whatever order they come in; each group is ordered by key, as `quality.near_duplicate_findings`
    orders them, once its members' keys are read."""
    groups = hashes.near_groups(radius)
    members = [idx for group in groups for idx in group.indices]
    keys = {idx: policy._image_key(idx, key) for idx, (key,) in _rows_by_index(db, "key", members).items()}
    label = positions.read(db).shown  # a group is named by its representative's position
    found: list[tuple[int, str, str]] = []
    for group in groups:
        pairs = zip(group.indices, group.hashes, strict=True)
        named = sorted((keys[idx], idx, value) for idx, value in pairs)
        found.extend(quality.group_findings([(idx, key, value) for key, idx, value in named], label))
    return found


def _folder_of(db: Any) -> Path | None:
    """Where partition files go: beside the index (None: an index in memory keeps them in memory)."""
    path = store.index_path(db)
    return None if path == ":memory:" else Path(path).parent


def _rows_by_index(db: Any, columns: str, indices: Sequence[int]) -> dict[int, tuple[Any, ...]]:
    found: dict[int, tuple[Any, ...]] = {}
    for start in range(0, len(indices), _LOOKUP):
        chunk = indices[start : start + _LOOKUP]
        for idx, *values in index_parts.rows_at(db, columns, chunk):
            found[idx] = tuple(values)
    return found
