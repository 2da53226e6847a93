"""A small image folder with good files, damaged files and unusual-but-valid files, generated.

Scanned for real by the report tests: `datalint scan --images DIR --max-pixels 30000`.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path

from PIL import Image

HOSTILE_NAME = "<img src=x onerror=alert(1)>.png"
MAX_PIXELS = 30_000  # scan with --max-pixels MAX_PIXELS: bad/big.png (200x200) is over it, all else under


@dataclass(frozen=True)
class ImageCase:
    name: str
    kinds: tuple[str, ...]  # what a scan of it reports ("" for a good file)
    decodes: bool  # whether a preview can be made


def _jpeg(image: Image.Image, **options: object) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format="JPEG", quality=85, **options)
    return buffer.getvalue()


def _png(image: Image.Image) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def _picture(width: int, height: int, seed: int) -> Image.Image:
    """A gradient with a coloured square, different for each seed, so previews are not blank."""
    image = Image.linear_gradient("L").resize((width, height)).convert("RGB")
    colour = ((seed * 70) % 256, (seed * 130) % 256, (seed * 200) % 256)
    image.paste(colour, (width // 4, height // 4, width // 2, height // 2))
    return image


def make_image_folder(root: Path, good: int = 30) -> list[ImageCase]:
    """Write the folder; return every file with what a scan should say about it, sorted by name."""
    root.mkdir(parents=True, exist_ok=True)
    cases = []
    for i in range(good):
        name = f"good/{i:03d}.jpg" if i % 3 else f"good/{i:03d}.png"
        path = root / name
        path.parent.mkdir(exist_ok=True)
        size = (64 + 16 * (i % 4), 48 + 8 * (i % 3))
        path.write_bytes(_png(_picture(*size, i)) if name.endswith(".png") else _jpeg(_picture(*size, i)))
        cases.append(ImageCase(name, (), True))
    whole = _jpeg(_picture(160, 120, 99))
    bad = root / "bad"
    bad.mkdir(exist_ok=True)
    (bad / "truncated.jpg").write_bytes(whole[: len(whole) // 3])
    (bad / "empty.jpg").write_bytes(b"")
    (bad / "not_an_image.jpg").write_bytes(b"<html><body>404 Not Found</body></html>\n")
    (bad / "cmyk.jpg").write_bytes(_jpeg(_picture(80, 60, 5).convert("CMYK")))
    (bad / "alpha.png").write_bytes(_png(_picture(80, 60, 6).convert("RGBA")))
    sixteen = Image.linear_gradient("L").resize((80, 60)).convert("I;16")
    (bad / "deep.png").write_bytes(_png(sixteen))
    (bad / HOSTILE_NAME).write_bytes(_jpeg(_picture(72, 72, 7)))  # a JPEG named .png
    (bad / "big.png").write_bytes(_png(_picture(200, 200, 8)))  # over MAX_PIXELS: a "bomb" to the scan
    cases += [
        ImageCase("bad/truncated.jpg", ("corrupt",), True),  # the part that decodes
        ImageCase("bad/empty.jpg", ("empty",), False),
        ImageCase("bad/not_an_image.jpg", ("corrupt",), False),
        ImageCase("bad/cmyk.jpg", ("cmyk",), True),
        ImageCase("bad/alpha.png", ("alpha",), True),
        ImageCase("bad/deep.png", ("high_bit_depth", "grayscale"), True),
        ImageCase(f"bad/{HOSTILE_NAME}", ("extension_mismatch",), True),
        ImageCase("bad/big.png", ("decompression_bomb",), False),
    ]
    return sorted(cases, key=lambda case: case.name)
