"""Small embedded previews of image files for the report's gallery.

A preview shows the stored pixels as the DataLoader receives them (no EXIF rotation applied),
shrunk to a small JPEG inside a data: URI, so the page needs no file beside it. Files the scan
saw crash or hang a worker, and decompression bombs, are never decoded here: the report runs
in one process without the scan's isolation, so it only decodes what the scan decoded safely
or what failed with a plain exception. Everything else gets a placeholder with the reason.
"""

from __future__ import annotations

import base64
import io
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from datalint.files import read_regular_file
from datalint.report.index import FlaggedSample
from datalint.text import exception_text, printable

THUMB_SIDE = 96
JPEG_QUALITY = 70
MAX_PREVIEW_PIXELS = 64_000_000  # refuse to decode past this, whatever the scan's --max-pixels was
MAX_PREVIEW_FILE_BYTES = 256 * 1024 * 1024  # and to read a file larger than this into memory

# Outcomes of the scan after which decoding the file again in this process is not safe.
UNSAFE_STATUSES = frozenset({"crash", "timeout"})
UNSAFE_KINDS = frozenset({"decompression_bomb", "crash", "timeout"})


@dataclass(frozen=True)
class Thumbnail:
    sample: FlaggedSample
    data_uri: str | None  # None: show the placeholder with `reason`
    reason: str = ""
    width: int = 0
    height: int = 0


class NoPreview(Exception):
    """This file cannot be previewed; the message says why, for the placeholder."""


def resolve_image(key: str | None, root: Path | None) -> Path | None:
    if not key:
        return None
    path = Path(key)
    if path.is_absolute() or root is None:
        return path
    return root / path


def thumbnail(sample: FlaggedSample, root: Path | None) -> Thumbnail:
    """One preview; any failure of this one file becomes its placeholder (per-sample boundary)."""
    if sample.status in UNSAFE_STATUSES or UNSAFE_KINDS.intersection(sample.kinds):
        return Thumbnail(sample, None, "not decoded: the scan found it unsafe to decode")
    path = resolve_image(sample.key, root)
    if path is None:
        return Thumbnail(sample, None, "no file name in the index")
    try:
        # Read without blocking first: a preview that became a FIFO must not hang the report.
        raw = read_regular_file(path, limit=MAX_PREVIEW_FILE_BYTES)
    except FileNotFoundError:
        return Thumbnail(sample, None, "file not found (moved? see --image-root)")
    except OSError as exc:
        return Thumbnail(sample, None, f"not read: {printable(exc.strerror or exception_text(exc))}")
    try:
        data, width, height = _encode_preview(raw)
    except NoPreview as exc:
        return Thumbnail(sample, None, str(exc))
    except Exception as exc:  # per-sample boundary: a damaged file must not stop the report
        return Thumbnail(sample, None, f"does not decode: {type(exc).__name__}")
    uri = "data:image/jpeg;base64," + base64.b64encode(data).decode("ascii")
    return Thumbnail(sample, uri, "", width, height)


def _encode_preview(raw: bytes) -> tuple[bytes, int, int]:
    from PIL import Image

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Pillow's bomb and EXIF warnings: the scan reported them
        with Image.open(io.BytesIO(raw)) as image:
            width, height = image.size
            if width * height > MAX_PREVIEW_PIXELS:
                raise NoPreview(f"not decoded: {width}x{height} is too large to preview")
            # JPEG can decode at 1/2..1/8 scale directly: most of the cost of a preview saved
            image.draft("RGB", (THUMB_SIDE * 2, THUMB_SIDE * 2))
            image.load()
            preview = _as_rgb(image)
    preview.thumbnail((THUMB_SIDE, THUMB_SIDE))
    buffer = io.BytesIO()
    preview.save(buffer, format="JPEG", quality=JPEG_QUALITY)
    return buffer.getvalue(), preview.width, preview.height


def _as_rgb(image: Any) -> Any:
    """RGB for any mode: 16-bit and float data are stretched to 8 bits, alpha is laid on white."""
    from PIL import Image

    if image.mode in ("I", "I;16", "I;16B", "I;16L", "F"):
        import numpy as np

        pixels = np.asarray(image, dtype=np.float64)
        lo, hi = float(pixels.min()), float(pixels.max())
        scaled = (pixels - lo) / (hi - lo or 1.0) * 255.0
        return Image.fromarray(scaled.astype(np.uint8)).convert("RGB")
    if image.mode in ("RGBA", "LA", "PA") or (image.mode == "P" and "transparency" in image.info):
        rgba = image.convert("RGBA")
        background = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        return Image.alpha_composite(background, rgba).convert("RGB")
    return image.convert("RGB")
