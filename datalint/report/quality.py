"""The report's quality views: a gallery per quality kind, sorted by score, under the histogram of
that score with its limit drawn; near-duplicate groups and leak pairs side by side.

The limits are the policy's own (`policy.quality_limits`, `quality.shape_limits`) over the index the
scan judged, with the run's options, so the line drawn is the line that decided the findings. The
page stays small whatever the index holds: a bounded number of previews per kind, group and leak,
then the count left and the query that lists them all.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from datalint.index import kinds, read, report_queries
from datalint.index.report_queries import LEAKS_QUERY, NEAR_DUPLICATES_QUERY, KindSample
from datalint.index.store import read_key
from datalint.report.charts import Threshold, format_count, score_histogram
from datalint.report.index import FlaggedSample, IndexSummary
from datalint.report.markup import Html, el, join
from datalint.report.thumbs import Thumbnail, thumbnail
from datalint.scan import quality
from datalint.text import shown_name

# score -> (how its values read, whether its histogram needs a log x axis)
SCORE_AXES: dict[str, tuple[str, bool]] = {
    "highlights": ("99th-percentile luminance, 0..1", False),
    "shadows": ("1st-percentile luminance, 0..1", False),
    "sharpness": ("Laplacian energy of the normalised thumbnail (log)", True),
    "focus": ("focus: fine detail and energy against their limits, 1 at the edge (log)", True),
    "entropy": ("grey-level entropy, bits", False),
    "colorfulness": ("mean largest channel difference, 0..1", False),
    "colour_share": ("colorfulness over the tonal range", False),
}
SHAPE_AXES = {
    "odd_size": "side (square root of the area, px)",
    "odd_aspect": "aspect (long side / short side)",
}


@dataclass(frozen=True)
class KindView:
    """One quality kind: how many images have it, its most extreme ones, the score's histogram."""

    kind: str
    total: int
    thumbs: tuple[Thumbnail, ...]
    chart: Html
    query: str  # lists every image of the kind, in the gallery's order


@dataclass(frozen=True)
class DuplicateGroup:
    representative: Thumbnail
    members: tuple[Thumbnail, ...]  # the first few, each with its finding's detail
    size: int  # images in the group, the representative included


@dataclass(frozen=True)
class LeakPair:
    ours: Thumbnail
    theirs: Thumbnail
    detail: str | None  # as the index holds it


@dataclass(frozen=True)
class QualityView:
    kinds: tuple[KindView, ...]
    groups: tuple[DuplicateGroup, ...]
    group_total: int
    leaks: tuple[LeakPair, ...]
    leak_total: int
    split: str | None  # the other index (--against), when the scan had one
    db: Path


def read_quality(index: IndexSummary, root: Path | None, per_kind: int) -> QualityView | None:
    """The quality views of an index whose images were scored, or None (a scan with --no-scores,
    a dataset scan without image-like tensors, an index from before the scores)."""
    conn = read.connect(index.path)
    try:
        if not report_queries.has_scores(conn):
            return None
        from datalint.scan import policy

        run = index.scan_run
        options = policy.PolicyOptions.from_dict((run.options.get("policy") if run else None) or {})
        previews = index.is_image_scan
        kinds = [
            *_scored_kinds(conn, options, root if previews else None, per_kind if previews else 0),
            *_shape_kinds(conn, options, root if previews else None, per_kind if previews else 0),
        ]
        groups, group_total = _groups(conn, root, per_kind) if previews else ((), 0)
        split = options.against
        leaks, leak_total = _leaks(conn, root, split, per_kind) if previews and split else ((), 0)
        return QualityView(tuple(kinds), groups, group_total, leaks, leak_total, split, index.path)
    finally:
        conn.close()


def _has_findings(conn: sqlite3.Connection) -> bool:
    return read.has_tables(conn, ("findings",))


def _sample(idx: int, key: Any, kinds: tuple[str, ...] = (), details: tuple[str, ...] = ()) -> FlaggedSample:
    return FlaggedSample(
        idx=idx, key=read_key(key), status="ok", kinds=kinds, details=details, quarantined=False,
        duration=None, nbytes=None, error_type=None, error_message=None, traceback=None, info={},
    )  # fmt: skip


def _scored_kinds(conn: sqlite3.Connection, options: Any, root: Path | None, per_kind: int) -> list[KindView]:
    import numpy as np

    from datalint.scan import policy

    rows = policy.quality_rows(conn)
    limits = policy.quality_limits(conn, options)
    views = []
    for kind, (score, direction) in quality.SCORED_KINDS.items():
        values = np.array([scores[score] for _i, _k, scores in rows if scores.get(score) is not None])
        limit = limits.get(kind)
        side = "above" if direction == "high" else "below"
        drawn = [Threshold(f"{kind} {side}", limit.limit)] if limit is not None else []
        axis, log_x = SCORE_AXES[score]
        chart = score_histogram(
            values,
            title=f"{score}: {axis}",
            fmt=_score_format,
            limits=drawn,
            past=partial(_past, limit=limit) if limit is not None else None,
            log_x=log_x,
        )
        ranked = partial(report_queries.most_scored, conn, kind, score, direction)
        found = _previews(conn, kind, ranked, per_kind, root)
        query = report_queries.scored_kind_query(kind, score, direction)
        views.append(KindView(kind, _count(conn, kind), found, chart, query))
    return views


def _past(values: Any, limit: quality.KindLimit) -> Any:
    return values > limit.limit if limit.direction == "high" else values < limit.limit


def _outside(values: Any, low: float, high: float) -> Any:
    return (values < low) | (values > high)


def _score_format(value: float) -> str:
    return f"{value:.3g}"


def _shape_kinds(conn: sqlite3.Connection, options: Any, root: Path | None, per_kind: int) -> list[KindView]:
    import numpy as np

    from datalint.scan import policy

    shapes = policy.image_shapes(conn)
    limits = quality.shape_limits(shapes, policy.quality_thresholds(options))
    views = []
    for kind, limit in limits.items():
        low, high = limit.band
        if kind == "odd_size":
            values = np.array([(w * h) ** 0.5 for w, h in shapes.values()])
            fmt = format_pixels_side
        else:
            values = np.array([quality.aspect(w, h) for w, h in shapes.values()])
            fmt = _score_format
        chart = score_histogram(
            values,
            title=f"{kind}: {SHAPE_AXES[kind]}",
            fmt=fmt,
            limits=[Threshold("odd below", low), Threshold("odd above", high)],
            past=partial(_outside, low=low, high=high),
            log_x=True,
        )
        ranked = partial(report_queries.most_odd, conn, kind, limit.typical)
        found = _previews(conn, kind, ranked, per_kind, root)
        query = report_queries.shape_kind_query(kind, limit.typical)
        views.append(KindView(kind, _count(conn, kind), found, chart, query))
    return views


def format_pixels_side(value: float) -> str:
    return f"{value:.3g} px" if value < 1000 else f"{format_count(value)} px"


def _count(conn: sqlite3.Connection, kind: str) -> int:
    if not _has_findings(conn):
        return 0
    return report_queries.samples_with_kind(conn, kind)


def _previews(
    conn: sqlite3.Connection,
    kind: str,
    ranked: Callable[[int], list[KindSample]],
    limit: int,
    root: Path | None,
) -> tuple[Thumbnail, ...]:
    """Previews of the first `limit` images with `kind`, in the order `ranked(limit)` reads them."""
    if limit <= 0 or not _has_findings(conn):
        return ()
    rows = ranked(limit)
    return tuple(thumbnail(_sample(idx, key, (kind,), (detail or "",)), root) for idx, key, detail in rows)


def _groups(
    conn: sqlite3.Connection, root: Path | None, per_group: int
) -> tuple[tuple[DuplicateGroup, ...], int]:
    """The largest near-duplicate groups first, each with its representative; at most `per_group`
    groups of at most `per_group` members are previewed."""
    if not _has_findings(conn):
        return (), 0
    members: dict[int, list[tuple[int, Any, str]]] = {}
    for idx, key, detail in report_queries.near_duplicates(conn):
        group = quality.group_of(detail or "")
        if group is not None:
            members.setdefault(group, []).append((idx, key, detail or ""))
    ranked = sorted(members.items(), key=lambda item: (-len(item[1]), item[0]))[:per_group]
    groups = []
    for representative, listed in ranked:
        head = thumbnail(_sample(representative, report_queries.sample_key(conn, representative)), root)
        shown = tuple(
            thumbnail(_sample(idx, key, ("near_duplicate",), (detail,)), root)
            for idx, key, detail in listed[: max(1, per_group - 1)]
        )
        groups.append(DuplicateGroup(head, shown, len(listed) + 1))
    return tuple(groups), len(members)


def _leaks(
    conn: sqlite3.Connection, root: Path | None, split: str, limit: int
) -> tuple[tuple[LeakPair, ...], int]:
    """Each leaked image beside the other split's file it matches (resolved under the folder that
    the other index's scan read)."""
    if not _has_findings(conn):
        return (), 0
    total = _count(conn, "leak")
    rows = report_queries.leaks(conn, limit)
    their_root = _scanned_folder(Path(split))
    pairs = []
    for idx, key, detail in rows:
        other = quality.leak_source(detail or "", split)
        theirs = thumbnail(_sample(-1, other, ("other split",)), their_root)
        pairs.append(LeakPair(thumbnail(_sample(idx, key, ("leak",), (detail or "",)), root), theirs, detail))
    return tuple(pairs), total


def _scanned_folder(db: Path) -> Path | None:
    """The folder the latest scan of another index read, when that is still a folder here."""
    try:
        conn = read.connect(db)
        try:
            row = report_queries.latest_scan_source(conn)
        finally:
            conn.close()
    except sqlite3.Error:  # an index that moved or is unreadable: its side shows placeholders
        return None
    if row is None or row[0] != "images" or not Path(str(row[1])).is_dir():
        return None
    return Path(row[1])


def quality_previews(view: QualityView | None) -> int:
    """How many previews the views embed (the report's summary line counts them)."""
    if view is None:
        return 0
    thumbs = [t for kind in view.kinds for t in kind.thumbs]
    thumbs += [t for group in view.groups for t in (group.representative, *group.members)]
    thumbs += [t for pair in view.leaks for t in (pair.ours, pair.theirs)]
    return sum(1 for t in thumbs if t.data_uri)


# --------------------------------------------------------------------------- rendering


def quality_section(view: QualityView | None) -> Html | None:
    if view is None:
        return None
    blocks: list[object] = [
        el(
            "p",
            "Each image's raw scores are in the index; the limits are the policy's, computed over this "
            "index (drawn dashed; red bars are past them). Re-judge with other limits without "
            "rescanning: ",
            el("code", f"datalint quarantine {view.db} --kinds dark,blurry --threshold dark=0.1"),
            ".",
            class_="note",
        )
    ]
    blocks += [_kind_block(kind, view.db) for kind in view.kinds]
    blocks.append(_groups_block(view))
    if view.split:
        blocks.append(_leaks_block(view))
    return el("section", el("h2", "Image quality"), blocks, id="quality")


def _figure(thumb: Thumbnail, caption: str, css: str = "thumb") -> Html:
    """A preview as the gallery draws it, captioned with the file and what was found."""
    sample = thumb.sample
    label = shown_name(sample.key) if sample.key else f"#{sample.idx}"
    detail = next((d for d in sample.details if d), "")
    title = f"{caption} · {detail}" if detail else caption
    shown = caption if len(caption) <= 90 else caption[:89] + "…"
    captioned = (picture(thumb, label), el("figcaption", shown))
    return el("figure", *captioned, class_=css, data_idx=sample.idx, title=title)


def picture(thumb: Thumbnail, label: str) -> Html:
    """The preview itself: the image (a damaged file's decoded part, with how much decodes under it),
    or the placeholder saying why there is none. The galleries here and the report's share it."""
    if not thumb.data_uri:
        return el("div", thumb.reason, class_="placeholder", title=thumb.reason)
    image = el(
        "img",
        src=thumb.data_uri,
        alt=label,
        width=thumb.width,
        height=thumb.height,
        data_partial=thumb.partial or None,
    )
    if not thumb.partial:
        return image
    return join((image, el("span", thumb.partial, class_="partial")))


def _ours(thumb: Thumbnail, css: str = "thumb") -> Html:
    sample = thumb.sample
    return _figure(thumb, f"#{sample.idx} {shown_name(sample.key) if sample.key else ''}".strip(), css)


def _kind_block(view: KindView, db: Path) -> Html:
    more = view.total - len(view.thumbs)
    meaning = el("span", kinds.label(view.kind), class_="note")
    return el(
        "div",
        el("h3", f"{view.kind} ({view.total:,}) ", meaning),
        el(
            "div",
            el("div", view.chart),
            el("div", [_ours(t) for t in view.thumbs], class_="gallery") if view.thumbs else None,
            class_="quality-row",
        ),
        _more_note(more, "images", db, view.query) if more > 0 else None,
        class_="quality-kind",
        id=f"quality-{view.kind}",
        data_kind=view.kind,
    )


def _more_note(more: int, what: str, db: Path, query: str) -> Html:
    return el(
        "p", f"{more:,} more {what if more > 1 else what.rstrip('s')} not previewed; list them all: ",
        el("code", f'sqlite-utils query {db} "{query}"'), class_="note more",
    )  # fmt: skip


def _groups_block(view: QualityView) -> Html:
    rows = []
    for group in view.groups:
        rest = group.size - 1 - len(group.members)
        rows.append(
            el(
                "div",
                _ours(group.representative, "thumb representative"),
                [_ours(member) for member in group.members],
                el("p", f"+ {rest:,} more in this group", class_="note") if rest > 0 else None,
                class_="side-by-side dup-group",
                data_group=group.representative.sample.idx,
            )
        )
    more = view.group_total - len(view.groups)
    query = NEAR_DUPLICATES_QUERY
    note = el(
        "span", "the representative (first by name) framed, then the images that look like it", class_="note"
    )
    return el(
        "div",
        el("h3", f"Near-duplicate groups ({view.group_total:,}) ", note),
        rows or el("p", "none", class_="note"),
        _more_note(more, "groups", view.db, query) if more > 0 else None,
        id="quality-near_duplicate",
    )


def _leaks_block(view: QualityView) -> Html:
    rows = [
        el(
            "div",
            _ours(pair.ours),
            el("span", "≈", class_="leak-sign", title=pair.detail),
            _figure(pair.theirs, f"{view.split}: {shown_name(pair.theirs.sample.key or '?')}"),
            el("p", pair.detail, class_="note"),
            class_="side-by-side leak-pair",
            data_idx=pair.ours.sample.idx,
        )
        for pair in view.leaks
    ]
    more = view.leak_total - len(view.leaks)
    query = LEAKS_QUERY
    note = el("span", "this scan's image, then the other split's file it matches", class_="note")
    return el(
        "div",
        el("h3", f"Leaks into {shown_name(view.split or '')} ({view.leak_total:,}) ", note),
        rows or el("p", "none", class_="note"),
        _more_note(more, "leaks", view.db, query) if more > 0 else None,
        id="quality-leak",
    )
