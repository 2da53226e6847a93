"""The report in a real headless Chromium: it loads cleanly and its own controls filter the table."""

from __future__ import annotations

import re
import struct
from collections.abc import Iterator
from pathlib import Path

import pytest
from report_browser import Browser, Page, chromium, needs_chromium
from report_dataset import HOSTILE_KEY, HOSTILE_MESSAGE, PLANTED
from report_images import ImageCase

from datalint.cli import main

pytestmark = pytest.mark.slow

ROWS = "Array.from(document.querySelectorAll('#samples tbody tr')).map(tr => Number(tr.dataset.idx))"
MATCHING = "Number(document.getElementById('table-status').dataset.matching)"
FLAGGED = sorted(PLANTED)
QUARANTINED = sorted(i for i, kind in PLANTED.items() if kind not in ("dtype_mismatch", "slow"))
CRASH, ERROR, OVERSIZED = (
    next(i for i, k in PLANTED.items() if k == kind) for kind in ("crash", "error", "oversized")
)


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Browser]:
    """One browser for the module (starting one costs seconds); each test opens its own tab."""
    started = Browser(chromium(), tmp_path_factory.mktemp("profile"))
    try:
        yield started
    finally:
        started.close()


def open_report(browser: Browser, db: Path, out: Path) -> Page:
    assert main(["report", str(db), "-o", str(out)]) == 0
    return browser.open(out.resolve().as_uri())


def png_size(path: Path) -> tuple[int, int]:
    header = path.read_bytes()[:24]
    assert header[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    width, height = struct.unpack(">II", header[16:24])
    return width, height


@needs_chromium
def test_the_page_loads_without_errors_and_screenshots(
    browser: Browser, scanned_db: Path, tmp_path: Path
) -> None:
    page = open_report(browser, scanned_db, tmp_path / "report.html")
    assert page.evaluate("document.getElementById('table-controls').hidden") is False, (
        "the script did not run"
    )
    assert page.evaluate(MATCHING) == len(FLAGGED)
    shot = tmp_path / "report.png"
    page.screenshot(shot)
    width, height = png_size(shot)
    assert width == 1280 and height > 1500, (width, height)
    assert shot.stat().st_size > 50_000, "a blank page compresses to almost nothing"
    assert page.problems() == []


@needs_chromium
def test_filtering_by_kind_through_the_page_controls(
    browser: Browser, scanned_db: Path, tmp_path: Path
) -> None:
    page = open_report(browser, scanned_db, tmp_path / "report.html")
    assert len(page.evaluate(ROWS)) == 100, "the first page holds 100 rows"

    page.click("#kinds-none")
    assert page.evaluate(MATCHING) == 0
    page.click("#filter-kinds input[value=crash]")
    assert page.evaluate(ROWS) == [CRASH]

    page.click("#kinds-all")
    page.click(f"#samples tr[data-idx='{OVERSIZED}'] button.kind[data-kind=oversized]")  # show only that kind
    assert page.evaluate(ROWS) == [OVERSIZED]
    assert page.evaluate("document.querySelector('#filter-kinds input[value=slow]').checked") is False

    page.click("#kinds-all")
    page.click("#filter-quarantined")
    assert page.evaluate(ROWS) == QUARANTINED[:100]
    page.click("#filter-quarantined")

    page.click("#pager [data-page=next]")
    assert page.evaluate(ROWS) == FLAGGED[100:]

    page.click("th[data-sort=nbytes] button")  # ascending, then descending
    page.click("th[data-sort=nbytes] button")
    assert page.evaluate(ROWS)[0] == OVERSIZED
    assert (
        page.evaluate("document.querySelector('th[data-sort=nbytes]').getAttribute('aria-sort')")
        == "descending"
    )

    page.type_text("#filter-text", "owned")
    assert page.evaluate(ROWS) == [ERROR]
    # the hostile file name is text in the cell, not an element
    assert (
        page.evaluate(f"document.querySelector(\"tr[data-idx='{ERROR}'] td.key\").textContent") == HOSTILE_KEY
    )
    assert page.evaluate("document.querySelectorAll('#samples img, #samples b').length") == 0
    page.click(f"tr[data-idx='{ERROR}'] summary")
    traceback = page.evaluate(f"document.querySelector(\"tr[data-idx='{ERROR}'] pre.traceback\").textContent")
    assert traceback.rstrip().endswith(HOSTILE_MESSAGE)
    assert page.problems() == []


@needs_chromium
def test_a_link_can_open_the_table_filtered(browser: Browser, scanned_db: Path, tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    assert main(["report", str(scanned_db), "-o", str(out)]) == 0
    page = browser.open(out.resolve().as_uri() + "#kind=crash")
    assert page.evaluate(ROWS) == [CRASH]
    assert page.problems() == []


@needs_chromium
def test_an_image_report_shows_its_previews(
    browser: Browser, image_scan: tuple[Path, list[ImageCase], Path], tmp_path: Path
) -> None:
    _, cases, db = image_scan
    page = open_report(browser, db, tmp_path / "images.html")
    decoded = page.evaluate(
        "Array.from(document.querySelectorAll('#gallery img'))"
        ".filter(img => img.complete && img.naturalWidth > 0).length"
    )
    previewable = sum(1 for case in cases if case.kinds and case.decodes) + 24  # flagged, and good ones
    assert decoded == previewable, "every embedded preview decodes in the browser (and the CSP allows it)"
    page.screenshot(tmp_path / "images.png")
    assert page.problems() == []


TRUNCATED_PREVIEW = """(() => {
  const figure = Array.from(document.querySelectorAll('#gallery figure'))
    .find(f => f.title.includes('bad/truncated.jpg'));
  const img = figure.querySelector('img'), note = figure.querySelector('.partial');
  const canvas = document.createElement('canvas');
  canvas.width = img.naturalWidth; canvas.height = img.naturalHeight;
  const context = canvas.getContext('2d', {willReadFrequently: true});
  context.drawImage(img, 0, 0);
  const pixel = (x, y) => Array.from(context.getImageData(x, y, 1, 1).data);
  const row = y => {  // the mean colour of one row: the hatch's two reds average out red
    const data = context.getImageData(0, y, canvas.width, 1).data, mean = [0, 0, 0, 0];
    data.forEach((value, i) => { mean[i % 4] += value / canvas.width; });
    return mean;
  };
  const box = note.getBoundingClientRect(), frame = figure.getBoundingClientRect();
  return {partial: img.dataset.partial, note: note.textContent, width: img.naturalWidth,
          shown: box.width > 0 && box.height > 0 && box.top >= frame.top && box.bottom <= frame.bottom + 1,
          top: pixel(2, 2), bottom: row(canvas.height - 3)};
})()"""


@needs_chromium
def test_a_truncated_file_shows_the_part_that_decodes_and_where_its_data_ends(
    browser: Browser, image_scan: tuple[Path, list[ImageCase], Path], tmp_path: Path
) -> None:
    _, _cases, db = image_scan
    page = open_report(browser, db, tmp_path / "truncated.html")
    found = page.evaluate(TRUNCATED_PREVIEW)
    match = re.fullmatch(r"truncated: (\d+)% of rows decode", found["note"])
    assert match and 0 < int(match.group(1)) < 100, found["note"]
    assert found["partial"] == found["note"] and found["shown"], "the caption is under the preview, visible"
    assert found["width"] > 0, "the preview decodes in the browser"
    red, green, _blue, _alpha = found["bottom"]
    assert red - green > 60, f"the rows past the end are hatched red: {found['bottom']}"
    red, green, _blue, _alpha = found["top"]
    assert abs(red - green) < 40 and red < 90, f"the first rows are the picture's dark top: {found['top']}"
    assert page.problems() == []


DAMAGE = ("corrupt", "empty", "decompression_bomb", "unreadable")


@needs_chromium
def test_an_image_report_counts_damaged_files_apart_and_shows_only_what_applies_to_files(
    browser: Browser, image_scan: tuple[Path, list[ImageCase], Path], tmp_path: Path
) -> None:
    _, cases, db = image_scan
    page = open_report(browser, db, tmp_path / "cards.html")
    cards = page.evaluate(
        "Object.fromEntries(Array.from(document.querySelectorAll('#summary .card')).map(c => ["
        "c.querySelector('.label').textContent,"
        " Number(c.querySelector('.n').textContent.replace(/,/g, ''))]))"
    )
    damaged = sum(1 for case in cases if set(case.kinds) & set(DAMAGE))
    assert cards["ok (loaded, not damaged)"] == len(cases) - damaged
    assert next(n for label, n in cards.items() if label.startswith("damaged files")) == damaged
    options = page.evaluate("Array.from(document.querySelectorAll('#summary dt')).map(dt => dt.textContent)")
    assert "policy.timeout" in options
    assert not {"policy.num_classes", "policy.majority", "policy.oversize_factor", "labels"} & set(options)
    kinds = page.evaluate(
        "Array.from(document.querySelectorAll('#summary dt')).find(dt => dt.textContent === 'policy.kinds')"
        ".nextElementSibling.textContent"
    )
    assert "corrupt" in kinds and "missing_field" not in kinds
    # no "slow above 6 s" line right of millisecond decodes
    assert "slow above" not in page.evaluate("document.getElementById('charts').textContent")
    # each y axis's name sits left of the axis and between the chart's top and its x axis
    boxes = page.evaluate(
        "Array.from(document.querySelectorAll('#charts svg')).filter(svg => svg.querySelector('.axis-name'))"
        ".map(svg => { const n = svg.querySelector('.axis-name').getBoundingClientRect();"
        " const axes = Array.from(svg.querySelectorAll('line.axis')).map(l => l.getBoundingClientRect());"
        " const x = axes.find(a => a.width > a.height), y = axes.find(a => a.height > a.width);"
        " return {name: [n.left, n.right, n.top, n.bottom], xaxis: x.top, yaxis: y.left, top: y.top}; })"
    )
    assert boxes, "the report has charts with a y axis"
    for box in boxes:
        _, right, top, bottom = box["name"]
        assert right <= box["yaxis"], "the y axis's name is left of the axis"
        assert top >= box["top"] - 30 and bottom <= box["xaxis"], "and not under the x axis"
    assert page.problems() == []


@needs_chromium
def test_rows_past_the_size_budget_page_through_sibling_files(
    browser: Browser, scanned_db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from datalint.report import render

    # a budget that holds a few rows, so the planted flagged samples need several pages
    monkeypatch.setattr(render, "ROWS_BUDGET", 2_000)
    out = tmp_path / "report.html"
    stale = [tmp_path / "report.rows-90.html", tmp_path / "report.rows-99.html"]
    for old in stale:
        old.write_text("a page of an older report")
    page = open_report(browser, scanned_db, out)
    siblings = []
    while (sibling := tmp_path / f"report.rows-{len(siblings) + 2}.html").is_file():
        siblings.append(sibling)
    assert len(siblings) >= 2
    island_rows = "JSON.parse(document.getElementById('dl-data').textContent).rows.map(r => r[0])"
    seen = [page.evaluate(island_rows)]
    next_link = "document.querySelector('.row-pages a[rel=next]').getAttribute('href')"
    assert page.evaluate(next_link) == "report.rows-2.html"
    assert page.problems() == []
    for number, sibling in enumerate(siblings, start=2):
        tab = browser.open(sibling.resolve().as_uri())
        assert tab.evaluate("document.getElementById('table-controls').hidden") is False, "the script ran"
        assert tab.evaluate("document.querySelector('.row-pages .page').textContent") == str(number)
        previous = "document.querySelector('.row-pages a[rel=prev]').getAttribute('href')"
        assert tab.evaluate(previous) == ("report.html" if number == 2 else f"report.rows-{number - 1}.html")
        assert tab.evaluate(ROWS) == sorted(tab.evaluate(island_rows))[:100], "the page draws its own rows"
        seen.append(tab.evaluate(island_rows))
        assert tab.problems() == []
    table = [idx for rows in seen for idx in rows]
    assert sorted(table) == FLAGGED, "every flagged sample on exactly one page"

    monkeypatch.setattr(render, "ROWS_BUDGET", 5_000_000)
    open_report(browser, scanned_db, out)  # everything fits again: the pages of the longer report go
    assert not any(sibling.exists() for sibling in siblings)
    assert all(old.exists() for old in stale), "files it did not link are not its to remove"
