"""Assemble the report page: one HTML string with its CSS, script, SVG and previews inline.

Every value from the index, the lint file or the bench file is untrusted (file names,
exception messages, tracebacks) and reaches the page only through `markup.el` (escaped) or
`json_island` (the table's data, which the script inserts with textContent). A Content-
Security-Policy pins the page's one style sheet and one script by hash and forbids every
fetch, so even a slip in escaping could neither run a script nor load anything remotely.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from importlib import resources
from typing import Any

from datalint.index.kinds import DAMAGE, DATASET_ONLY_KINDS, KINDS, UNSUPPORTED
from datalint.index.report_queries import ALL_FINDINGS_QUERY, KIND_COUNTS_QUERY
from datalint.index.store import RunRecord
from datalint.report.charts import (
    Bar,
    Threshold,
    bar_chart,
    format_bytes,
    format_count,
    format_pixels,
    format_seconds,
    log_histogram,
    size_heatmap,
)
from datalint.report.extras import BenchResult, BenchRun, LintFinding
from datalint.report.index import FlaggedSample, ImageStats, IndexSummary, KindCount
from datalint.report.markup import Html, el, join
from datalint.report.quality import QualityView, picture, quality_section
from datalint.report.thumbs import Thumbnail
from datalint.text import shown_name

PAGE_SIZE = 100
MESSAGE_LIMIT = 400
DETAIL_LIMIT = 1000
TRACEBACK_LIMIT = 6000  # characters kept per traceback: its end, where the innermost frame is
TRACEBACK_BUDGET = 2_500_000  # bytes of tracebacks in one page; past it, the index has them
# Bytes (UTF-8, as the file holds them) of table rows (keys, messages, details) in one page. With
# the tracebacks, the first page drawn twice (HTML and data) and the charts, a page stays under
# 10 MB however long the messages are and whatever their script; rows past it go to the sibling
# pages. Counted in characters, 3-byte text (CJK) made a 16.8 MB page.
ROWS_BUDGET = 5_000_000
# The report itself carries the charts and is what opens first: it holds this share of the budgets,
# and the table goes on in its sibling pages.
FIRST_PAGE_SHARE = 0.4


@dataclass(frozen=True)
class Page:
    """Everything one report shows, already read and measured."""

    title: str
    generated: str
    index: IndexSummary
    flagged_thumbs: tuple[Thumbnail, ...]
    good_thumbs: tuple[Thumbnail, ...]
    lint: tuple[LintFinding, ...] | None
    bench: BenchResult | None
    browse_hint: str  # the datasette command shown in the footer
    quality: QualityView | None = None  # the quality views, when the images were scored


def _asset(name: str) -> str:
    return resources.files("datalint.report").joinpath("assets", name).read_text(encoding="utf-8")


def _csp_hash(source: str) -> str:
    digest = hashlib.sha256(source.encode("utf-8")).digest()
    return "'sha256-" + base64.b64encode(digest).decode("ascii") + "'"


def json_island(value: Any) -> Html:
    """JSON that is safe inside <script type="application/json">: nothing in it can close the element."""
    data = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    for char, escaped in (
        ("&", "\\u0026"),
        ("<", "\\u003c"),
        (">", "\\u003e"),
        ("\u2028", "\\u2028"),
        ("\u2029", "\\u2029"),
    ):
        data = data.replace(char, escaped)
    return Html(data)


def sibling_name(output_name: str, number: int) -> str:
    """The file of table page `number` (1 is the report itself): report.html -> report.rows-2.html."""
    if number == 1:
        return output_name
    stem, dot, suffix = output_name.rpartition(".")
    return f"{stem}.rows-{number}.{suffix}" if dot else f"{output_name}.rows-{number}"


def render_page(page: Page, pages: Sequence[TableData] | None = None, output_name: str = "") -> str:
    """The report. With `pages` (from `table_pages`) and the report's file name, the table's rows past
    the first page are linked to sibling files (`render_table_page`); without, they are left to the
    index, and the page gives the query that lists them."""
    data = pages[0] if pages else table_data(page.index)
    names = [sibling_name(output_name, n + 1) for n in range(len(pages))] if pages and output_name else []
    body = [
        _header(page),
        _toc(page),
        el(
            "main",
            _summary_section(page),
            _charts_section(page),
            _samples_section(page.index, data, names, 0),
            _gallery_section(page),
            quality_section(page.quality),
            _lint_section(page.lint),
            _bench_section(page.bench),
            _runs_section(page.index.runs),
            _footer(page),
        ),
    ]
    return _document(page.title, body)


def render_table_page(page: Page, pages: Sequence[TableData], output_name: str, number: int) -> str:
    """Sibling file `number` (2 and up) of the report: the flagged-samples table's page `number`."""
    names = [sibling_name(output_name, n + 1) for n in range(len(pages))]
    title = f"{page.title}: flagged samples, page {number} of {len(pages)}"
    header = el(
        "header",
        el("h1", title),
        el(
            "div",
            "Part of ",
            el("a", "the report", href=names[0]),
            " · index ",
            el("code", str(page.index.path)),
            class_="sub",
        ),
        class_="top",
    )
    main = el("main", _samples_section(page.index, pages[number - 1], names, number - 1), _footer(page))
    return _document(title, [header, main])


def _document(title: str, body: list[Html]) -> str:
    css, script = _asset("report.css"), _asset("report.js")
    policy = (
        "default-src 'none'; img-src data:; "
        f"style-src {_csp_hash(css)}; script-src {_csp_hash(script)}; base-uri 'none'; form-action 'none'"
    )
    head = el(
        "head",
        Html('<meta charset="utf-8">'),
        el("meta", http_equiv="Content-Security-Policy", content=policy),
        el("meta", name="viewport", content="width=device-width, initial-scale=1"),
        el("meta", name="generator", content="datalint report"),
        el("title", title),
        el("style", Html(css)),
    )
    return (
        "<!DOCTYPE html>\n"
        + el("html", head, el("body", *body, el("script", Html(script))), lang="en")
        + "\n"
    )


def _header(page: Page) -> Html:
    run = page.index.scan_run
    bits: list[object] = []
    if run is not None:
        bits += [f"{run.kind} scan of ", el("code", run.spec)]
        if run.started:
            bits.append(f" · started {run.started}")
        bits += [" · ", _duration(run)]
    bits += [" · index ", el("code", str(page.index.path)), f" · report made {page.generated}"]
    return el("header", el("h1", page.title), el("div", *bits, class_="sub"), class_="top")


def _duration(run: RunRecord) -> Html:
    if not run.finished:
        return el(
            "span",
            "did not finish (killed, or still running): rerun the scan to resume",
            class_="sev-warning",
        )
    try:
        seconds = (
            datetime.fromisoformat(run.finished) - datetime.fromisoformat(run.started or "")
        ).total_seconds()
    except (ValueError, TypeError):  # not ISO 8601, or one time zone-aware and one not
        return el("span", f"finished {run.finished}")
    elapsed = run.counts.get("elapsed")
    if isinstance(elapsed, int | float) and elapsed >= seconds:
        # The figure the scan's summary line printed: the whole command (imports, listing the files,
        # forking workers, measuring, policy, quarantine list); the run's own times cover less.
        return el(
            "span",
            f"took {format_seconds(elapsed)}",
            title=f"the whole scan command; measuring and the policy: {format_seconds(seconds)}",
        )
    return el(
        "span",
        f"took {format_seconds(seconds)}",
        title="from the run's start to its end (a scan command's own figure also counts its start-up)",
    )


def _toc(page: Page) -> Html:
    links = [("summary", "Summary"), ("charts", "Charts"), ("samples-section", "Flagged samples")]
    if page.index.is_image_scan:
        links.append(("gallery", "Images"))
    if page.quality is not None:
        links.append(("quality", "Quality"))
    if page.lint is not None:
        links.append(("lint", "Lint"))
    if page.bench is not None:
        links.append(("bench", "Bench"))
    links.append(("runs", "Runs"))
    return el("nav", [el("a", label, href=f"#{anchor}") for anchor, label in links], class_="toc")


def _section(anchor: str, title: str, *content: object) -> Html:
    return el("section", el("h2", title), *content, id=anchor)


def _card(value: int, label: str, css: str = "") -> Html:
    return el(
        "div",
        el("div", format_count(value), class_="n"),
        el("div", label, class_="label"),
        class_=f"card {css}",
    )


def _percent(part: int, whole: int) -> str:
    return f"{part / whole:.2%}" if whole else "0%"


def _summary_section(page: Page) -> Html:
    index = page.index
    total = index.sample_count
    # "ok" as the scan's headline counts it: a damaged file loads in the probe but is no good sample.
    undecodable = index.damaged_total + index.unsupported_total
    cards = [
        _card(total, "samples in the index"),
        _card(max(0, index.status_counts.get("ok", 0) - undecodable), "ok (loaded, not damaged)", "good"),
        _card(index.quarantined_total, f"quarantined ({_percent(index.quarantined_total, total)})", "bad"),
        _card(index.flagged_total, f"with any finding ({_percent(index.flagged_total, total)})", "warn"),
    ]
    if index.images is not None or undecodable:
        cards.append(
            _card(index.damaged_total, f"damaged files ({_percent(index.damaged_total, total)})", "bad")
        )
        cards.append(_card(index.unsupported_total, "unsupported here (not damage)", "warn"))
    cards += [
        _card(n, f"status {status}", "bad") for status, n in index.status_counts.items() if status != "ok"
    ]
    return _section(
        "summary",
        "Summary",
        el("div", cards, class_="cards"),
        _unfinished_note(index),
        el("div", _policy_block(index.kind_counts), _options_block(index.scan_run), class_="grid2"),
    )


def _unfinished_note(index: IndexSummary) -> Html | None:
    run = index.scan_run
    if run is None or run.length is None or index.sample_count >= run.length:
        return None
    return el(
        "p",
        f"{run.length - index.sample_count:,} of {run.length:,} samples have no row yet: the scan did not "
        "finish. Rerun the same scan command to resume it.",
        class_="warnbox",
    )


def _chips(kinds: Sequence[KindCount], css: str) -> Html:
    if not kinds:
        return el("span", "none", class_="note")
    return join(el("span", f"{k.kind} {k.samples:,}", class_=css) for k in kinds)


def _policy_block(kinds: Sequence[KindCount]) -> Html:
    return el(
        "div",
        el("h3", "Quarantine policy"),
        el(
            "p",
            "Quarantined (left out of training by the quarantine list): ",
            _chips([k for k in kinds if k.quarantined], "kind q"),
        ),
        el("p", "Reported only: ", _chips([k for k in kinds if not k.quarantined], "kind")),
        el(
            "p",
            "Counts are samples per kind; a sample may have several kinds. Derive a list with another "
            "policy without rescanning: ",
            el("code", "datalint quarantine DB --kinds k1,k2"),
            ".",
            class_="note",
        ),
    )


# Policy options and kinds that judge dataset samples only: an image-file scan never uses them, so
# its report does not list them (with --files-from-dataset each sample is a dataset sample too).
_DATASET_ONLY_OPTIONS = frozenset({
    "labels", "policy.num_classes", "policy.ignore_index", "policy.require", "policy.max_bytes",
    "policy.oversize_factor", "policy.majority", "policy.min_peers",
})  # fmt: skip


def _is_file_scan(run: RunRecord) -> bool:
    return run.kind == "images" and not (run.options.get("source_options") or {}).get("dataset")


def _duration_limit(index: IndexSummary) -> list[Any]:
    """The slow limit to draw; on an image scan only when a file reaches it, because a "slow above
    6 s" line far right of millisecond decodes squeezes every bar into a corner."""
    limit = index.thresholds.get("duration")
    if limit is None:
        return []
    if index.is_image_scan and not (len(index.durations) and float(index.durations.max()) >= limit.value):
        return []
    return [limit]


def _options_block(run: RunRecord | None) -> Html:
    if run is None:
        return el("div", el("h3", "Scan options"), el("p", "The index has no run recorded.", class_="note"))
    rows: list[tuple[str, str]] = [("kind", run.kind), ("spec", run.spec)]
    if run.length is not None:
        rows.append(("length", f"{run.length:,}"))
    if run.fingerprint:
        rows.append(("fingerprint", run.fingerprint))
    options = _flat(run.options)
    if _is_file_scan(run):
        options = [(name, value) for name, value in options if name not in _DATASET_ONLY_OPTIONS]
        options = [
            (name, ", ".join(k for k in value.split(", ") if k not in DATASET_ONLY_KINDS))
            if name == "policy.kinds" else (name, value)
            for name, value in options
        ]  # fmt: skip
    rows += options
    environment = _flat(run.environment)
    return el(
        "div",
        el("h3", "Scan options"),
        _key_values(rows),
        el("details", el("summary", "environment"), _key_values(environment)) if environment else None,
    )


def _key_values(rows: Iterable[tuple[str, str]]) -> Html:
    return el("dl", [join([el("dt", k), el("dd", v)]) for k, v in rows], class_="kv")


def _flat(values: dict[str, Any], prefix: str = "") -> list[tuple[str, str]]:
    """Nested options as dotted rows (policy.timeout, versions.torch): easier to scan than JSON."""
    rows: list[tuple[str, str]] = []
    for name, value in sorted(values.items()):
        if isinstance(value, dict) and value:
            rows += _flat(value, f"{prefix}{name}.")
        elif isinstance(value, list) and all(isinstance(item, str | int | float) for item in value):
            rows.append((f"{prefix}{name}", ", ".join(str(item) for item in value) or "(none)"))
        else:
            rows.append((f"{prefix}{name}", _plain(value)))
    return rows


def _plain(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _charts_section(page: Page) -> Html:
    index = page.index
    kind_bars = [Bar(k.kind, k.samples, "bar q" if k.quarantined else "bar flag") for k in index.kind_counts]
    limits = index.thresholds
    charts = [
        bar_chart(kind_bars, title="Samples per finding kind (red: quarantined)"),
        log_histogram(
            index.durations,
            title="Time per sample",
            fmt=format_seconds,
            thresholds=_duration_limit(index),
        ),
    ]
    if index.images is None or len(index.nbytes):
        charts.append(
            log_histogram(
                index.nbytes,
                title="Bytes per sample",
                fmt=format_bytes,
                thresholds=[limits["nbytes"]] if "nbytes" in limits else [],
                tick_base=2,
            )
        )
    if index.images is not None:
        charts += _image_charts(index.images)
    return _section("charts", "Charts", el("div", [el("div", chart) for chart in charts], class_="grid2"))


def _image_charts(images: ImageStats) -> list[Html]:
    pixels = [width * height for (width, height), n in images.sizes.items() for _ in range(n)]
    bomb = [Threshold("bomb above", images.max_pixels)] if images.max_pixels else []
    return [
        log_histogram(images.file_bytes, title="File size", fmt=format_bytes, tick_base=2),
        log_histogram(pixels, title="Pixels per image", fmt=format_pixels, thresholds=bomb),
        size_heatmap(images.sizes, title="Image sizes (width x height)"),
        bar_chart(_count_bars(images.formats), title="Image formats"),
        bar_chart(_count_bars(images.modes), title="Image modes"),
    ]


def _count_bars(counts: dict[str, int]) -> list[Bar]:
    return [Bar(name, n) for name, n in sorted(counts.items(), key=lambda item: (-item[1], item[0]))]


# --- the flagged-samples table -------------------------------------------------------------


def _clip(value: str | None, limit: int) -> str:
    if not value:
        return ""
    return value if len(value) <= limit else value[: limit - 1] + "…"


def _clip_traceback(traceback: str) -> str:
    if len(traceback) <= TRACEBACK_LIMIT:
        return traceback
    cut = len(traceback) - TRACEBACK_LIMIT
    return f"… ({cut:,} characters cut: the full text is in the index)\n" + traceback[-TRACEBACK_LIMIT:]


def _message(sample: FlaggedSample) -> str:
    if sample.error_type or sample.error_message:
        head = f"{sample.error_type}: " if sample.error_type else ""
        return _clip(head + (sample.error_message or ""), MESSAGE_LIMIT)
    return _clip(next((d for d in sample.details if d), ""), MESSAGE_LIMIT)


def _detail_lines(sample: FlaggedSample) -> list[str]:
    pairs = zip(sample.kinds, sample.details, strict=False)
    return [_clip(f"{kind}: {detail}", DETAIL_LIMIT) for kind, detail in pairs if detail]


def _shown_status(sample: FlaggedSample) -> str:
    """The status column as the findings read: a sample that loaded (ok) with a damage finding is
    "damaged" (the decoder reported damage and went on), "unsupported" likewise, "flagged" when it
    is quarantined for another finding; the load's own status otherwise."""
    if sample.status != "ok":
        return sample.status
    families = {KINDS[kind].family for kind in sample.kinds if kind in KINDS}
    if DAMAGE in families:
        return "damaged"
    if UNSUPPORTED in families:
        return "unsupported"
    return "flagged" if sample.quarantined else sample.status


def _finite(value: float | None) -> float | None:
    """JSON has no NaN or Infinity: such a measurement shows as a blank."""
    return value if value is None or math.isfinite(value) else None


@dataclass(frozen=True)
class TableData:
    """The table as compact arrays: kinds and tracebacks are stored once and referred to by number.

    A row is [idx, key, status, [kind numbers], quarantined, message, [detail lines],
    duration, nbytes, traceback number or None]; report.js reads the same layout.
    """

    kinds: list[str]
    quarantine_kinds: list[int]
    rows: list[list[Any]]
    tracebacks: list[str]
    tracebacks_dropped: int
    rows_dropped: int = 0  # flagged samples read but left out for ROWS_BUDGET


def _island_length(*texts: str) -> int:
    """Bytes these strings take in the page's JSON island (`json_island` escapes <, > and &)."""
    escaped = sum(text.count("<") + text.count(">") + text.count("&") for text in texts)
    return len(json.dumps(texts, ensure_ascii=False).encode("utf-8", "surrogatepass")) + 5 * escaped


def table_data(index: IndexSummary) -> TableData:
    """The main page's table: the first page of `table_pages`."""
    return table_pages(index)[0]


def table_pages(index: IndexSummary) -> list[TableData]:
    """The flagged samples read, cut into pages that each keep to ROWS_BUDGET and TRACEBACK_BUDGET.

    The first page goes into the report itself, the others into sibling files next to it, so no
    flagged sample read is left out and no file grows past the size a browser opens quickly.
    """
    kinds = sorted({kind for sample in index.flagged for kind in sample.kinds})
    quarantining = {k.kind for k in index.kind_counts if k.quarantined}
    quarantine_kinds = sorted(i for i, kind in enumerate(kinds) if kind in quarantining)
    pages: list[TableData] = []
    start = 0
    while True:
        share = FIRST_PAGE_SHARE if start == 0 else 1.0
        data, used = _table_page(index.flagged, start, kinds, quarantine_kinds, share)
        start += used
        pages.append(replace(data, rows_dropped=len(index.flagged) - start))
        if start >= len(index.flagged) or used == 0:
            return pages


def _table_page(
    flagged: Sequence[FlaggedSample], start: int, kinds: list[str], quarantine_kinds: list[int], share: float
) -> tuple[TableData, int]:
    """One page of rows from flagged[start:], within `share` of the budgets; how many samples it took."""
    number = {kind: i for i, kind in enumerate(kinds)}
    tracebacks: dict[str, int] = {}
    budget, dropped = int(TRACEBACK_BUDGET * share), 0
    rows: list[list[Any]] = []
    room = int(ROWS_BUDGET * share)
    # In reading order (quarantined first), so a cut keeps the rows that matter; shown by index.
    for sample in flagged[start:]:
        message, details = _message(sample), _detail_lines(sample)
        room -= 60 + _island_length(sample.key or "", message, *details)
        if room < 0 and rows:  # a page holds at least one row, however long
            break
        tb_ref = None
        if sample.traceback:
            clipped = _clip_traceback(sample.traceback)
            if clipped in tracebacks:  # the same failure in many samples is stored once
                tb_ref = tracebacks[clipped]
            elif (size := len(clipped.encode("utf-8", "surrogatepass"))) <= budget:
                budget -= size
                tb_ref = tracebacks.setdefault(clipped, len(tracebacks))
            else:
                dropped += 1
        rows.append(
            [
                sample.idx,
                shown_name(sample.key) if sample.key else sample.key,  # escapes, bytes that are not UTF-8
                _shown_status(sample),
                [number[k] for k in sample.kinds],
                int(sample.quarantined),
                message,
                details,
                _finite(sample.duration),
                _finite(sample.nbytes),
                tb_ref,
            ]
        )
    used = len(rows)
    rows.sort(key=lambda row: row[0])
    return TableData(kinds, quarantine_kinds, rows, list(tracebacks), dropped), used


TABLE_COLUMNS = (
    ("idx", "index", "num"),
    ("key", "key", ""),
    ("status", "status", ""),
    ("kinds", "kinds", ""),
    ("duration", "time", "num"),
    ("nbytes", "bytes", "num"),
    ("message", "message", ""),
)


def _samples_section(index: IndexSummary, data: TableData, names: Sequence[str], current: int) -> Html:
    head = el(
        "tr",
        [
            el(
                "th",
                el("button", label, type="button"),
                class_=css or None,
                data_sort=key,
                aria_sort="ascending" if key == "idx" else "none",
            )
            for key, label, css in TABLE_COLUMNS
        ],
    )
    island = {
        "page_size": PAGE_SIZE,
        "kinds": data.kinds,
        "quarantine_kinds": data.quarantine_kinds,
        "rows": data.rows,
        "tracebacks": data.tracebacks,
    }
    return _section(
        "samples-section",
        "Flagged samples",
        _table_controls(data, index),
        _table_notes(data, index, names, current),
        _page_links(names, current),
        el(
            "noscript",
            el(
                "p",
                f"Filtering, sorting and paging need JavaScript; the first {PAGE_SIZE} rows are shown.",
                class_="note",
            ),
        ),
        el(
            "table",
            el("thead", head),
            el("tbody", [_static_row(row, data) for row in data.rows[:PAGE_SIZE]]),
            id="samples",
        ),
        el(
            "div",
            el("button", "‹ previous", type="button", data_page="prev"),
            el("span", class_="page"),
            el("button", "next ›", type="button", data_page="next"),
            class_="pager",
            id="pager",
            hidden=True,
        ),
        _page_links(names, current),
        el("script", json_island(island), type="application/json", id="dl-data"),
    )


def _page_links(names: Sequence[str], current: int) -> Html | None:
    """Links between the report and its sibling table pages: previous, each page, next."""
    if len(names) < 2:
        return None
    links: list[object] = []
    if current > 0:
        links += [el("a", "‹ previous rows", href=names[current - 1], rel="prev"), " "]
    for n, name in enumerate(names):
        links += [
            el("span", str(n + 1), class_="page") if n == current else el("a", str(n + 1), href=name),
            " ",
        ]
    if current < len(names) - 1:
        links.append(el("a", "next rows ›", href=names[current + 1], rel="next"))
    return el("nav", "rows pages: ", links, class_="row-pages", aria_label="table pages")


def _table_notes(data: TableData, index: IndexSummary, names: Sequence[str], current: int) -> list[Html]:
    notes = []
    query = el("code", f'sqlite-utils query {index.path} "{ALL_FINDINGS_QUERY}"')
    read = len(index.flagged)
    if len(names) > 1:
        notes.append(
            el(
                "p",
                f"This page holds {len(data.rows):,} of the {read:,} flagged samples in this table "
                f"(quarantined first, then by index), page {current + 1} of {len(names)}; "
                "each page is a file next to the report, kept small enough to open quickly.",
                class_="note",
            )
        )
        if index.flagged_total > read:
            notes.append(
                el(
                    "p",
                    f"{index.flagged_total - read:,} more flagged samples (past --max-rows) are in the "
                    "index: raise --max-rows, or query ",
                    query,
                    class_="note",
                )
            )
    elif index.flagged_total > len(data.rows):
        why = "Raise --max-rows, or query"
        if data.rows_dropped:
            why = f"The other {data.rows_dropped:,} read would pass the page's size budget; query"
        notes.append(
            el(
                "p",
                f"The table holds {len(data.rows):,} of {index.flagged_total:,} flagged samples "
                f"(quarantined first, then by index). {why} the index for the rest: ",
                query,
                class_="note",
            )
        )
    if data.tracebacks_dropped:
        notes.append(
            el(
                "p",
                f"{data.tracebacks_dropped:,} tracebacks left out to keep the page small; "
                "the index has them all.",
                class_="note",
            )
        )
    if not data.rows:
        notes.append(el("p", "No sample has a finding: nothing to quarantine.", class_="note"))
    return notes


def _table_controls(data: TableData, index: IndexSummary) -> Html:
    counts = {k.kind: k.samples for k in index.kind_counts}
    quarantining = {data.kinds[i] for i in data.quarantine_kinds}
    boxes = [
        el(
            "label",
            el("input", type="checkbox", value=kind, checked=True),
            " ",
            el("span", kind, class_="kind q" if kind in quarantining else "kind"),
            " ",
            el("span", f"{counts.get(kind, 0):,}", class_="n"),
        )
        for kind in data.kinds
    ]
    return el(
        "div",
        el(
            "fieldset",
            el("legend", "kinds"),
            boxes,
            el("button", "all", type="button", class_="small", id="kinds-all"),
            el("button", "none", type="button", class_="small", id="kinds-none"),
            id="filter-kinds",
        ),
        el("label", el("input", type="checkbox", id="filter-quarantined"), " quarantined only"),
        el(
            "input",
            type="search",
            id="filter-text",
            placeholder="filter by index, key or message",
            aria_label="filter by index, key or message",
        ),
        el("span", f"{len(data.rows):,} rows", class_="n", id="table-status"),
        class_="controls",
        id="table-controls",
        hidden=True,
    )


def _static_row(row: list[Any], data: TableData) -> Html:
    """The first page, rendered here too, so the table reads without JavaScript."""
    idx, key, status, kinds, quarantined, message, details, duration, nbytes, tb_ref = row
    chips = [
        el(
            "button",
            data.kinds[k],
            type="button",
            data_kind=data.kinds[k],
            class_="kind q" if k in data.quarantine_kinds else "kind",
        )
        for k in kinds
    ]
    if details or tb_ref is not None:
        cell: object = el(
            "details",
            el("summary", message or "details"),
            [el("div", line, class_="detail") for line in details],
            el("pre", data.tracebacks[tb_ref], class_="traceback") if tb_ref is not None else None,
        )
    else:
        cell = message
    return el(
        "tr",
        el("td", idx, class_="num idx"),
        el("td", key or "", class_="key"),
        el("td", status, class_="status"),
        el("td", chips, class_="kinds"),
        el("td", format_seconds(duration) if duration is not None else "", class_="num"),
        el("td", format_bytes(nbytes) if nbytes is not None else "", class_="num"),
        el("td", cell, class_="msg"),
        class_="q" if quarantined else None,
        data_idx=idx,
    )


# --- image previews, lint, bench, runs -------------------------------------------------------


def _gallery_section(page: Page) -> Html | None:
    if not page.index.is_image_scan:
        return None
    shown = len(page.flagged_thumbs)
    hidden = page.index.flagged_total - shown
    return _section(
        "gallery",
        "Images",
        el("h3", f"Flagged files ({shown:,})"),
        _thumb_grid(page.flagged_thumbs),
        el(
            "p",
            f"{hidden:,} more flagged files not previewed: the cap (--thumbnails) keeps the page small.",
            class_="note",
        )
        if hidden > 0
        else None,
        el("h3", f"A sample of good files ({len(page.good_thumbs):,})"),
        _thumb_grid(page.good_thumbs),
        el(
            "p",
            "Previews show the stored pixels as a DataLoader receives them (no EXIF rotation).",
            class_="note",
        ),
    )


def _thumb_grid(thumbs: Sequence[Thumbnail]) -> Html:
    if not thumbs:
        return el("p", "none", class_="note")
    return el("div", [_thumb(thumb) for thumb in thumbs], class_="gallery")


def _thumb(thumb: Thumbnail) -> Html:
    sample = thumb.sample
    label = shown_name(sample.key) if sample.key else f"#{sample.idx}"
    caption = f"#{sample.idx} {label}" + (f" · {' '.join(sample.kinds)}" if sample.kinds else "")
    return el(
        "figure",
        picture(thumb, label),
        el("figcaption", _clip(caption, 90)),
        class_="thumb q" if sample.quarantined else "thumb",
        data_idx=sample.idx,
        title=caption,
    )


def _lint_section(findings: tuple[LintFinding, ...] | None) -> Html | None:
    if findings is None:
        return None
    if not findings:
        return _section("lint", "Lint findings", el("p", "No lint findings."))
    per_code: dict[str, int] = {}
    for finding in findings:
        per_code[finding.code] = per_code.get(finding.code, 0) + 1
    summary = ", ".join(f"{code} ×{n}" for code, n in sorted(per_code.items()))
    rows = [
        el(
            "tr",
            el("td", f.severity, class_=f"sev-{f.severity.lower()}"),
            el("td", f.code),
            el("td", f"{f.path}:{_blank(f.line)}:{_blank(f.column)}", class_="key"),
            el("td", f.message, el("span", f" ({f.name})", class_="note") if f.name else None),
        )
        for f in findings
    ]
    return _section(
        "lint",
        f"Lint findings ({len(findings):,})",
        el("p", summary, class_="note"),
        el(
            "table",
            el("thead", el("tr", [el("th", h) for h in ("severity", "code", "where", "message")])),
            el("tbody", rows),
        ),
    )


def _blank(value: object) -> str:
    return "" if value is None else str(value)


BENCH_COLUMNS: tuple[tuple[str, Callable[[BenchRun], float | None], Callable[[float], str]], ...] = (
    ("workers", lambda r: r.num_workers, lambda v: f"{v:.0f}"),
    ("samples/s", lambda r: r.samples_per_s, lambda v: f"{v:,.1f}"),
    ("first batch", lambda r: r.first_batch_s, format_seconds),
    ("peak RSS", lambda r: r.rss_bytes, format_bytes),
    ("peak PSS", lambda r: r.pss_bytes, format_bytes),
    ("peak /dev/shm", lambda r: r.shm_peak_bytes, format_bytes),
    ("open fds", lambda r: r.fds, format_count),
)


def _bench_section(bench: BenchResult | None) -> Html | None:
    if bench is None:
        return None
    head = el("tr", [el("th", name, class_="num") for name, _, _ in BENCH_COLUMNS], el("th", "note"))
    rows = [
        el(
            "tr",
            [el("td", _bench_cell(get(run), fmt), class_="num") for _, get, fmt in BENCH_COLUMNS],
            el("td", run.note),
            class_="recommended" if run.recommended else None,
        )
        for run in bench.runs
    ]
    bars = [
        Bar(f"{run.num_workers} workers", run.samples_per_s, "bar best" if run.recommended else "bar")
        for run in bench.runs
        if run.samples_per_s is not None
    ]
    chart = bar_chart(bars, title="Samples per second by worker count (green: recommended)") if bars else None
    return _section(
        "bench",
        "Bench",
        _recommendation(bench.recommendation),
        el("table", el("thead", head), el("tbody", rows)),
        el("div", chart),
    )


def _bench_cell(value: float | None, fmt: Callable[[float], str]) -> str:
    return "" if value is None else fmt(value)


def _recommendation(recommendation: dict[str, Any]) -> Html | None:
    """The recommended config as name=value, and bench's reason for it."""
    config = recommendation.get("config")
    if not isinstance(config, dict):
        config = {k: v for k, v in recommendation.items() if k not in ("reason", "why", "config")}
    if not config:
        return None
    settings = ", ".join(f"{name}={_plain(value)}" for name, value in config.items())
    why = recommendation.get("reason") or recommendation.get("why")
    return el("p", el("b", "Recommended: "), settings, ". ", _plain(why) if why else None)


def _runs_section(runs: tuple[RunRecord, ...]) -> Html:
    head = el("tr", [el("th", h) for h in ("run", "kind", "spec", "started", "finished", "counts")])
    rows = [
        el(
            "tr",
            el("td", run.id, class_="num"),
            el("td", run.kind),
            el("td", run.spec, class_="key"),
            el("td", run.started or ""),
            el("td", run.finished or "not finished"),
            el("td", _plain(run.counts) if run.counts else "", class_="key"),
        )
        for run in runs
    ]
    return _section("runs", "Runs recorded in the index", el("table", el("thead", head), el("tbody", rows)))


def _footer(page: Page) -> Html:
    query = f'sqlite-utils query {page.index.path} "{KIND_COUNTS_QUERY}"'
    return el(
        "footer",
        el(
            "p",
            "Ad-hoc questions: ",
            el("code", page.browse_hint),
            " browses the index in a web page; ",
            el("code", query),
            " answers one on the command line. See `datalint docs report`. Made by datalint report.",
        ),
    )
