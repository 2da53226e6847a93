"""Quarantine policy: from the measurements in the index to findings and to the quarantine list.

Everything here is computed from the index after the last batch is flushed, never during the scan,
because "oversized", "slow" or "a shape outlier" only mean something next to all the other
samples. The functions read the index and return values; changing a threshold or the quarantined
kinds re-derives the list without rescanning (`datalint quarantine DB --kinds ...`).
"""

from __future__ import annotations

import json
import math
import operator
import weakref
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from datalint.errors import UsageError
from datalint.index import population as index_population
from datalint.index import positions, quarantine
from datalint.index.kinds import DEFAULT_KINDS, KINDS, SAID_BY, candidate_where, severity_rank
from datalint.scan import hash_groups, quality
from datalint.scan.images import (
    ShapeThresholds,
    duplicate_findings,
    index_findings,
    shape_findings,
)
from datalint.text import did_you_mean, shown_name
from datalint.units import human_bytes


@dataclass(frozen=True)
class PolicyOptions:
    """Thresholds and the quarantined kinds; stored with each run so a re-derivation reuses them."""

    kinds: tuple[str, ...] = DEFAULT_KINDS
    timeout: float = 60.0
    num_classes: int | None = None
    ignore_index: int | None = None
    require: tuple[str, ...] = ()
    max_bytes: int | None = None
    oversize_factor: float = 64.0  # oversized: nbytes above this multiple of the median
    slow_fraction: float = 0.1  # slow: at least this fraction of --timeout ...
    slow_factor: float = 10.0  # ... and this multiple of the median duration, and at least the p99
    majority: float = 0.5  # a field / shape / dtype "of most samples" is held by more than this share
    min_peers: int = 8  # with fewer ok samples, nothing is judged relative to its peers
    thresholds: tuple[tuple[str, float], ...] = ()  # quality limits overridden (`--threshold dark=0.1`)
    against: str | None = None  # the other split's index: its images leak into this one

    def to_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> PolicyOptions:
        known = {name: values[name] for name in cls.__dataclass_fields__ if name in values}
        for name in ("kinds", "require"):
            if name in known:
                known[name] = tuple(known[name])
        if "thresholds" in known:
            known["thresholds"] = tuple((str(kind), float(value)) for kind, value in known["thresholds"])
        return cls(**known)


@dataclass(frozen=True, order=True)
class Finding:
    idx: int
    kind: str
    detail: str
    quarantine: bool = False

    def to_row(self) -> dict[str, Any]:
        return {"idx": self.idx, "kind": self.kind, "detail": self.detail, "quarantine": int(self.quarantine)}


def parse_kinds(text: str | Sequence[str] | None) -> tuple[str, ...]:
    """`all`, `default`, or a comma-separated list of kind names (unknown names are an error)."""
    if text is None:
        return DEFAULT_KINDS
    names = [part.strip() for part in (text.split(",") if isinstance(text, str) else text) if part.strip()]
    if not names:  # an empty list would quarantine nothing, silently: say so instead
        raise UsageError(
            f"--kinds {text!r} names no finding kind; pass 'default', 'all' or a list such as error,crash"
        )
    kinds: list[str] = []
    for name in names:
        if name == "all":
            kinds.extend(KINDS)
        elif name == "default":
            kinds.extend(DEFAULT_KINDS)
        elif name in KINDS:
            kinds.append(name)
        else:
            hint = did_you_mean(name, ("all", "default", *KINDS))
            raise UsageError(
                f"unknown finding kind {name!r}{hint}; known kinds: all, default, {', '.join(KINDS)}"
            )
    return tuple(dict.fromkeys(kinds))


# ----------------------------------------------------------------------------------------------
# What the population looks like


@dataclass
class FieldStats:
    """How one field path looks across the ok samples."""

    present: int = 0  # samples where it exists and is not None
    classes: Counter[str] = field(default_factory=Counter)
    shapes: Counter[tuple[int, ...]] = field(default_factory=Counter)
    dtypes: Counter[str] = field(default_factory=Counter)
    lengths: Counter[int] = field(default_factory=Counter)
    types: Counter[str] = field(default_factory=Counter)


@dataclass(frozen=True)
class Family:
    """The ok samples of one structure family: those whose sample value batches the same way
    (dicts, tuples, tensors, ...). The majority of a family defines the fields its members need."""

    ok: int
    fields: dict[str, FieldStats]
    median_nbytes: float | None


@dataclass(frozen=True)
class Population:
    ok: int
    fields: dict[str, FieldStats]
    median_nbytes: float | None
    median_duration: float | None
    p99_duration: float | None
    families: dict[str, Family] = field(default_factory=dict)

    def family(self, name: str) -> Family:
        """The family of that name; the whole population when the index holds no such family."""
        return self.families.get(name) or Family(self.ok, self.fields, self.median_nbytes)


def population(db: Any) -> Population:
    """Majorities per field, median size and duration percentiles over the ok samples, overall and
    per structure family (a mostly-dict dataset with a few tuples and Nones is judged dict by dict).

    A sharded scan builds the same value from its shard files' summaries instead
    (datalint/scan/summaries.py)."""
    tally = tally_signatures(index_population.ok_signature_counts(db))
    sizes = _quantiles(db, "nbytes", (0.5,))
    durations = _quantiles(db, "duration", (0.5, 0.99))
    medians = _family_medians(db, tally.root_types, sizes[0])
    return population_of(tally, sizes[0], durations[0], durations[1], medians)


@dataclass(frozen=True)
class SignatureTally:
    """The ok samples counted by signature: the fields overall and per family, and the root types
    (the sample's own type) each family is made of."""

    ok: int
    fields: dict[str, FieldStats]
    families: dict[str, tuple[int, dict[str, FieldStats]]]
    root_types: dict[str, set[str | None]]


def tally_signatures(counts: Iterable[tuple[str | None, int]]) -> SignatureTally:
    """Fold (signature text, ok samples) pairs, in the index's GROUP BY order, into a tally."""
    fields: dict[str, FieldStats] = {}
    grouped: dict[str, tuple[int, dict[str, FieldStats]]] = {}
    root_types: dict[str, set[str | None]] = {}
    ok = 0
    for text, count in counts:
        ok += count
        nodes = flatten(json.loads(text) if text else None)
        name = family_name(nodes)
        members, family_fields = grouped.get(name, (0, {}))
        root = nodes.get("")
        root_types.setdefault(name, set()).add(root.get("type") if root is not None else None)
        grouped[name] = (members + count, family_fields)
        for path, node in nodes.items():
            _add_node(fields.setdefault(path, FieldStats()), node, count)
            _add_node(family_fields.setdefault(path, FieldStats()), node, count)
    return SignatureTally(ok, fields, grouped, root_types)


def population_of(
    tally: SignatureTally,
    median_nbytes: float | None,
    median_duration: float | None,
    p99_duration: float | None,
    family_medians: dict[str, float | None],
) -> Population:
    families = {
        name: Family(members, family_fields, family_medians.get(name))
        for name, (members, family_fields) in tally.families.items()
    }
    return Population(
        ok=tally.ok,
        fields=tally.fields,
        median_nbytes=median_nbytes,
        median_duration=median_duration,
        p99_duration=p99_duration,
        families=families,
    )


def family_name(nodes: dict[str, dict[str, Any]]) -> str:
    """The structure family of a flattened signature: how default_collate treats the sample itself."""
    root = nodes.get("")
    return collate_class(root) if root is not None else "unknown"


def _family_medians(
    db: Any, types: dict[str, set[str | None]], overall: float | None
) -> dict[str, float | None]:
    """Median nbytes per structure family, in one read of the index (one family: the overall one)."""
    if len(types) <= 1:
        return {name: overall for name in types}
    import numpy as np

    family_of = {root: name for name, roots in types.items() for root in roots}
    sizes: dict[str, list[float]] = {name: [] for name in types}
    for root, nbytes in index_population.ok_sizes_by_root_type(db):
        name = family_of.get(root)
        if name is not None:
            sizes[name].append(nbytes)
    return {
        name: float(np.quantile(np.asarray(values), 0.5, method="inverted_cdf")) if values else None
        for name, values in sizes.items()
    }


def _add_node(stats: FieldStats, node: dict[str, Any], count: int) -> None:
    cls = collate_class(node)
    stats.types[node.get("type", "?")] += count
    if cls == "none":
        return
    stats.present += count
    stats.classes[cls] += count
    if "shape" in node:
        stats.shapes[tuple(node["shape"])] += count
    if "dtype" in node:
        stats.dtypes[node["dtype"]] += count
    if "length" in node:
        stats.lengths[node["length"]] += count


def _quantiles(db: Any, column: str, qs: Sequence[float]) -> list[float | None]:
    # One read of the column into an array: cheaper than one ORDER BY per quantile over 1M rows.
    import numpy as np

    cursor = index_population.ok_values(db, column)
    values = np.fromiter((row[0] for row in cursor), dtype=np.float64)
    if values.size == 0:
        return [None for _ in qs]
    return [float(v) for v in np.quantile(values, qs, method="inverted_cdf")]


def flatten(signature: dict[str, Any] | None, path: str = "") -> dict[str, dict[str, Any]]:
    """path -> node for the sample ("") and every nested field ("image", "target.boxes", "1")."""
    if signature is None:
        return {}
    nodes = {path: signature}
    for name, child in (signature.get("fields") or {}).items():
        nodes.update(flatten(child, f"{path}.{name}" if path else name))
    return nodes


def collate_class(node: dict[str, Any]) -> str:
    """How default_collate treats a value: tensor, array, number, string, mapping, sequence,
    none, or uncollatable."""
    kind = node.get("type", "")
    if kind == "Tensor":
        return "tensor"
    if kind == "ndarray":
        dtype = str(node.get("dtype", ""))
        return "uncollatable" if dtype == "object" or dtype[1:2] in ("U", "S", "V") else "array"
    if kind in ("int", "float", "bool") or (
        kind.startswith("numpy.") and node.get("dtype", "")[:1] in "biuf"
    ):
        return "number"
    if kind in ("str", "bytes", "numpy.str_", "numpy.bytes_"):
        return "string"
    if kind == "NoneType":
        return "none"
    if "fields" in node:
        return "sequence" if "length" in node else "mapping"
    return "uncollatable"


def _describe_value(node: dict[str, Any]) -> str:
    kind = node.get("type", "?")
    if kind == "ndarray" and collate_class(node) == "uncollatable":
        return f"a numpy array of dtype {node.get('dtype')}"
    if kind == "NoneType":
        return "None"
    cls = collate_class(node)
    return f"a {kind}" if cls in ("mapping", "sequence", "uncollatable") else _CLASS_NAMES[cls]


# ----------------------------------------------------------------------------------------------
# From rows to findings


def derive_findings(
    db: Any, options: PolicyOptions, peers: Population | None = None, *, keep_groups: bool = False
) -> list[Finding]:
    """Every finding for every sample in the index, sorted by index and kind.

    `keep_groups`: update the near-duplicate groups stored in the index instead of finding them
    from scratch (a scan does; datalint/scan/hash_groups.py)."""
    from datalint.index.store import iter_samples

    peers = peers or population(db)
    judge = _SignatureJudge(peers, options)
    findings: list[Finding] = []
    where, parameters = _candidate_filter(peers, judge, options, db)
    for row in iter_samples(db, SAMPLE_PASS_COLUMNS, where, raw=("signature",), parameters=parameters):
        details: dict[str, list[str]] = {}
        for kind, detail in sample_findings(row, peers, judge, options):
            details.setdefault(kind, []).append(detail)
        for kind, parts in details.items():
            findings.append(Finding(row["idx"], kind, "; ".join(dict.fromkeys(parts)), kind in options.kinds))
    # Image files judged against the whole index: duplicates (content hash), tiny, extreme aspect.
    found = [*image_index_findings(db, shape_thresholds(options)), *index_wide_findings(db)]
    findings.extend(Finding(idx, kind, text, kind in options.kinds) for idx, kind, text in found)
    findings.extend(
        Finding(idx, kind, text, kind in options.kinds)
        for idx, kind, text in quality_index_findings(db, options, keep_groups=keep_groups)
    )
    return _merged(with_failures(findings, db))


def with_failures(findings: list[Finding], db: Any) -> list[Finding]:
    """`findings` with each acknowledged training failure as a quarantined `error` finding that says
    both facts ("failed in training 3 times ...; ok when scanned"): a scan never clears one."""
    from datalint.index import failures as kept

    failures = kept.active(db)
    if not failures:
        return findings
    scanned = index_population.scanned_statuses(db, [failure.index for failure in failures])
    errors = {f.idx: n for n, f in enumerate(findings) if f.kind == "error"}
    result = list(findings)
    for failure in failures:
        said = kept.failure_detail(failure, scanned.get(failure.index))
        at = errors.get(failure.index)
        if at is None:
            result.append(Finding(failure.index, "error", said, True))
        elif said not in result[at].detail:
            result[at] = Finding(failure.index, "error", f"{result[at].detail}; {said}", True)
    return result


# What the per-sample pass of `derive_findings` reads of each row.
SAMPLE_PASS_COLUMNS = (
    "idx", "status", "duration", "nbytes", "signature", "non_finite", "requires_grad", "non_cpu", "fd_delta",
    "labels", "info", "reported", "error_type", "error_message",
)  # fmt: skip


def _merged(findings: list[Finding]) -> list[Finding]:
    """One finding per (index, kind) (a mode-L `grayscale` and a visually grey one say it once), and
    no relative kind beside its fixed counterpart (`odd_size` beside `tiny`: `kinds.SAID_BY`)."""
    merged: dict[tuple[int, str], Finding] = {}
    for finding in findings:
        merged.setdefault((finding.idx, finding.kind), finding)
    return sorted(
        finding
        for (idx, kind), finding in merged.items()
        if kind not in SAID_BY or (idx, SAID_BY[kind]) not in merged
    )


# ----------------------------------------------------------------------------------------------
# Image quality, near-duplicates and leaks, judged over the whole index (scores in samples.info.quality)


def quality_thresholds(options: PolicyOptions) -> quality.QualityThresholds:
    return quality.QualityThresholds().with_overrides(dict(options.thresholds))


def shape_thresholds(options: PolicyOptions) -> ShapeThresholds:
    """`tiny` and `extreme_aspect`: fixed limits, overridden like the quality ones (`--threshold tiny=16`)."""
    given = dict(options.thresholds)
    default = ShapeThresholds()
    return ShapeThresholds(
        min_side=int(given.get("tiny", default.min_side)),
        max_aspect=float(given.get("extreme_aspect", default.max_aspect)),
    )


@dataclass(frozen=True)
class ThresholdRange:
    """The values a limit can take: `--threshold` and `[tool.datalint.scan.thresholds]` check the same."""

    low: float
    high: float = math.inf
    whole: bool = False  # a whole number (a hash distance, pixels)
    above_low: bool = False  # `low` itself is not allowed
    meaning: str = ""

    def allowed(self) -> str:
        kind = "a whole number" if self.whole else "a number"
        if self.high == math.inf:
            return f"{kind} {'above' if self.above_low else 'of at least'} {self.low:g}"
        return f"{kind} from {self.low:g} to {self.high:g}"

    def fits(self, value: float) -> bool:
        if not math.isfinite(value) or (self.whole and value != int(value)):
            return False
        above = value > self.low if self.above_low else value >= self.low
        return above and value <= self.high  # nan fits nothing


# Every limit the policy has, with its range; the names are the kinds they judge (and outlier_mads).
THRESHOLDS: dict[str, ThresholdRange] = {
    "dark": ThresholdRange(0, 1, meaning="highlights (99th-percentile luminance) under it"),
    "light": ThresholdRange(0, 1, meaning="shadows (1st-percentile luminance) over it"),
    "blurry": ThresholdRange(0, meaning="focus (1 at the edge of looking blurred) under it"),
    "low_information": ThresholdRange(0, 8, meaning="entropy of the grey histogram (bits) under it"),
    "grayscale": ThresholdRange(0, 1, meaning="colour_share (colorfulness over the tonal range) under it"),
    "outlier_mads": ThresholdRange(0, above_low=True, meaning="robust deviations (relative limits)"),
    "odd_size": ThresholdRange(0, above_low=True, meaning="robust deviations of log size"),
    "odd_aspect": ThresholdRange(
        0, above_low=True, meaning="robust deviations of log aspect (long side / short side)"
    ),
    "near_duplicate": ThresholdRange(0, 32, whole=True, meaning="hash distance (bits of 64), at most"),
    "tiny": ThresholdRange(0, whole=True, meaning="a side shorter than this many pixels (0: off)"),
    "extreme_aspect": ThresholdRange(1, meaning="one side more than this many times the other"),
}  # fmt: skip


def threshold_problem(name: str, value: Any) -> str | None:
    """What is wrong with one limit (`None` when it can be used), worded for `--threshold` and the file."""
    if name not in THRESHOLDS:
        return f"{name!r} is not a limit{did_you_mean(name, THRESHOLDS)}; the limits: {', '.join(THRESHOLDS)}"
    allowed = THRESHOLDS[name]
    if isinstance(value, bool) or not isinstance(value, int | float) or not allowed.fits(float(value)):
        return f"{name} must be {allowed.allowed()}, got {value!r}"
    return None


def parse_thresholds(items: Iterable[str] | None) -> tuple[tuple[str, float], ...]:
    """`["dark=0.1", "blurry=0.3"]` -> pairs; an unknown kind, a non-number or one out of range is a
    usage error."""
    pairs: list[tuple[str, float]] = []
    for item in items or ():
        for part in (piece.strip() for piece in item.split(",")):
            if not part:
                continue
            name, equals, value = part.partition("=")
            name = name.strip()
            if not equals or name not in THRESHOLDS:
                raise UsageError(
                    f"--threshold {part!r}: expected KIND=NUMBER with KIND one of {', '.join(THRESHOLDS)}"
                    + did_you_mean(name, THRESHOLDS)
                )
            try:
                number = float(value)
            except ValueError:
                raise UsageError(f"--threshold {part!r}: {value.strip()!r} is not a number") from None
            problem = threshold_problem(name, number)
            if problem is not None:
                raise UsageError(f"--threshold {part!r}: {problem}")
            pairs.append((name, number))
    return tuple(pairs)


def merged_thresholds(*layers: Iterable[tuple[str, float]]) -> tuple[tuple[str, float], ...]:
    """Limits laid over each other kind by kind, the last layer winning (default < file < flag)."""
    merged: dict[str, float] = {}
    for layer in layers:
        merged.update(layer)
    return tuple(merged.items())


def quality_rows(db: Any) -> list[tuple[int, str, dict[str, Any]]]:
    """(index, key, scores) of every scored, undamaged image.

    One scan reads them three times (the findings, the limits, the population warnings), and each
    read parses every image's JSON: the rows are kept with the index's state they were read at and
    read again only once anything wrote to the index.
    """
    state = _index_state(db)
    cached = _QUALITY_ROWS.get(db) if state is not None else None
    if cached is not None and cached[0] == state:
        return cached[1]
    # One pass over the images for the scores, the shapes (`image_shapes`) and the content hashes
    # (`image_index_findings`); the unscored are left out here, not in SQL, where a WHERE on the
    # scores would extract them twice.
    read = index_population.ok_images(db)
    found = [(idx, key, text) for idx, key, text, _digest, _w, _h in read if text is not None]
    rows = [
        (idx, key if type(key) is str else _image_key(idx, key), quality.with_derived_scores(parsed))
        for (idx, key, text), parsed in zip(found, _parsed_scores(found), strict=True)
    ]
    if state is not None:
        shapes = {
            idx: (int(w), int(h))
            for idx, _key, _text, digest, w, h in read
            if digest is not None and w is not None and w > 0 and h
        }
        _QUALITY_ROWS[db] = (state, rows)
        _IMAGE_SHAPES[db] = (state, shapes)
        _IMAGE_FILES[db] = (
            state,
            [(idx, key, digest, w, h) for idx, key, _t, digest, w, h in read if digest is not None],
        )
    return rows


def image_index_findings(db: Any, thresholds: ShapeThresholds) -> list[tuple[int, str, str]]:
    """`images.index_findings` (tiny, extreme aspect, duplicate) from the images `quality_rows`
    read, so the scan's findings cost no second pass of the index's JSON; read from SQL when
    that read cannot be kept (nothing to tell a later write by)."""
    quality_rows(db)
    state = _index_state(db)
    cached = _IMAGE_FILES.get(db) if state is not None else None
    if cached is None or cached[0] != state:
        return index_findings(db, thresholds)
    import numpy as np

    files = cached[1]
    try:  # a missing side is NaN, past no test, as NULL is in SQL
        sides = np.array([(w, h) for _idx, _key, _digest, w, h in files], dtype=np.float64).reshape(-1, 2)
    except (TypeError, ValueError):  # a side that is not a number: SQL compares it its own way
        return index_findings(db, thresholds)
    # The same test as SQL's: a side under the least, or the longer over max_aspect times the shorter.
    short, long = sides.min(axis=1), sides.max(axis=1)
    odd = (short < thresholds.min_side) | (long > thresholds.max_aspect * short)
    found: list[tuple[int, str, str]] = []
    for position in np.flatnonzero(odd).tolist():
        idx, _key, _digest, w, h = files[position]
        found.extend((idx, f.kind, f.detail) for f in shape_findings(int(w), int(h), thresholds))
    from datalint.index.store import read_key

    counts = Counter(digest for _idx, _key, digest, _w, _h in files)
    hashes = {
        idx: (read_key(key) or f"#{idx}", digest) for idx, key, digest, _w, _h in files if counts[digest] > 1
    }
    found.extend((idx, f.kind, f.detail) for idx, f in duplicate_findings(hashes).items())
    return sorted(found)


def index_wide_findings(db: Any) -> list[tuple[int, str, str]]:
    """What one SQL pass over the whole index decides: `duplicate_key`, each sample whose key another
    sample has too (a keyed list could not tell them apart). `summary_findings` runs this same
    function, so both ways of judging an index agree."""
    from itertools import groupby

    found: list[tuple[int, str, str]] = []
    for stored, rows in groupby(index_population.shared_keys(db), key=operator.itemgetter(1)):
        indexes = [idx for idx, _key in rows]
        name = shown_name(_image_key(indexes[0], stored))
        shown = name if name.startswith("$'") else f"'{name}'"
        for idx in indexes:
            others = [other for other in indexes[:4] if other != idx][:3]
            more = len(indexes) - 1 - len(others)
            listed = ", ".join(f"#{other}" for other in others) + (f" and {more:,} more" if more else "")
            detail = f"key {shown} names {len(indexes):,} samples (also {listed})"
            found.append((idx, "duplicate_key", detail))
    return found


def _parsed_scores(found: list[tuple[Any, Any, Any]]) -> list[Any]:
    """Each row's scores parsed; as one JSON array when every one is an object's text (a call of
    json.loads per image costs more than the parsing itself), else one by one."""
    texts = [text for _idx, _key, text in found]
    if all(type(text) is str and text.startswith("{") for text in texts):
        try:
            parsed = json.loads("[" + ",".join(texts) + "]")
        except ValueError:
            parsed = None
        if isinstance(parsed, list) and len(parsed) == len(texts):
            return parsed
    return [json.loads(text) for text in texts]


_QUALITY_ROWS: weakref.WeakKeyDictionary[Any, tuple[tuple[int, int], list[Any]]] = weakref.WeakKeyDictionary()


def _index_state(db: Any) -> tuple[int, int] | None:
    """What changes whenever the index does: this connection's writes (`total_changes`) and other
    connections' commits (`data_version`); None for an object that cannot hold a cache entry."""
    connection = getattr(db, "conn", None)
    if connection is None:
        return None
    try:
        weakref.ref(db)
    except TypeError:
        return None
    return connection.total_changes, connection.execute("PRAGMA data_version").fetchone()[0]


def _image_key(idx: int, stored: Any) -> str:
    """A sample's key as the dataset gave it (a name that is not UTF-8 is stored as its bytes), or #idx."""
    from datalint.index.store import read_key

    key = read_key(stored)
    return key if key is not None else f"#{idx}"


def quality_limits(db: Any, options: PolicyOptions) -> dict[str, quality.KindLimit]:
    """The limit each scored kind is judged with on this index (the report draws them); kept, as
    the rows are, while nothing writes to the index."""
    state = _index_state(db)
    cached = _QUALITY_LIMITS.get(db) if state is not None else None
    if cached is not None and cached[0] == (state, options):
        return cached[1]
    rows = quality_rows(db)
    columns = score_columns(db, rows)
    if columns is not None:
        scores = {name: column.tolist() for name, column in columns.items()}
    else:
        scores = {
            name: [row[2][name] for row in rows if row[2].get(name) is not None]
            for name in quality.SCORE_NAMES
        }
    limits = quality.kind_limits(scores, quality_thresholds(options), fixed=dict(options.thresholds))
    if state is not None:
        _QUALITY_LIMITS[db] = ((state, options), limits)
    return limits


def score_columns(db: Any, rows: list[tuple[int, str, dict[str, Any]]]) -> dict[str, Any] | None:
    """Each score of `rows` (`quality_rows(db)`) as a float64 array, in the rows' order, read in
    one pass and kept while the index is unchanged; None unless every image has every score, a
    number (then the callers take the scores image by image, as they must skip the missing)."""
    import numpy as np

    state = _index_state(db)
    cached = _SCORE_COLUMNS.get(db) if state is not None else None
    if cached is not None and cached[0] == state and cached[1] is rows:
        return cached[2]
    getter = operator.itemgetter(*quality.SCORE_NAMES)
    try:
        table = np.array([getter(scores) for _idx, _key, scores in rows], dtype=np.float64)
    except (KeyError, TypeError, ValueError):
        table = None
    columns = None
    if (
        table is not None
        and table.shape == (len(rows), len(quality.SCORE_NAMES))
        and not np.isnan(table).any()
    ):
        columns = {name: table[:, order] for order, name in enumerate(quality.SCORE_NAMES)}
    if state is not None:
        _SCORE_COLUMNS[db] = (state, rows, columns)
    return columns


_SCORE_COLUMNS: weakref.WeakKeyDictionary[Any, tuple[Any, Any, Any]] = weakref.WeakKeyDictionary()
_IMAGE_SHAPES: weakref.WeakKeyDictionary[Any, tuple[tuple[int, int], dict[int, tuple[int, int]]]] = (
    weakref.WeakKeyDictionary()
)
_QUALITY_LIMITS: weakref.WeakKeyDictionary[Any, tuple[Any, dict[str, quality.KindLimit]]] = (
    weakref.WeakKeyDictionary()
)
_IMAGE_FILES: weakref.WeakKeyDictionary[Any, tuple[tuple[int, int], list[tuple[Any, ...]]]] = (
    weakref.WeakKeyDictionary()
)


def quality_index_findings(
    db: Any, options: PolicyOptions, *, keep_groups: bool = False
) -> list[tuple[int, str, str]]:
    """Scored kinds against the population's limits, odd sizes and shapes, near-duplicates, leaks."""
    thresholds = quality_thresholds(options)
    rows = quality_rows(db)
    found: list[tuple[int, str, str]] = []
    if len(rows) >= options.min_peers:
        found.extend(_past_limits(rows, quality_limits(db, options), score_columns(db, rows)))
        found.extend(quality.shape_outliers(image_shapes(db), thresholds, options.min_peers))
    hashed = [(idx, key, scores["phash"]) for idx, key, scores in rows if scores.get("phash")]
    grouping = hash_groups.kept_grouping(db) if keep_groups else None
    label = positions.read(db).shown  # a group is named by its representative's position
    found.extend(quality.near_duplicate_findings(hashed, thresholds.near_duplicate, grouping, label))
    if options.against:
        found.extend(_leaks(db, options.against, thresholds.near_duplicate))
    return found


def _past_limits(
    rows: list[tuple[int, str, dict[str, Any]]],
    limits: dict[str, quality.KindLimit],
    known: dict[str, Any] | None = None,
) -> list[tuple[int, str, str]]:
    """(index, kind, detail) for each image whose score is past its kind's limit, image by image
    and in the order of the kinds. The scores are compared as arrays, one per score, and a detail
    is written only for an image past a limit: most images are past none."""
    import numpy as np

    columns: dict[str, Any] = dict(known or {})  # `score_columns`, when every image has every score
    past: list[tuple[int, int, str, str]] = []  # (row, the kind's order, kind, detail)
    for order, (kind, limit) in enumerate(limits.items()):
        if limit.score not in columns:  # a missing score is NaN, past no limit
            column = [scores.get(limit.score) for _, _, scores in rows]
            columns[limit.score] = np.array(column, dtype=np.float64)
        values = columns[limit.score]
        beyond = values > limit.limit if limit.direction == "high" else values < limit.limit
        side = "over" if limit.direction == "high" else "under"
        for row in np.flatnonzero(beyond).tolist():
            value = rows[row][2][limit.score]
            detail = (
                f"{limit.score} {value:.3g}, {side} the limit {limit.limit:.3g} (median {limit.median:.3g})"
            )
            past.append((row, order, kind, detail))
    past.sort()
    return [(rows[row][0], kind, detail) for row, _order, kind, detail in past]


def image_shapes(db: Any) -> dict[int, tuple[int, int]]:
    """(width, height) of every undamaged image: the population `odd_size` and `odd_aspect` judge.
    Read with the scores when `quality_rows` read them and nothing has written since."""
    state = _index_state(db)
    cached = _IMAGE_SHAPES.get(db) if state is not None else None
    if cached is not None and cached[0] == state:
        return cached[1]
    return {idx: (int(w), int(h)) for idx, w, h in index_population.image_shapes(db) if w and h}


def hashed_images(db: Any) -> list[tuple[int, str, str | None, str | None]]:
    """(index, key, sha256, phash) of every undamaged image."""
    rows = index_population.hashed_images(db)
    return [(idx, _image_key(idx, key), digest, value) for idx, key, digest, value in rows]


def _leaks(db: Any, against: str, radius: int) -> list[tuple[int, str, str]]:
    from pathlib import Path

    from datalint.index.store import open_index

    other = open_index(Path(against), create=False)
    try:
        theirs = [(key, digest, value) for _idx, key, digest, value in hashed_images(other)]
    finally:
        other.close()
    return quality.leak_findings(hashed_images(db), theirs, radius, against)


def population_warnings(db: Any, options: PolicyOptions, share: float = 0.5) -> tuple[str, ...]:
    """A line for each quality kind that most images are past the absolute limit of: a pipeline bug
    (a transform that blacks out every image, a normalisation gone wrong), not bad samples."""
    return limit_warnings(quality_limits(db, options), options, share)


def limit_warnings(
    limits: dict[str, quality.KindLimit], options: PolicyOptions, share: float = 0.5
) -> tuple[str, ...]:
    """`population_warnings` from the limits, however they were found (the index, or its summary)."""
    notes = []
    for kind, limit in limits.items():
        if limit.total >= options.min_peers and limit.past_absolute > share * limit.total:
            notes.append(
                f"{limit.past_absolute} of {limit.total} images are {kind} ({limit.score} past "
                f"{getattr(quality_thresholds(options), kind):g}): most of the population, so look at the "
                "pipeline (a transform or normalisation) rather than at single samples"
            )
    return tuple(notes)


def _candidate_filter(
    peers: Population, judge: _SignatureJudge, options: PolicyOptions, db: Any
) -> tuple[str, list[Any]]:
    """A WHERE clause (and its parameters) that skips rows no rule can flag: a clean index is cheap.

    Every value is a parameter, never text in the SQL: a limit may be `inf`, a signature anything.
    """
    if options.require:  # every sample is judged for a --require field
        return "", []
    return candidate_clauses(peers, options, judge.bad_signatures(db))


def candidate_clauses(
    peers: Population, options: PolicyOptions, bad_signatures: list[str] | None
) -> tuple[str, list[Any]]:
    """`_candidate_filter` once the signatures with findings are known (None: too many to list):
    the rows where a clause of some kind of the registry holds (datalint/index/kinds.py)."""
    if bad_signatures is None or options.require:
        return "", []
    values = {
        "largest": _smallest_size_limit(peers, options),
        "slowest": slow_limit(peers, options),
        "signatures": bad_signatures,
        "num_classes": options.num_classes,
    }
    return candidate_where(values)


def sample_findings(
    row: dict[str, Any], peers: Population, judge: _SignatureJudge, options: PolicyOptions
) -> Iterator[tuple[str, str]]:
    """(kind, detail) pairs for one sample row."""
    status = row["status"]
    if status in ("error", "crash", "timeout"):
        yield status, _failure_detail(row)
    for reported in row.get("reported") or ():
        yield str(reported.get("kind")), str(reported.get("detail", ""))
    if status != "ok":
        return
    signature_text = row.get("signature")
    nodes = judge.nodes(signature_text) if signature_text else {}
    # --require and --label fields are checked on every sample, whatever its family or the
    # population looks like; the structure judge then leaves those paths to them.
    absolute = [*_required_fields(nodes, options), *_label_findings(row.get("labels"), nodes, options)]
    said = {path for kind, _, path in absolute if kind == "missing_field"}
    if signature_text is not None:
        for kind, detail, path in judge.findings(signature_text):
            if not (kind == "missing_field" and path in said):
                yield kind, detail
    yield from _value_findings(row, row.get("info") or {})
    yield from ((kind, detail) for kind, detail, _ in absolute)
    yield from _size_and_speed(row, peers, options, family_name(nodes))


def _failure_detail(row: dict[str, Any]) -> str:
    detail = f"{row.get('error_type')}: {row.get('error_message') or ''}".rstrip(": ")
    where = (row.get("info") or {}).get("where")
    if where and row["status"] != "timeout":  # a timeout's message already says where it hung
        detail += f" (at {where})"
    return detail


def _value_findings(row: dict[str, Any], info: dict[str, Any]) -> Iterator[tuple[str, str]]:
    if row.get("non_finite"):
        fields = info.get("non_finite_fields") or {}
        where = ", ".join(f"{_field_name(path)} ({count})" for path, count in fields.items())
        if len(fields) == 1:
            where = _field_name(next(iter(fields)))
        yield "non_finite", f"{row['non_finite']} NaN/Inf value(s)" + (f" in {where}" if where else "")
    if row.get("requires_grad"):
        where = ", ".join(_field_name(p) for p in info.get("requires_grad_fields") or ()) or "a tensor"
        yield "requires_grad", f"{where}: a tensor that requires grad (collate cannot stack it in a worker)"
    if row.get("non_cpu"):
        where = ", ".join(_field_name(p) for p in info.get("non_cpu_fields") or ()) or "a tensor"
        yield "non_cpu_tensor", f"{where}: a tensor not on the CPU (move it in the training loop)"
    if (row.get("fd_delta") or 0) > 0:
        yield "fd_leak", f"{row['fd_delta']} file descriptor(s) left open"


def _required_fields(
    nodes: dict[str, dict[str, Any]], options: PolicyOptions
) -> Iterator[tuple[str, str, str]]:
    for path in options.require:
        node = nodes.get(path)
        if node is None or collate_class(node) == "none":
            yield "missing_field", f"required field {path!r} is {'None' if node else 'missing'}", path


def _label_findings(
    labels: dict[str, Any] | None, nodes: dict[str, dict[str, Any]], options: PolicyOptions
) -> Iterator[tuple[str, str, str]]:
    for name, values in (labels or {}).items():
        if values is None:
            if name not in options.require:  # already said as a required field
                state = "None" if name in nodes else "missing"
                yield "missing_field", f"label field {name!r} is {state}", name
            continue
        if options.num_classes is None:
            continue
        bad = [v for v in values if _out_of_range(v, options.num_classes, options.ignore_index)]
        if bad:
            shown = ", ".join(str(v) for v in bad[:8]) + (" ..." if len(bad) > 8 else "")
            yield "label_out_of_range", f"label {name!r} = {shown} outside [0, {options.num_classes})", name


def _out_of_range(value: Any, num_classes: int, ignore_index: int | None) -> bool:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    if isinstance(value, float) and not value.is_integer():
        return False  # a regression target, not a class index
    if ignore_index is not None and value == ignore_index:
        return False
    return value < 0 or value >= num_classes


def size_limit(peers: Population, options: PolicyOptions, family: str | None = None) -> float | None:
    """Bytes above which a sample is "oversized": --max-bytes, or `oversize_factor` x the median
    size once there are `min_peers` measured samples, whichever is lower; None when neither applies.

    With `family`, the median is that structure family's when it has `min_peers` members (a few
    label-only tuples beside image dicts must not make every image "oversized"), else the index's.
    """
    limits = []
    if options.max_bytes is not None:
        limits.append(float(options.max_bytes))
    median = _median_nbytes(peers, options, family)
    if median:
        limits.append(options.oversize_factor * median)
    return min(limits) if limits else None


def _median_nbytes(peers: Population, options: PolicyOptions, family: str | None) -> float | None:
    if family is None and peers.families:  # the limit most samples are held to (the report draws it)
        family = max(peers.families, key=lambda name: peers.families[name].ok)
    members = peers.families.get(family) if family is not None else None
    if members is not None and members.ok >= options.min_peers:
        return members.median_nbytes
    return peers.median_nbytes if peers.ok >= options.min_peers else None


def _smallest_size_limit(peers: Population, options: PolicyOptions) -> float | None:
    limits = [size_limit(peers, options, name) for name in peers.families or (None,)]
    known = [limit for limit in limits if limit is not None]
    return min(known) if known else None


def slow_limit(peers: Population, options: PolicyOptions) -> float | None:
    """Seconds from which a sample is "slow": the largest of `slow_fraction` x the timeout,
    `slow_factor` x the median duration and the p99 duration; None with fewer than `min_peers`."""
    if peers.ok < options.min_peers or peers.p99_duration is None or peers.median_duration is None:
        return None
    return max(
        options.slow_fraction * options.timeout,
        options.slow_factor * peers.median_duration,
        peers.p99_duration,
    )


def _size_and_speed(
    row: dict[str, Any], peers: Population, options: PolicyOptions, family: str
) -> Iterator[tuple[str, str]]:
    nbytes = row.get("nbytes")
    limit = size_limit(peers, options, family)
    median = _median_nbytes(peers, options, family)
    if nbytes is not None and limit is not None and nbytes > limit:
        relative = f", {nbytes / median:.0f}x the median {human_bytes(median)}" if median else ""
        yield "oversized", f"{human_bytes(nbytes)}{relative}"
    duration = row.get("duration")
    slow = slow_limit(peers, options)
    if duration is not None and slow is not None and duration >= slow:
        yield "slow", f"{duration:.2f} s (median {peers.median_duration or 0:.4f} s)"


def _field_name(path: str) -> str:
    if path == "":
        return "the sample"
    return f"position {path}" if path.isdigit() else f"field {path!r}"


class _SignatureJudge:
    """Findings that depend only on a sample's structure, computed once per distinct signature.

    The sample itself is judged against the whole index (a tuple where most samples are dicts is
    uncollatable); its fields against its own structure family, so a few odd samples never change
    what the rest are expected to hold.
    """

    def __init__(self, peers: Population, options: PolicyOptions) -> None:
        self.peers = peers
        self.options = options
        self.cache: dict[str, list[tuple[str, str, str]]] = {}
        self.flattened: dict[str, dict[str, dict[str, Any]]] = {}

    def nodes(self, text: str) -> dict[str, dict[str, Any]]:
        """The flattened signature (path -> node), parsed once per distinct signature."""
        found = self.flattened.get(text)
        if found is None:
            found = self.flattened[text] = flatten(json.loads(text))
        return found

    def findings(self, text: str) -> list[tuple[str, str, str]]:
        """(kind, detail, field path) for a signature."""
        found = self.cache.get(text)
        if found is None:
            found = self.cache[text] = list(self._judge(self.nodes(text)))
        return found

    def bad_signatures(self, db: Any, limit: int = 2000) -> list[str] | None:
        """The distinct ok signatures with findings, or None when there are too many to list."""
        bad: list[str] = []
        for (text,) in index_population.ok_signatures(db):
            if text and self.findings(text):
                bad.append(text)
                if len(bad) > limit:
                    return None
        return bad

    def _majority(self, counter: Counter[Any], total: int) -> Any:
        if not counter or total <= 0:
            return None
        value, count = counter.most_common(1)[0]
        return value if count / total > self.options.majority else None

    def _peers(self, count: int) -> int:
        return count if count >= self.options.min_peers else 0  # too few: only absolute rules apply

    def _judge(self, nodes: dict[str, dict[str, Any]]) -> Iterator[tuple[str, str, str]]:
        root = nodes.get("")
        if root is None or collate_class(root) == "none":
            yield "uncollatable", "the sample is None", ""
            return
        yield from self._judge_node("", root, self.peers.fields.get(""), self._peers(self.peers.ok), None)
        family = self.peers.family(family_name(nodes))
        ok = self._peers(family.ok)
        if not ok:
            return
        reported_missing: list[str] = []
        for path, stats in family.fields.items():
            if not path or stats.present / ok <= self.options.majority:
                continue
            if not self._parent_consistent(path, family):
                continue
            node = nodes.get(path)
            if (node is None or collate_class(node) == "none") and not _under(path, reported_missing):
                reported_missing.append(path)
                share = round(100 * stats.present / ok)
                state = "None" if node is not None else "missing"
                detail = f"{_field_name(path)} is {state} (present in {share}% of samples)"
                yield "missing_field", detail, path
        for path, node in nodes.items():
            if path:
                yield from self._judge_node(path, node, family.fields.get(path), ok, family)

    def _parent_consistent(self, path: str, family: Family) -> bool:
        # Positions of a list whose length varies sample to sample are not fields anyone relies on.
        stats = family.fields.get(path.rpartition(".")[0])
        if stats is None or not stats.lengths:
            return True
        return self._majority(stats.lengths, stats.present) is not None

    def _judge_node(
        self, path: str, node: dict[str, Any], stats: FieldStats | None, ok: int, family: Family | None
    ) -> Iterator[tuple[str, str, str]]:
        cls = collate_class(node)
        if cls == "none":
            return  # a None field most samples fill is a missing_field (above)
        majority = self._majority(stats.classes, stats.present) if stats is not None and ok else None
        if cls == "uncollatable":
            if majority != "uncollatable":  # when most samples are like this, it is the dataset's design
                yield (
                    "uncollatable",
                    f"{_field_name(path)} is {_describe_value(node)}: default_collate cannot batch it",
                    path,
                )
            return
        if stats is None or not ok:
            return
        if (
            family is not None
            and stats.present / ok <= 1 - self.options.majority
            and self._parent_class(path, family) == "mapping"
        ):
            yield "shape_mismatch", f"has {_field_name(path)}, which most samples lack", path
        elif majority is None or cls == majority:
            for kind, detail in self._judge_same_class(path, node, cls, stats):
                yield kind, detail, path
        elif majority != "uncollatable":
            found = f"{_field_name(path)} is {_describe_value(node)}"
            yield "uncollatable", f"{found} where most samples have {_CLASS_NAMES[majority]}", path

    def _judge_same_class(
        self, path: str, node: dict[str, Any], cls: str, stats: FieldStats
    ) -> Iterator[tuple[str, str]]:
        if cls in ("tensor", "array"):
            shape = self._majority(stats.shapes, stats.present)
            if shape is not None and tuple(node.get("shape", ())) != shape:
                yield (
                    "shape_mismatch",
                    (f"{_field_name(path)} has shape {list(node['shape'])}; most samples have {list(shape)}"),
                )
            dtype = self._majority(stats.dtypes, stats.present)
            if dtype is not None and node.get("dtype") != dtype:
                yield (
                    "dtype_mismatch",
                    f"{_field_name(path)} has dtype {node.get('dtype')}; most samples have {dtype}",
                )
        if cls == "sequence":
            length = self._majority(stats.lengths, stats.present)
            if length is not None and node.get("length", length) > length:
                yield (
                    "shape_mismatch",
                    (f"{_field_name(path)} has {node['length']} elements; most samples have {length}"),
                )

    def _parent_class(self, path: str, family: Family) -> str | None:
        stats = family.fields.get(path.rpartition(".")[0])
        return self._majority(stats.classes, stats.present) if stats is not None else None


_CLASS_NAMES = {
    "tensor": "a Tensor", "array": "a numpy array", "number": "a number", "string": "a string",
    "mapping": "a dict", "sequence": "a list or tuple", "uncollatable": "something default_collate rejects",
}  # fmt: skip


def _under(path: str, ancestors: Iterable[str]) -> bool:
    return any(path.startswith(ancestor + ".") for ancestor in ancestors if ancestor)


def dataset_notes(peers: Population, limit: int = 5) -> tuple[str, ...]:
    """Whole-dataset observations that are no single sample's fault (every sample is a PIL image,
    every image has its own size): said once in the summary instead of quarantining everything."""
    notes = []
    for path, stats in peers.fields.items():
        if not stats.present or peers.ok < PolicyOptions.min_peers:
            continue
        where = "the samples" if path == "" else f"field {path!r}"
        top, count = stats.classes.most_common(1)[0]
        if path == "" and count / stats.present <= 0.5:
            total = sum(stats.types.values())
            shares = ", ".join(f"{name} {round(100 * n / total)}%" for name, n in stats.types.most_common(3))
            notes.append(
                f"the samples come in several structures ({shares}) and none is the majority: "
                "default_collate cannot batch them together; return one structure or pass a collate_fn"
            )
        elif top == "uncollatable" and count / stats.present > 0.5:
            kind = stats.types.most_common(1)[0][0]
            notes.append(
                f"most of {where} are {kind}: default_collate cannot batch them; convert them in the dataset "
                "(e.g. to tensors) or pass a collate_fn"
            )
        elif (
            top in ("tensor", "array")
            and stats.shapes
            and stats.shapes.most_common(1)[0][1] / stats.present <= 0.5
        ):
            notes.append(
                f"{where} come in {len(stats.shapes)} different shapes: default_collate cannot stack them; "
                "resize them in the dataset or pad them in a collate_fn"
            )
    return tuple(notes[:limit])


def absent_field_notes(db: Any, peers: Population, options: PolicyOptions) -> tuple[str, ...]:
    """--label and --require fields that no ok sample holds: each such sample is `missing_field`,
    and the summary says once that the name is most likely misspelt, naming the fields there are."""
    if not peers.ok:
        return ()
    absent = [(f"--require {path}", path) for path in options.require if not _held(peers, path)]
    labels = index_population.first_ok_labels(db)
    for name in json.loads(labels) if labels is not None else ():
        path = '$."' + name.replace('"', '""') + '"'
        if not index_population.any_ok_label(db, path) and name not in options.require:
            absent.append((f"--label {name}", name))
    said = "so every sample is missing_field"
    return tuple(
        f"{flag}: no sample has a field {name!r}, {said}; {_fields_hint(peers, name)}"
        for flag, name in absent
    )


def _held(peers: Population, path: str) -> bool:
    stats = peers.fields.get(path)
    return stats is not None and stats.present > 0


def _fields_hint(peers: Population, name: str) -> str:
    import difflib

    parent = name.rpartition(".")[0]
    siblings = [
        path for path, stats in peers.fields.items()
        if path and path.rpartition(".")[0] == parent and stats.present
    ]  # fmt: skip
    close = difflib.get_close_matches(name, siblings, n=3, cutoff=0.6)
    if close:
        return f"did you mean {', '.join(close)}?"
    return f"the samples have: {', '.join(siblings[:12])}" if siblings else "the samples have no named fields"


# ----------------------------------------------------------------------------------------------
# The quarantine list


@dataclass(frozen=True)
class QuarantineEntry:
    """One sample on the quarantine list, its kinds worst first (also a scan summary's worst samples)."""

    index: int
    key: str | None
    kinds: tuple[str, ...]
    detail: str

    def to_dict(self) -> dict[str, Any]:
        """The sample as quarantine.json and `datalint scan --format json` write it."""
        return {"index": self.index, "key": self.key, "kinds": list(self.kinds), "detail": self.detail}


def quarantine_entries(
    findings: Iterable[Finding],
    keys: dict[int, str | None],
    kinds: Sequence[str],
    order: positions.Positions = positions.IDENTITY,
) -> list[QuarantineEntry]:
    """One entry per sample with at least one finding of a quarantined kind, by position: findings
    and `keys` name rows by their idx, and `order` (the index's) gives each row's position."""
    chosen: dict[int, list[Finding]] = {}
    wanted = set(kinds)
    for finding in findings:
        if finding.kind in wanted:
            chosen.setdefault(finding.idx, []).append(finding)
    entries = []
    for row, group in chosen.items():
        group = sorted(group, key=_severity)
        kinds_of, details = tuple(f.kind for f in group), "; ".join(f.detail for f in group)
        entries.append(QuarantineEntry(order.shown(row), keys.get(row), kinds_of, details))
    return sorted(entries, key=operator.attrgetter("index"))


def _severity(finding: Finding) -> tuple[int, str]:
    return severity_rank(finding.kind), finding.kind


def quarantine_document(
    entries: Sequence[QuarantineEntry],
    *,
    dataset: str,
    length: int | None,
    fingerprint: str | None,
    created: str,
    kinds: Sequence[str],
) -> dict[str, Any]:
    """The quarantine.json value (format datalint-quarantine/1)."""
    return {
        "format": quarantine.FORMAT,
        "dataset": dataset,
        "length": length,
        "fingerprint": fingerprint,
        "created": created,
        "policy": list(kinds),
        "samples": [entry.to_dict() for entry in entries],
    }
