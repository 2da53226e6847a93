"""A truncated file's preview: the part that decodes, the rest hatched, how much decodes; real files."""

from __future__ import annotations

import io
import re
from pathlib import Path

import numpy as np
import pytest
from PIL import Image, ImageFile

from datalint.report.index import FlaggedSample
from datalint.report.thumbs import THUMB_SIDE, partial_preview, thumbnail


def _picture(width: int = 320, height: int = 240) -> Image.Image:
    """Noise over a gradient: every row differs, so no row decodes to the fill by chance."""
    rng = np.random.default_rng(1)
    base = np.linspace(0, 255, width)[None, :, None] * np.ones((height, 1, 3))
    noisy = np.clip(base + rng.normal(0, 30, (height, width, 3)), 0, 255).astype(np.uint8)
    return Image.fromarray(noisy)


def _encoded(image: Image.Image, format: str, **options: object) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format=format, **options)  # type: ignore[arg-type]
    return buffer.getvalue()


def _whole(data: bytes) -> np.ndarray:
    """The complete file's preview, made the way a partial one is (JPEG at a reduced scale)."""
    with Image.open(io.BytesIO(data)) as image:
        image.draft("RGB", (THUMB_SIDE * 2, THUMB_SIDE * 2))
        small = image.convert("RGB")
    small.thumbnail((THUMB_SIDE, THUMB_SIDE))
    return np.asarray(small).astype(int)


def _hatched(rows: np.ndarray) -> np.ndarray:
    """Per row: every pixel in the hatch's two reds."""
    light = (rows == (250, 214, 214)).all(axis=-1)
    dark = (rows == (214, 64, 64)).all(axis=-1)
    return (light | dark).all(axis=-1)


@pytest.mark.parametrize(
    ("format", "top_down"), [("PNG", True), ("JPEG", True), ("BMP", False), ("TIFF", True)]
)
def test_the_rows_before_the_end_are_the_files_and_the_rest_is_hatched(format: str, top_down: bool) -> None:
    original = _picture()
    whole = _encoded(original, format)
    part = partial_preview(whole[: len(whole) * 6 // 10])
    assert part is not None
    match = re.fullmatch(r"truncated: (\d+)% of rows decode", part.caption)
    assert match, part.caption
    assert int(match.group(1)) == round(part.decoded * 100)
    pixels = np.asarray(part.image).astype(int)
    reference = _whole(whole)
    assert pixels.shape == reference.shape and max(pixels.shape) == THUMB_SIDE
    height = pixels.shape[0]
    decoded = round(part.decoded * height)
    # Shrinking blends a few rows across the cut, and JPEG decodes in rows of 16-pixel blocks, the
    # last one only up to the cut: those rows are neither the file's nor hatched.
    margin = 3 + (16 * height // 240 if format == "JPEG" else 0)
    kept = slice(0, decoded - margin) if top_down else slice(height - decoded + margin, None)
    lost = slice(decoded + 1, None) if top_down else slice(0, height - decoded - 1)
    assert np.abs(pixels[kept] - reference[kept]).mean() < 1, "the decoded rows are the file's"
    assert _hatched(pixels[lost]).all(), "every row past the end is hatched"
    assert not _hatched(pixels[kept]).any()
    assert 0.35 < part.decoded < 0.75, "about as much decodes as the data that is there"


def test_a_progressive_jpeg_shows_every_row_from_its_first_scans() -> None:
    original = _picture()
    whole = _encoded(original, "JPEG", progressive=True)
    part = partial_preview(whole[: len(whole) * 6 // 10])
    assert part is not None and part.decoded == 1.0
    assert "progressive" in part.caption
    pixels = np.asarray(part.image).astype(int)
    assert np.abs(pixels - _whole(whole)).mean() < 30, "coarser, but the picture"


def test_a_file_cut_inside_its_header_keeps_the_placeholder(tmp_path: Path) -> None:
    whole = _encoded(_picture(), "PNG")
    (tmp_path / "cut.png").write_bytes(whole[:40])
    thumb = thumbnail(_flagged("cut.png"), tmp_path)
    assert thumb.data_uri is None and thumb.reason.startswith("does not decode") and thumb.partial == ""


def _flagged(key: str) -> FlaggedSample:
    detail = ("image file is truncated",)
    return FlaggedSample(0, key, "ok", ("corrupt",), detail, True, None, None, None, None, None, {})


def test_the_thumbnail_carries_the_caption_and_the_global_switch_stays_off(tmp_path: Path) -> None:
    whole = _encoded(_picture(), "JPEG")
    (tmp_path / "cut.jpg").write_bytes(whole[: len(whole) // 2])
    thumb = thumbnail(_flagged("cut.jpg"), tmp_path)
    assert thumb.data_uri and thumb.partial.startswith("truncated: ")
    assert max(thumb.width, thumb.height) <= THUMB_SIDE
    assert ImageFile.LOAD_TRUNCATED_IMAGES is False, "the measuring path still refuses truncated files"
    with pytest.raises(OSError, match="truncated"):
        Image.open(tmp_path / "cut.jpg").load()
