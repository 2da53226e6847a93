"""A labelled, seeded image corpus for the quality kinds and near-duplicates.

    python benchmarks/quality_corpus.py OUT --n 2000 --seed 7
    python benchmarks/quality_corpus.py OUT --photos DIR --seed 7     # from real photographs

With `--photos DIR`, the images are the photographs in DIR (every file Pillow reads whose long side
is at least 600 px, e.g. the camera samples of github.com/drewnoakes/metadata-extractor-images,
jpg/), each turned upright and resized to 512 px on its long side as a prepared dataset would be;
a seeded share of them gets one planted kind, applied to the photograph itself (`degrade`), and
the rest are labelled `clean`. A clean photograph can still be dark or blurry in fact: judge each
finding on one before counting it false (benchmarks/data/quality-photos-verdicts.csv).

Writes OUT/images/img_NNNNN.{jpg,png} and OUT/labels.json: {relative path: {"kind": ..., "group": ...}}.
File names say nothing about the kind. Every quality kind is planted, with clean look-alikes that a
naive score gets wrong: a night scene (dark, but with lit detail), a smooth gradient (no fine detail,
yet not out of focus), a low-saturation colour scene (nearly, but not, grey). Near-duplicate groups
hold an original and transforms of it: JPEG quality 50 and 95, resized 0.5x and 2x, cropped 5-10%,
brightness +-8%, and the same pixels re-encoded as PNG. Needs only numpy, Pillow and OpenCV.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import cv2
import numpy as np
from PIL import Image

SIZES = ((256, 192), (240, 180), (288, 192), (256, 171))


def scene(rng: np.random.Generator, width: int, height: int) -> np.ndarray:
    """A photo-like colour image: a gradient sky, blobs and ellipses, edges and mild texture."""
    y, x = np.mgrid[0:height, 0:width].astype(np.float32)
    base = rng.uniform(0.25, 0.7, 3)
    tilt = rng.uniform(-0.3, 0.3, 3)
    image = base + tilt * (y / height - 0.5)[..., None]
    for _ in range(rng.integers(6, 14)):
        cx, cy = rng.uniform(0, width), rng.uniform(0, height)
        rx, ry = rng.uniform(5, width / 3), rng.uniform(5, height / 3)
        mask = ((x - cx) / rx) ** 2 + ((y - cy) / ry) ** 2 < 1
        image[mask] = rng.uniform(0.05, 0.95, 3)
    image += rng.normal(0, 0.03, image.shape)
    return np.clip(image, 0, 1)


def to_uint8(image: np.ndarray) -> np.ndarray:
    return (np.clip(image, 0, 1) * 255 + 0.5).astype(np.uint8)


def night(rng: np.random.Generator, width: int, height: int) -> np.ndarray:
    image = scene(rng, width, height) * 0.12
    for _ in range(rng.integers(25, 45)):  # lit windows and lamps: 2-5% of the picture
        x0, y0 = rng.integers(0, width - 8), rng.integers(0, height - 8)
        image[y0 : y0 + rng.integers(4, 9), x0 : x0 + rng.integers(4, 9)] = rng.uniform(0.7, 1.0, 3)
    return image


def gradient(rng: np.random.Generator, width: int, height: int) -> np.ndarray:
    y, x = np.mgrid[0:height, 0:width].astype(np.float32)
    a, b = rng.uniform(0.1, 0.4, 3), rng.uniform(0.6, 0.95, 3)
    t = (x / width * rng.uniform(0.3, 1) + y / height * rng.uniform(0.3, 1)) / 2
    return a + (b - a) * t[..., None]


def planted(kind: str, rng: np.random.Generator, width: int, height: int) -> np.ndarray:
    image = scene(rng, width, height)  # drawn for every kind, so a seed still gives the same corpus
    if kind == "clean_night":
        return night(rng, width, height)
    if kind == "clean_gradient":
        return gradient(rng, width, height)
    return degrade(kind, image, rng)


def degrade(kind: str, image: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """`image` (H x W x 3, 0..1) with the planted kind: the same for a generated scene and a photo."""
    width = image.shape[1]
    if kind == "dark":
        return image * rng.uniform(0.05, 0.15)
    if kind == "light":
        return 0.88 + image * rng.uniform(0.05, 0.11)
    if kind == "blurry":
        sigma = width * rng.uniform(0.02, 0.04)
        return cv2.GaussianBlur(image.astype(np.float32), (0, 0), sigma)
    if kind == "low_information":
        return np.ones_like(image) * rng.uniform(0.1, 0.9, 3) + rng.normal(0, 0.004, image.shape)
    if kind == "grayscale":
        return np.repeat(image.mean(axis=2, keepdims=True), 3, axis=2)
    if kind == "clean_muted":  # a misty scene: little colour, but some
        grey = image.mean(axis=2, keepdims=True)
        return grey + (image - grey) * 0.3
    return image


PLANTED = {
    "dark": 40, "light": 40, "blurry": 40, "low_information": 40, "grayscale": 40, "odd_size": 12,
    "odd_aspect": 12, "clean_night": 40, "clean_gradient": 40, "clean_muted": 40,
}  # fmt: skip
TRANSFORMS = ("q50", "q95", "half", "double", "crop", "brighter", "darker", "png")


def transformed(
    original: Image.Image, how: str, rng: np.random.Generator
) -> tuple[Image.Image, dict[str, Any]]:
    w, h = original.size
    if how == "half":
        return original.resize((w // 2, h // 2), Image.Resampling.LANCZOS), {}
    if how == "double":
        return original.resize((w * 2, h * 2), Image.Resampling.BICUBIC), {}
    if how == "crop":
        cut = rng.uniform(0.05, 0.10)
        dx, dy = int(w * cut / 2), int(h * cut / 2)
        return original.crop((dx, dy, w - dx, h - dy)), {}
    if how in ("brighter", "darker"):
        factor = 1.08 if how == "brighter" else 0.92
        return Image.fromarray(to_uint8(np.asarray(original) / 255.0 * factor)), {}
    if how == "png":
        return original, {"format": "PNG"}
    return original, {"quality": 50 if how == "q50" else 95}


def save(image: Image.Image, path: Path, **options: Any) -> Path:
    fmt = options.pop("format", "JPEG")
    path = path.with_suffix(".png" if fmt == "PNG" else ".jpg")
    image.save(path, fmt, **({"quality": options.get("quality", 88)} if fmt == "JPEG" else {}))
    return path


def generate(out: Path, n: int, seed: int) -> dict[str, dict[str, Any]]:
    rng = np.random.default_rng(seed)
    folder = out / "images"
    folder.mkdir(parents=True, exist_ok=True)
    plan: list[str] = [kind for kind, count in PLANTED.items() for _ in range(count)]
    groups = 40
    clean = n - len(plan) - groups * (1 + len(TRANSFORMS))
    plan += ["clean"] * clean + ["group"] * groups
    order = rng.permutation(len(plan))
    labels: dict[str, dict[str, Any]] = {}
    number = 0
    for position in order:
        kind = plan[position]
        width, height = SIZES[rng.integers(len(SIZES))]
        if kind == "odd_size":
            width, height = (2000, 1500) if rng.random() < 0.5 else (48, 36)
        elif kind == "odd_aspect":
            # a banner or a strip (4:1 either way) at a typical area: a 1:2 portrait among landscape
            # scenes was odd until odd_aspect took the long side over the short (photo sets mix both)
            width, height = (384, 96) if rng.random() < 0.5 else (96, 384)
        picture = Image.fromarray(to_uint8(planted(kind, rng, width, height)))
        if kind != "group":
            path = save(picture, folder / f"img_{number:05d}")
            labels[path.relative_to(out / "images").as_posix()] = {"kind": kind}
            number += 1
            continue
        group = f"g{number}"
        path = save(picture, folder / f"img_{number:05d}", quality=90)
        labels[path.relative_to(out / "images").as_posix()] = {"kind": "clean", "group": group}
        number += 1
        for how in TRANSFORMS:
            copy, options = transformed(picture, how, rng)
            path = save(copy, folder / f"img_{number:05d}", **options)
            labels[path.relative_to(out / "images").as_posix()] = {
                "kind": "clean",
                "group": group,
                "transform": how,
            }
            number += 1
    (out / "labels.json").write_text(json.dumps(labels, indent=0, sort_keys=True))
    return labels


# What share of the photographs gets each planted kind; the rest stay as taken.
PHOTO_SHARES = {
    "dark": 0.07, "light": 0.07, "blurry": 0.07, "low_information": 0.07, "grayscale": 0.07,
    "odd_size": 0.04, "odd_aspect": 0.04,
}  # fmt: skip
PHOTO_SIDE = 512


def photographs(folder: Path) -> list[Path]:
    """The files of `folder` (not its sub-folders) Pillow reads whole, at least 600 px on the long side."""
    found = []
    for path in sorted(folder.iterdir()):
        try:
            with Image.open(path) as image:
                image.load()
                if max(image.size) >= 600:
                    found.append(path)
        except Exception:  # not an image, or one Pillow cannot read: not a photograph for this set
            continue
    return found


def prepared(path: Path) -> Image.Image:
    """The photograph upright, in RGB, PHOTO_SIDE px on its long side."""
    from PIL import ImageOps

    with Image.open(path) as image:
        upright = ImageOps.exif_transpose(image).convert("RGB")
    scale = PHOTO_SIDE / max(upright.size)
    size = (max(1, round(upright.width * scale)), max(1, round(upright.height * scale)))
    return upright.resize(size, Image.Resampling.LANCZOS)


def odd_shape(kind: str, image: Image.Image, rng: np.random.Generator) -> Image.Image:
    """A photograph far from the set's size (odd_size) or shape (odd_aspect)."""
    w, h = image.size
    if kind == "odd_size":
        scale = (2048 if rng.random() < 0.5 else 48) / max(w, h)
        return image.resize((max(1, round(w * scale)), max(1, round(h * scale))), Image.Resampling.LANCZOS)
    wide = rng.random() < 0.5  # 4:1 or 1:2, cut from the middle, then brought to the photo's area
    cw, ch = (w, max(1, w // 4)) if wide else (min(w, h // 2), h)
    left, top = (w - cw) // 2, (h - ch) // 2
    scale = ((w * h) / (cw * ch)) ** 0.5  # an odd shape at a typical size: odd_aspect alone
    cut = image.crop((left, top, left + cw, top + ch))
    return cut.resize((round(cw * scale), round(ch * scale)), Image.Resampling.LANCZOS)


def generate_from_photos(out: Path, photos: Path, seed: int) -> dict[str, dict[str, Any]]:
    rng = np.random.default_rng(seed)
    folder = out / "images"
    folder.mkdir(parents=True, exist_ok=True)
    sources = photographs(photos)
    plan = [kind for kind, share in PHOTO_SHARES.items() for _ in range(round(share * len(sources)))]
    plan += ["clean"] * (len(sources) - len(plan))
    labels: dict[str, dict[str, Any]] = {}
    for number, (source, kind) in enumerate(zip(sources, rng.permutation(plan), strict=True)):
        picture = prepared(source)
        if kind in ("odd_size", "odd_aspect"):
            picture = odd_shape(kind, picture, rng)
        elif kind != "clean":
            picture = Image.fromarray(to_uint8(degrade(kind, np.asarray(picture) / 255.0, rng)))
        path = save(picture, folder / f"img_{number:05d}")
        labels[path.relative_to(folder).as_posix()] = {"kind": str(kind), "source": source.name}
    (out / "labels.json").write_text(json.dumps(labels, indent=0, sort_keys=True))
    return labels


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--photos", type=Path, help="a folder of photographs to build the set from")
    args = parser.parse_args()
    if args.photos is not None:
        labels = generate_from_photos(args.out, args.photos, args.seed)
    else:
        labels = generate(args.out, args.n, args.seed)
    print(f"{len(labels)} images in {args.out / 'images'}")


if __name__ == "__main__":
    main()
