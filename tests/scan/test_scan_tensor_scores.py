"""An image tensor scores as the file it was decoded from: both are averaged down by the same factor
before scoring, so one set of quality limits serves image folders and datasets alike."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from datalint.scan.images import ImageOptions, probe_image_file
from datalint.scan.probes import describe
from datalint.scan.stderr_capture import StderrCapture

torch = pytest.importorskip("torch")


def photo_like(height: int = 384, width: int = 512, seed: int = 3) -> np.ndarray:
    """A sky gradient, a few solid shapes with sharp edges and sensor-like noise, as uint8 RGB."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width].astype(np.float32)
    image = np.stack([0.3 + 0.4 * y / height, 0.4 + 0.2 * x / width, 0.6 - 0.3 * y / height], axis=-1)
    for _ in range(6):
        cy, cx, r = rng.uniform(0, height), rng.uniform(0, width), rng.uniform(20, 80)
        image[(y - cy) ** 2 + (x - cx) ** 2 < r**2] = rng.uniform(0, 1, 3)
    image += rng.normal(0, 0.03, image.shape)
    return (np.clip(image, 0, 1) * 255).astype(np.uint8)


@pytest.mark.parametrize("layout", ["chw", "hwc"])
def test_a_tensor_and_its_png_file_score_alike(tmp_path: Path, layout: str) -> None:
    pixels = photo_like()
    Image.fromarray(pixels).save(tmp_path / "photo.png")
    from_file = probe_image_file(tmp_path / "photo.png", ImageOptions(), StderrCapture()).quality
    tensor = torch.from_numpy(pixels.copy()).float() / 255  # ToTensor's values, channels last
    if layout == "chw":
        tensor = tensor.permute(2, 0, 1)
    info = describe({"image": tensor, "label": 1})["info"]
    from_tensor = info["quality"]
    assert from_file is not None and info["quality_field"] == "image"
    # Scored at full size, the tensor's entropy was ~0.5 bits and its highlights ~0.03 away from the
    # file's on real photos; reduced alike, they agree to a few hundredths.
    assert from_tensor["highlights"] == pytest.approx(from_file["highlights"], abs=0.01)
    assert from_tensor["shadows"] == pytest.approx(from_file["shadows"], abs=0.02)
    assert from_tensor["entropy"] == pytest.approx(from_file["entropy"], abs=0.1)
    assert from_tensor["colorfulness"] == pytest.approx(from_file["colorfulness"], abs=0.01)
    assert from_tensor["phash"] == from_file["phash"] or bin(
        int(from_tensor["phash"], 16) ^ int(from_file["phash"], 16)
    ).count("1") <= 2


def test_a_large_uint8_tensor_channels_last_is_scored() -> None:
    pixels = torch.from_numpy(photo_like(1024, 1536))  # uint8, HWC: a float copy of it would be 18 MB
    quality = describe(pixels)["info"]["quality"]
    assert set(quality) >= {"highlights", "shadows", "sharpness", "entropy", "colorfulness", "phash"}
