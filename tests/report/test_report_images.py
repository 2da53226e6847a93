"""Image scans: format and size charts, and previews of flagged and good files, from a real scan."""

from __future__ import annotations

import base64
import io
import shutil
from pathlib import Path

import pytest
from PIL import Image
from report_images import HOSTILE_NAME, ImageCase
from report_pages import ParsedPage, parse_page

from datalint.cli import main

pytestmark = pytest.mark.slow


def previews(page: ParsedPage) -> dict[str, tuple[str | None, str]]:
    """Per file in the gallery: (data URI, "") for a preview, (None, reason) for a placeholder."""
    out: dict[str, tuple[str | None, str]] = {}
    for i, element in enumerate(page.elements):
        if element.tag != "figure":
            continue
        picture = page.elements[i + 1]
        key = (element.attrs["title"] or "").split(" ", 1)[1].split(" · ")[0]
        out[key] = (picture.attrs["src"], "") if picture.tag == "img" else (None, picture.text)
    return out


def test_previews_of_flagged_files_and_placeholders_for_the_rest(
    image_scan: tuple[Path, list[ImageCase], Path], tmp_path: Path
) -> None:
    _, cases, db = image_scan
    out = tmp_path / "r.html"
    assert main(["report", str(db), "-o", str(out)]) == 0
    page = parse_page(out)
    rows = {row["key"]: row for row in page.table_rows()}
    shown = previews(page)
    for case in cases:
        if not case.kinds:
            assert case.name not in rows
            continue
        assert set(rows[case.name]["kinds"]) == set(case.kinds), case.name
        uri, placeholder = shown[case.name]
        if case.decodes:
            assert uri is not None and uri.startswith("data:image/jpeg;base64,"), case.name
            with Image.open(io.BytesIO(base64.b64decode(uri.split(",", 1)[1]))) as preview:
                assert max(preview.size) <= 96, "previews are small"
        elif "decompression_bomb" in case.kinds:
            assert placeholder == "not decoded: the scan found it unsafe to decode"
        else:
            assert uri is None and "does not decode" in placeholder, (case.name, placeholder)
    good = [name for name in shown if name.startswith("good/")]
    assert len(good) == 24 and all(shown[name][0] for name in good), "a spread of good files, previewed"
    assert HOSTILE_NAME in page.text and not [
        e for e in page.elements if e.tag == "img" and "onerror" in e.attrs
    ]
    titles = [e.attrs["aria-label"] for e in page.find("svg")]
    assert {
        "File size",
        "Pixels per image",
        "Image sizes (width x height)",
        "Image formats",
        "Image modes",
    } <= set(titles)
    assert "bytes per sample" not in " ".join(titles).lower(), "an image scan keeps file sizes in info"
    assert [e.text for e in page.find("text", class_="limit-label")][
        -1
    ] == "bomb above 30 kpx"  # --max-pixels
    labels = [e.text for e in page.find("text", class_="bar-label")]
    assert {"JPEG", "PNG", "CMYK", "RGBA", "I;16"} <= set(labels)


def test_previews_can_be_turned_off_and_found_in_a_moved_folder(
    image_scan: tuple[Path, list[ImageCase], Path], tmp_path: Path
) -> None:
    root, cases, db = image_scan
    out = tmp_path / "r.html"
    elsewhere = tmp_path / "empty"
    elsewhere.mkdir()
    assert main(["report", str(db), "-o", str(out), "--image-root", str(elsewhere)]) == 0
    assert previews(parse_page(out))["bad/cmyk.jpg"] == (None, "file not found (moved? see --image-root)")
    moved = tmp_path / "moved"
    shutil.copytree(root, moved)
    assert main(["report", str(db), "-o", str(out), "--image-root", str(moved), "--thumbnails", "0"]) == 0
    page = parse_page(out)
    shown = previews(page)
    assert "bad/cmyk.jpg" not in shown and shown["good/000.png"][0] is not None
    flagged = sum(1 for case in cases if case.kinds)
    assert f"{flagged} more flagged files not previewed" in page.text


def test_the_status_shown_agrees_with_the_findings(
    image_scan: tuple[Path, list[ImageCase], Path], tmp_path: Path
) -> None:
    _, cases, db = image_scan
    out = tmp_path / "r.html"
    assert main(["report", str(db), "-o", str(out)]) == 0
    page = parse_page(out)
    rows = {row["key"]: row for row in page.table_rows()}
    damage = {"corrupt", "empty", "unreadable", "decompression_bomb"}
    for case in cases:
        if case.kinds:  # a file that loaded: damaged beside a damage kind, ok beside facts about it
            assert rows[case.name]["status"] == ("damaged" if damage & set(case.kinds) else "ok"), case.name
    static = [e.text for e in page.find("td", class_="status")]  # the rows drawn without scripts
    assert "damaged" in static and sorted(static) == sorted(row["status"] for row in rows.values())
