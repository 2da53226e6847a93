"""`datalint report`: one self-contained HTML page from a scan index.

    from datalint.report import ReportOptions, write_report
    write_report(".datalint/scan.db", "report.html", ReportOptions(max_rows=5000))

The page holds its CSS, script, SVG charts and image previews inline and fetches nothing, so
it opens from a CI artifact on a machine with no network. Its size is bounded whatever the
number of samples: the table, the tracebacks and the previews are capped (see ReportOptions).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import Any

from datalint.errors import DatalintError
from datalint.extras import require as require_extra
from datalint.files import write_atomically
from datalint.report.extras import load_bench, load_lint_findings
from datalint.report.index import IndexSummary, open_index, read_index
from datalint.report.quality import quality_previews, read_quality
from datalint.report.render import Page, render_page, render_table_page, sibling_name, table_pages
from datalint.report.thumbs import Thumbnail, thumbnail

__all__ = ["ReportOptions", "ReportResult", "build_report", "datasette_metadata", "write_report"]


@dataclass(frozen=True)
class ReportOptions:
    title: str | None = None
    lint: Path | None = None  # `datalint check --format json` output
    bench: Path | None = None  # `datalint bench --format json` output
    max_rows: int = 20_000  # flagged samples in the table (quarantined first)
    thumbnails: int = 200  # previews of flagged images
    good_thumbnails: int = 24  # previews of a spread of good images
    quality_thumbnails: int = 12  # previews per quality kind, near-duplicate groups and leaks
    image_root: Path | None = None  # where image keys resolve, when the scanned folder moved


@dataclass(frozen=True)
class ReportResult:
    path: Path
    bytes: int
    samples: int
    flagged: int
    quarantined: int
    rows: int  # flagged samples in the table, over all its pages
    previews: int
    pages: tuple[Path, ...] = ()  # the table's sibling files, past the report's own first page


def build_report(db: Path, options: ReportOptions) -> tuple[str, Page]:
    """The page as HTML, and the values it was drawn from. One page: table rows past its size
    budget are left to the index (`write_report` puts them in sibling files)."""
    page = read_page(db, options)
    return render_page(page), page


def read_page(db: Path, options: ReportOptions) -> Page:
    """The values the report shows, read from the index and the optional inputs."""
    for name, value in (
        ("--max-rows", options.max_rows),
        ("--thumbnails", options.thumbnails),
        ("--quality-thumbnails", options.quality_thumbnails),
    ):
        if value < 0:
            raise DatalintError(f"{name} must be 0 or more, not {value}")
    lint = load_lint_findings(options.lint) if options.lint else None
    bench = load_bench(options.bench) if options.bench else None
    index = read_index(db, max_rows=options.max_rows, max_good_images=options.good_thumbnails)
    flagged_thumbs, good_thumbs = _previews(index, options)
    run = index.scan_run
    return Page(
        title=options.title or f"datalint report: {run.spec if run else db.name}",
        generated=datetime.now(UTC).isoformat(timespec="seconds"),
        index=index,
        flagged_thumbs=flagged_thumbs,
        good_thumbs=good_thumbs,
        lint=lint,
        bench=bench,
        browse_hint=f"datasette {db} --metadata meta.json",
        quality=read_quality(index, _image_root(index, options), options.quality_thumbnails),
    )


def write_report(
    db: str | os.PathLike[str],
    output: str | os.PathLike[str] = "report.html",
    options: ReportOptions | None = None,
) -> ReportResult:
    """Write the page for the index `db` to `output`, atomically: a reader (or a CI upload) never
    sees half a report."""
    require_extra("scan", "datalint.write_report()")
    output = Path(output)
    if not output.parent.is_dir():  # before the work, not after it
        raise DatalintError(f"{output}: the folder {output.parent} does not exist")
    page = read_page(Path(db), options or ReportOptions())
    pages = table_pages(page.index)  # the first page in the report, each other one in a file next to it
    html = render_page(page, pages, output.name)
    siblings = tuple(output.with_name(sibling_name(output.name, n)) for n in range(2, len(pages) + 1))
    for number, sibling in enumerate(siblings, start=2):  # before the report, so its links resolve
        _write_atomic(sibling, render_table_page(page, pages, output.name, number).encode("utf-8"))
    _remove_stale_pages(output, len(pages))
    data = html.encode("utf-8")
    _write_atomic(output, data)
    index = page.index
    previews = sum(1 for thumb in (*page.flagged_thumbs, *page.good_thumbs) if thumb.data_uri)
    previews += quality_previews(page.quality)
    return ReportResult(
        output,
        len(data),
        index.sample_count,
        index.flagged_total,
        index.quarantined_total,
        sum(len(table.rows) for table in pages),
        previews,
        siblings,
    )


def _remove_stale_pages(output: Path, count: int) -> None:
    """Table pages a longer earlier report left next to this one: their links would lie."""
    number = count + 1
    while (stale := output.with_name(sibling_name(output.name, number))).is_file():
        try:
            stale.unlink()
        except OSError as exc:
            raise DatalintError(f"{stale}: cannot remove an old table page ({exc.strerror or exc})") from exc
        number += 1


def _write_atomic(output: Path, data: bytes) -> None:
    # the mode a plain open() gives (not mkstemp's 0600), so the page is readable by a CI upload
    try:
        write_atomically(output, data, durable=False)
    except OSError as exc:
        raise DatalintError(f"{output}: cannot write the report ({exc.strerror or exc})") from exc


def _image_root(index: IndexSummary, options: ReportOptions) -> Path | None:
    if options.image_root is not None:
        return options.image_root
    run = index.scan_run
    if run is not None and run.kind == "images" and Path(run.spec).is_dir():
        return Path(run.spec)
    return None


def _previews(
    index: IndexSummary, options: ReportOptions
) -> tuple[tuple[Thumbnail, ...], tuple[Thumbnail, ...]]:
    if not index.is_image_scan:
        return (), ()
    root = _image_root(index, options)
    flagged = tuple(thumbnail(sample, root) for sample in index.flagged[: options.thumbnails])
    good = tuple(thumbnail(sample, root) for sample in index.good_images)
    return flagged, good


def datasette_metadata(db: Path) -> dict[str, Any]:
    """datasette's metadata for this index: table and column labels, and canned queries.

    datasette keys per-database metadata by the file's stem, so the packaged template is
    filled in for this one file.
    """
    open_index(db).close()  # the same clear error as the report for a file that is not an index
    template = json.loads(
        resources.files("datalint.report").joinpath("datasette-metadata.json").read_text(encoding="utf-8")
    )
    database = template.pop("database")
    return {**template, "databases": {db.stem: database}}
