"""Small embedded previews of image files for the report's gallery.

A preview shows the stored pixels as the DataLoader receives them (no EXIF rotation applied),
shrunk to a small JPEG inside a data: URI, so the page needs no file beside it. Files the scan
saw crash or hang a worker, and decompression bombs, are never decoded here: the report runs
in one process without the scan's isolation, so it only decodes what the scan decoded safely
or what failed with a plain exception. Everything else gets a placeholder with the reason.

A truncated or damaged file shows the part that decodes (`partial_preview`), the rows past the
end of its data hatched and the preview captioned with how much decodes. That decode never
touches Pillow's process-wide `ImageFile.LOAD_TRUNCATED_IMAGES` (the scan's measuring relies on
it being off): the image memory is filled twice with different values before decoding, so the
pixels the decoder wrote are those equal in both, exactly, whatever the picture holds.
"""

from __future__ import annotations

import base64
import io
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from datalint.files import read_regular_file
from datalint.index.kinds import UNDECODABLE_KINDS
from datalint.report.index import FlaggedSample
from datalint.text import exception_text, printable

THUMB_SIDE = 96
JPEG_QUALITY = 70
MAX_PREVIEW_PIXELS = 64_000_000  # refuse to decode past this, whatever the scan's --max-pixels was
MAX_PREVIEW_FILE_BYTES = 256 * 1024 * 1024  # and to read a file larger than this into memory

# Outcomes of the scan after which decoding the file again in this process is not safe.
UNSAFE_STATUSES = frozenset({"crash", "timeout"})


@dataclass(frozen=True)
class Thumbnail:
    sample: FlaggedSample
    data_uri: str | None  # None: show the placeholder with `reason`
    reason: str = ""
    width: int = 0
    height: int = 0
    partial: str = ""  # a damaged file's preview: how much of it decodes ("truncated: 57% of rows decode")


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
    if sample.status in UNSAFE_STATUSES or UNDECODABLE_KINDS.intersection(sample.kinds):
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
        return _damaged(sample, raw, exc)
    return Thumbnail(sample, _data_uri(data), "", width, height)


def _data_uri(jpeg: bytes) -> str:
    return "data:image/jpeg;base64," + base64.b64encode(jpeg).decode("ascii")


def _damaged(sample: FlaggedSample, raw: bytes, error: Exception) -> Thumbnail:
    """The part of a file that decodes, or the placeholder when none does."""
    try:
        part = partial_preview(raw, truncated=_says_truncated(error))
    except Exception:  # per-sample boundary: the second try at a damaged file fails its own way
        part = None
    if part is None:
        return Thumbnail(sample, None, f"does not decode: {type(error).__name__}")
    preview = part.image
    buffer = io.BytesIO()
    preview.save(buffer, format="JPEG", quality=JPEG_QUALITY)
    return Thumbnail(sample, _data_uri(buffer.getvalue()), "", preview.width, preview.height, part.caption)


def _says_truncated(error: Exception) -> bool:
    """Pillow's words for data that ends early: "image file is truncated", "Truncated File Read"."""
    return "truncated" in str(error).lower()


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


@dataclass(frozen=True)
class PartialImage:
    """What of a damaged file decodes: the picture (missing rows hatched) and a caption saying how much."""

    image: Any  # PIL RGB, preview-sized
    decoded: float  # the share of rows (or of pixels) the decoder wrote
    caption: str


_EOI = b"\xff\xd9"  # JPEG's end-of-image marker


def partial_preview(raw: bytes, *, truncated: bool = True) -> PartialImage | None:
    """The part of a damaged image that decodes, or None when nothing does.

    The decoder runs twice over image memory filled with 0 and with 255: what it wrote is equal in
    both, what it never reached differs. Rows are what a sequential format loses (PNG, BMP, TIFF);
    an interlaced image (GIF) loses scattered pixels. JPEG is decoded as viewers show it, with its
    end marker appended (see `_jpeg_part`).
    """
    first, image = _decode_over(raw, 0)
    second, _ = _decode_over(raw, 255)
    written = first == second
    if written.ndim == 3:
        written = written.all(axis=2)
    what = "truncated" if truncated else "damaged"
    if image.format == "JPEG":
        return _jpeg_part(raw, written, what, bool(image.info.get("progressive")))
    if not written.any():
        return None
    rows = written.all(axis=1)
    if _one_band(rows):
        return _rows_part(image, rows, what)
    share = float(written.mean())
    return PartialImage(_preview_of(image, ~written), share, f"{what}: {_percent(share)} of pixels decode")


def _jpeg_part(raw: bytes, written: Any, what: str, progressive: bool) -> PartialImage | None:
    """A JPEG with its end marker appended, as viewers (and Pillow's LOAD_TRUNCATED_IMAGES) decode it.

    A progressive JPEG then shows every row with the detail of the scans that arrived. A baseline
    one is decoded up to where its data ends and grey after it: libjpeg leaves the missing blocks'
    DCT coefficients at zero, which decodes to exactly 128 in every channel. The rows decoded are
    those up to the last row that is not that grey, or the rows the decoder wrote before the data
    ended, if more.
    """
    import numpy as np

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with _opened(raw + _EOI) as ended:
            ended.draft("RGB", (THUMB_SIDE * 2, THUMB_SIDE * 2))
            ended.load()
            native = np.asarray(ended)
    if progressive:
        caption = f"{what}: a progressive JPEG, every row from the scans that arrived"
        return PartialImage(_preview_of(ended, np.zeros(native.shape[:2], dtype=bool)), 1.0, caption)
    # 127 too: an inverted (Adobe) CMYK JPEG stores 255 - 128
    grey = ((native == 128) | (native == 127)).reshape(native.shape[0], -1).all(axis=1)
    with_data = np.flatnonzero(~grey)
    top = written.all(axis=1)
    sure = len(top) if top.all() else int(np.argmin(top))
    count = max(sure, int(with_data[-1]) + 1 if with_data.size else 0)
    if count == 0:
        return None
    return _rows_part(ended, np.arange(native.shape[0]) < count, what)


def _rows_part(image: Any, rows: Any, what: str) -> PartialImage:
    import numpy as np

    missing = np.broadcast_to(~rows[:, None], (len(rows), image.width))
    share = float(rows.mean())
    caption = f"{what}: every row decodes" if share == 1 else f"{what}: {_percent(share)} of rows decode"
    return PartialImage(_preview_of(image, missing), share, caption)


def _preview_of(image: Any, missing: Any) -> Any:
    """The preview-sized RGB picture, hatched where the decoder wrote nothing (`missing`, full size).

    Hatched after shrinking, so the stripes stay crisp and the work is on the small picture."""
    import numpy as np
    from PIL import Image

    small = _as_rgb(image)
    small.thumbnail((THUMB_SIDE, THUMB_SIDE))
    rgb = np.array(small)  # a writable copy
    if missing.any():
        mask = Image.fromarray(np.ascontiguousarray(missing)).resize(small.size, Image.Resampling.NEAREST)
        _hatch(rgb, np.asarray(mask, dtype=bool))
    return Image.fromarray(rgb)


def _opened(raw: bytes) -> Any:
    from PIL import Image

    return Image.open(io.BytesIO(raw))


def _decode_over(raw: bytes, fill: int) -> tuple[Any, Any]:
    """(pixels, image) of one decode into memory filled with `fill`; a decoder error ends it quietly."""
    import numpy as np
    from PIL import Image

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        image = Image.open(io.BytesIO(raw))
        if image.width * image.height > MAX_PREVIEW_PIXELS:
            raise NoPreview(f"not decoded: {image.width}x{image.height} is too large to preview")
        image.draft("RGB", (THUMB_SIDE * 2, THUMB_SIDE * 2))
        image.im = Image.new(image.mode, image.size, fill).im  # the decoder writes into this memory
        try:
            image.load()
        except (OSError, SyntaxError, ValueError, EOFError):  # where the data ends or breaks
            image.tile = []  # what was decoded stays; nothing is read again
            image.load()
    return np.asarray(image), image


def _one_band(rows: Any) -> bool:
    """Whether the decoded rows are one run at the top or the bottom (BMP is stored bottom-up)."""
    import numpy as np

    changes = int(np.count_nonzero(np.diff(rows.astype(np.int8))))
    return bool(rows.any()) and (changes == 0 or (changes == 1 and (rows[0] or rows[-1])))


def _hatch(rgb: Any, missing: Any) -> None:
    """Diagonal stripes where the decoder wrote nothing: "no data", not a black or grey picture."""
    import numpy as np

    height, width = missing.shape
    stripe = max(2, max(height, width) // 24)
    y, x = np.indices((height, width))
    light = ((x + y) // stripe) % 2 == 0
    rgb[missing & light] = (250, 214, 214)
    rgb[missing & ~light] = (214, 64, 64)


def _percent(share: float) -> str:
    """`57%`; never `0%` or `100%` for a part that is not nothing or everything."""
    value = round(share * 100)
    if value == 0 and share > 0:
        return "under 1%"
    if value == 100 and share < 1:
        return "over 99%"
    return f"{value}%"


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
