"""The report's quality views in a real headless Chromium, on real scans of generated pixels: a
gallery per kind sorted by score under its histogram with the limit drawn, near-duplicate groups
and leak pairs side by side, and the query that lists what the page leaves out."""

from __future__ import annotations

import html as html_text
import importlib.util
import json
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
from PIL import Image
from report_browser import Browser, Page, chromium

from datalint.cli import main

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def _corpus() -> ModuleType:
    """The seeded generator of the quality benchmark: scenes and planted kinds as pixels."""
    spec = importlib.util.spec_from_file_location(
        "report_quality_corpus", ROOT / "benchmarks/quality_corpus.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


corpus = _corpus()


def _scan(folder: Path, db: Path, *extra: str) -> None:
    command = [
        sys.executable, "-m", "datalint", "scan", "--images", str(folder), "--db", str(db),
        "--workers", "1", "--progress", "none", *extra,
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode in (0, 1), done.stderr


@pytest.fixture(scope="module")
def splits(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(train index, val index scanned --against train): clean scenes, two dark images, one of
    every other kind, a re-encoded near-duplicate, and a val image that is a train image resized."""
    base = tmp_path_factory.mktemp("quality-report")
    train, val = base / "train", base / "val"
    train.mkdir()
    val.mkdir()
    rng = np.random.default_rng(11)

    def write(folder: Path, name: str, pixels: np.ndarray) -> None:
        Image.fromarray(corpus.to_uint8(pixels)).save(folder / name, quality=90)

    for number in range(20):
        write(train, f"clean_{number:02d}.jpg", corpus.scene(rng, 256, 192))
    for kind in ("dark", "light", "blurry", "low_information", "grayscale"):
        write(train, f"{kind}.jpg", corpus.planted(kind, rng, 256, 192))
    write(train, "dark_2.jpg", 0.6 * corpus.planted("dark", rng, 256, 192))  # darker still
    original = Image.fromarray(corpus.to_uint8(corpus.scene(rng, 256, 192)))
    original.save(train / "original.jpg", quality=90)
    original.save(train / "recoded_q50.jpg", quality=50)
    for number in range(10):
        write(val, f"fresh_{number}.jpg", corpus.scene(rng, 256, 192))
    Image.open(train / "clean_05.jpg").resize((200, 150)).save(val / "leaked.jpg", quality=70)
    _scan(train, base / "train.db")
    _scan(val, base / "val.db", "--against", str(base / "train.db"))
    return base / "train.db", base / "val.db"


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Browser]:
    started = Browser(chromium(), tmp_path_factory.mktemp("profile"))
    try:
        yield started
    finally:
        started.close()


def _open(browser: Browser, db: Path, out: Path, *extra: str) -> Page:
    assert main(["report", str(db), "-o", str(out), *extra]) == 0
    return browser.open(out.resolve().as_uri())


def _figures(page: Page, selector: str) -> list[dict[str, object]]:
    """The previews under `selector`: caption, and the decoded image's size (0 for a placeholder)."""
    return page.evaluate(  # type: ignore[no-any-return]
        f"Array.from(document.querySelectorAll({json.dumps(selector + ' figure')})).map(f => ({{"
        " caption: f.querySelector('figcaption').textContent,"
        " width: f.querySelector('img') ? f.querySelector('img').naturalWidth : 0 }))"
    )


def test_the_dark_gallery_shows_the_planted_images_darkest_first_under_the_limit_line(
    browser: Browser, splits: tuple[Path, Path], tmp_path: Path
) -> None:
    train, _val = splits
    page = _open(browser, train, tmp_path / "report.html")
    dark = _figures(page, "#quality-dark .gallery")
    assert [str(figure["caption"]).split(" ", 1)[1] for figure in dark] == ["dark_2.jpg", "dark.jpg"]
    assert all(figure["width"] for figure in dark), "each preview decodes in the browser"
    for kind in ("light", "blurry", "low_information", "grayscale"):
        shown = [
            str(figure["caption"]).split(" ", 1)[1] for figure in _figures(page, f"#quality-{kind} .gallery")
        ]
        assert shown == [f"{kind}.jpg"], kind
    # the limit is drawn where the policy put it, and the dark images' red bars lie left of it
    line = page.evaluate(
        "(() => { const g = document.querySelector('#quality-dark svg g.threshold');"
        " const x = g.querySelector('line').getBoundingClientRect().x;"
        " return [g.querySelector('text').textContent, x]; })()"
    )
    assert line[0] == "dark below 0.14"
    red = page.evaluate(
        "Array.from(document.querySelectorAll('#quality-dark svg rect.over')).map(r => {"
        " const b = r.getBoundingClientRect();"
        " return [b.x + b.width, r.querySelector('title').textContent]; })"
    )
    assert red and all(right <= line[1] for right, _title in red), (red, line)
    assert sum(int(title.split(": ")[1].split(" ")[0]) for _right, title in red) == 2
    assert page.problems() == [], "no script error and no CSP violation"


def test_the_near_duplicate_group_shows_both_members_side_by_side(
    browser: Browser, splits: tuple[Path, Path], tmp_path: Path
) -> None:
    train, _val = splits
    page = _open(browser, train, tmp_path / "report.html")
    groups = page.evaluate("document.querySelectorAll('#quality-near_duplicate .dup-group').length")
    assert groups == 1
    members = _figures(page, "#quality-near_duplicate .dup-group")
    assert [str(m["caption"]).split(" ", 1)[1] for m in members] == ["original.jpg", "recoded_q50.jpg"]
    assert all(m["width"] for m in members)
    tops = page.evaluate(
        "Array.from(document.querySelectorAll('.dup-group figure')).map(f => f.getBoundingClientRect().top)"
    )
    assert len(set(tops)) == 1, "side by side, on one row"
    assert page.problems() == []


def test_a_leak_is_shown_beside_the_other_splits_file(
    browser: Browser, splits: tuple[Path, Path], tmp_path: Path
) -> None:
    _train, val = splits
    page = _open(browser, val, tmp_path / "val.html")
    pair = _figures(page, "#quality-leak .leak-pair")
    assert len(pair) == 2
    assert str(pair[0]["caption"]).endswith("leaked.jpg") and str(pair[1]["caption"]).endswith("clean_05.jpg")
    assert all(figure["width"] for figure in pair), "the other split's file is found and previewed"
    assert page.problems() == []


def test_previews_are_bounded_and_the_rest_are_one_query_away(
    splits: tuple[Path, Path], tmp_path: Path
) -> None:
    train, _val = splits
    out = tmp_path / "small.html"
    assert main(["report", str(train), "-o", str(out), "--quality-thumbnails", "1"]) == 0
    html = out.read_text()
    dark = html[html.index('id="quality-dark"') : html.index('id="quality-light"')]
    assert dark.count("<figure") == 1 and "1 more image not previewed" in dark
    command = dark.split("sqlite-utils query ", 1)[1].split("</code>", 1)[0]
    query = html_text.unescape(command).split(" ", 1)[1].strip().strip('"')
    with sqlite3.connect(train) as connection:
        listed = [row[1] for row in connection.execute(query)]
    assert listed == ["dark_2.jpg", "dark.jpg"], "the query lists them all, in the gallery's order"
