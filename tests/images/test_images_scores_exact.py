"""The fast score paths give the scores of the plain ones to the last bit: stored indexes, limits and
findings stay valid across the change. Real pixels, real PNG files of every colour type."""

from __future__ import annotations

import io
import math

import cv2
import numpy as np
import pytest
from PIL import Image

from datalint.scan import images, quality


def _arrays(seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    arrays: list[np.ndarray] = [np.array([0.25], np.float32), np.array([3.0, 1.0])]
    for _ in range(60):
        size = int(rng.integers(1, 5000))
        arrays.append(rng.random(size, dtype=np.float32))
        arrays.append(rng.integers(0, 4, size).astype(np.float64) / 3)  # ties, as a flat image has
    with_nan = rng.random(100)
    with_nan[17] = math.nan
    return [*arrays, with_nan]


@pytest.mark.parametrize("wanted", [(1, 99), (50,), (0, 100), (25, 75)])
def test_percentiles_are_numpys_to_the_last_bit(wanted: tuple[float, ...]) -> None:
    for values in _arrays(3):
        expected = [float(value) for value in np.percentile(values, list(wanted))]
        got = quality.percentiles(values, wanted)
        assert np.array_equal(got, expected, equal_nan=True), (values.size, values.dtype)


@pytest.mark.parametrize("wanted", [(1, 99), (50,), (0, 100), (25, 75)])
def test_percentiles_by_grey_level_are_numpys_to_the_last_bit(wanted: tuple[float, ...]) -> None:
    for values in _arrays(5)[:-1]:  # the last holds a NaN, which has no level: score_pixels checks
        for scaled in (values, values * 3 - 1):  # levels clipped at both ends
            levels = np.clip(scaled * 255, 0, 255).astype(np.uint8)
            counts = np.bincount(levels.ravel(), minlength=256)
            expected = [float(value) for value in np.percentile(scaled, list(wanted))]
            assert quality.percentiles_by_level(scaled, levels, counts, wanted) == expected, scaled.size


def test_the_exposure_scores_are_numpys_percentiles_of_the_grey_image() -> None:
    rng = np.random.default_rng(11)
    weights = np.array([0.299, 0.587, 0.114])
    images_ = [
        rng.integers(0, 256, (150, 200, 3), dtype=np.uint8),
        (rng.integers(0, 3, (90, 70, 3)) * 100).astype(np.uint8),  # few levels, many ties
        rng.integers(0, 65536, (40, 30), dtype=np.uint16),
        rng.random((64, 48, 3), dtype=np.float32),
    ]
    for pixels in images_:
        rgb = quality._as_float_rgb(pixels)
        grey = rgb @ weights if rgb.ndim == 3 else rgb
        shadows, highlights = (round(float(value), 4) for value in np.percentile(grey, [1, 99]))
        scores = quality.score_pixels(pixels)
        assert (scores["shadows"], scores["highlights"]) == (shadows, highlights), pixels.dtype
    with_nan = rng.random((20, 20, 3), dtype=np.float32)
    with_nan[3, 4, 1] = np.nan
    assert "highlights" not in quality.score_pixels(with_nan)  # NaN, as numpy's percentile gives


def test_colourfulness_and_hash_are_the_plain_formulas() -> None:
    rng = np.random.default_rng(8)
    for shape in [(40, 52, 3), (33, 17, 3), (64, 64, 2), (9, 9)]:
        rgb = rng.random(shape, dtype=np.float32)
        plain = float(np.mean(rgb.max(axis=2) - rgb.min(axis=2))) if rgb.ndim == 3 else 0.0
        assert quality.colorfulness(rgb) == plain
        grey = rgb if rgb.ndim == 2 else rgb[:, :, 0]
        frequencies = cv2.dct(quality._resized(grey, 32))[:8, :8].ravel()
        bits = frequencies[1:] > np.median(frequencies[1:])
        value = 0
        for bit in bits:
            value = (value << 1) | int(bit)
        assert quality.phash(grey) == f"{value << 1:016x}"


def _png(mode: str, rng: np.random.Generator, **options: object) -> bytes:
    height, width = 150, 200
    y, x = np.mgrid[0:height, 0:width]
    base = ((x * 255 // width) ^ (y * 3)) + rng.integers(0, 40, (height, width))
    if mode == "I;16":
        image = Image.fromarray((base * 200).astype(np.uint16))
    else:
        rgb = np.stack([base, base[::-1], base[:, ::-1]], axis=2) % 256
        image = Image.fromarray(rgb.astype(np.uint8)).convert(mode)
    buffer = io.BytesIO()
    image.save(buffer, "PNG", **options)
    return buffer.getvalue()


@pytest.mark.parametrize(
    ("mode", "options"),
    [("RGB", {}), ("L", {}), ("LA", {}), ("RGBA", {}), ("P", {"transparency": 3}), ("I;16", {}),
     ("RGB", {"compress_level": 0}), ("1", {})],
)  # fmt: skip
def test_a_png_is_scored_from_its_check_as_from_pillows_own_decode(
    mode: str, options: dict[str, object]
) -> None:
    data = _png(mode, np.random.default_rng(4), **options)
    findings, rebuilt = images.check_png_keeping_pixels(data)
    assert findings == images.check_png(data) == [] and rebuilt is not None
    # a palette image the palette check decoded comes back decoded; the rest as a PNG to decode
    decoded = rebuilt if isinstance(rebuilt, Image.Image) else Image.open(io.BytesIO(rebuilt))
    with Image.open(io.BytesIO(data)) as original, decoded as copy:
        assert (copy.mode, copy.size, copy.info.get("transparency")) == (
            original.mode, original.size, original.info.get("transparency"),
        )  # fmt: skip
        assert np.array_equal(np.asarray(copy), np.asarray(original))
        assert images._quality_scores(original, rebuilt) == images._quality_scores(original, None)


def test_a_damaged_or_huge_png_is_scored_the_old_way_or_not_at_all(monkeypatch: pytest.MonkeyPatch) -> None:
    data = _png("RGB", np.random.default_rng(6))
    cut = data[: len(data) // 2] + data[-12:]  # the image data ends early, IEND still there
    findings, rebuilt = images.check_png_keeping_pixels(cut)
    assert [f.kind for f in findings] == ["corrupt"] and rebuilt is None
    monkeypatch.setattr(images, "_KEEP_LIMIT", 1000)  # smaller than this image's 90,150 bytes
    findings, rebuilt = images.check_png_keeping_pixels(data)
    assert findings == [] and rebuilt is None
    probe = images.probe_image_bytes(data, ".png", images.ImageOptions(), images.StderrCapture())
    with Image.open(io.BytesIO(data)) as original:
        assert probe.quality == images._quality_scores(original, None) and probe.quality is not None


def test_a_jpeg_is_scored_in_rgb_order_from_its_reduced_decode() -> None:
    rng = np.random.default_rng(9)
    rgb = np.zeros((240, 320, 3), np.uint8)
    rgb[:, :, 0] = 200  # red, which weighs 0.299 in the luminance, blue 0.114
    rgb[:, :, 2] = rng.integers(0, 60, (240, 320))
    buffer = io.BytesIO()
    Image.fromarray(rgb).save(buffer, "JPEG", quality=95)
    data = buffer.getvalue()
    probe = images.probe_image_bytes(data, ".jpg", images.ImageOptions(), images.StderrCapture())
    bgr = cv2.imdecode(
        np.frombuffer(data, np.uint8), cv2.IMREAD_REDUCED_COLOR_4 | cv2.IMREAD_IGNORE_ORIENTATION
    )
    assert probe.quality == quality.score_pixels(bgr[:, :, ::-1])
    assert probe.quality is not None and probe.quality["highlights"] > 0.24  # red read as blue: under 0.17
