"""Deterministic image corpus for datalint's image scan: clean photos-like files plus every damage
and information kind, with a manifest of what each file is and which findings it must get.

    python benchmarks/image_corpus.py OUT [--seed 1234] [-n 2000 | --small] [--workers 2]

writes `OUT/images/class_K/img_NNNNN.ext` (an ImageFolder tree; names do not reveal the kind), a few
files that are no images (`notes.txt`, `labels.json`: a scan skips and counts them) and
`OUT/manifest.csv` (relpath, kind, expected finding kinds, format, size, bytes, sha256). Everything
derives from the seed: two runs give byte-identical files with the same Pillow/numpy build.

`--small` writes one or two of every kind and 16 small clean files (the tests use it); the default
writes n files where, as in the research corpus, 60% of the clean images are 500x375 and 40%
1024x768, 85% JPEG (quality 75-95) and 15% PNG. Needs numpy, Pillow and OpenCV (which judges the
bit-flipped JPEGs, see `jpeg_bitflip`).
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import io
import os
import struct
import zlib
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw

from datalint.index import kinds

Rng = np.random.Generator


@dataclass(frozen=True)
class Special:
    """A kind of file the corpus plants: how many, how it is made, which findings it must get."""

    count: int  # in the full corpus; the small corpus has `small_count`
    extension: str
    make: Callable[[Rng], bytes]
    expected: tuple[str, ...]
    small_count: int = 1


@dataclass(frozen=True)
class CorpusFile:
    relpath: str
    kind: str
    expected: tuple[str, ...]
    format: str
    width: int
    height: int
    nbytes: int
    sha256: str

    @property
    def damaged(self) -> bool:
        return bool(set(self.expected) & DAMAGE_KINDS)


DAMAGE_KINDS = frozenset(kinds.DAMAGE_KINDS)
CLASSES = 10
NON_IMAGE_FILES = ("notes.txt", "class_0/labels.json", "class_1/.DS_Store")

# --------------------------------------------------------------------------- pixels and encoders


def photo_pixels(rng: Rng, width: int, height: int) -> np.ndarray:
    """Something with a photo's statistics: a colour gradient, soft blobs, hard-edged ellipses, noise."""
    y, x = np.mgrid[0:height, 0:width].astype(np.float32)
    corners = rng.uniform(0, 255, (2, 3)).astype(np.float32)
    t = (x / max(1, width - 1) + y / max(1, height - 1))[..., None] / 2
    image = corners[0] * (1 - t) + corners[1] * t
    for _ in range(int(rng.integers(2, 5))):
        cx, cy, radius = rng.uniform(0, width), rng.uniform(0, height), rng.uniform(0.1, 0.4) * width
        weight = np.exp(-((x - cx) ** 2 + (y - cy) ** 2) / (2 * radius**2))[..., None]
        image = image * (1 - weight) + rng.uniform(0, 255, 3).astype(np.float32) * weight
    canvas = Image.fromarray(np.clip(image, 0, 255).astype(np.uint8))
    draw = ImageDraw.Draw(canvas)
    for _ in range(int(rng.integers(1, 4))):
        x0, y0 = rng.uniform(0, width), rng.uniform(0, height)
        box = (x0, y0, x0 + rng.uniform(0.05, 0.3) * width, y0 + rng.uniform(0.05, 0.3) * height)
        draw.ellipse(box, fill=tuple(int(v) for v in rng.integers(0, 256, 3)))
    noisy = np.asarray(canvas, np.float32) + rng.normal(0, rng.uniform(3, 10), (height, width, 3))
    return np.clip(noisy, 0, 255).astype(np.uint8)


def encode(image: Image.Image, fmt: str, **params: object) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, fmt, **params)
    return buffer.getvalue()


def jpeg(rng: Rng, width: int = 160, height: int = 120) -> bytes:
    return encode(
        Image.fromarray(photo_pixels(rng, width, height)), "JPEG", quality=int(rng.integers(75, 96))
    )


def png(rng: Rng, width: int = 160, height: int = 120) -> bytes:
    return encode(Image.fromarray(photo_pixels(rng, width, height)), "PNG")


def png_chunk(chunk_type: bytes, body: bytes) -> bytes:
    crc = zlib.crc32(body, zlib.crc32(chunk_type))
    return struct.pack(">I", len(body)) + chunk_type + body + struct.pack(">I", crc)


def png_from_rows(width: int, height: int, rows: Callable[[], bytes], colour_type: int = 0) -> bytes:
    """A PNG written by hand, compressing `height` rows streamed from `rows()` (1-byte samples)."""
    compressor = zlib.compressobj(6)
    parts = [compressor.compress(rows()) for _ in range(height)]
    parts.append(compressor.flush())
    header = struct.pack(">IIBBBBB", width, height, 8, colour_type, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + png_chunk(b"IHDR", header)
        + png_chunk(b"IDAT", b"".join(parts))
        + png_chunk(b"IEND", b"")
    )


# --------------------------------------------------------------------------- damage


def jpeg_scan_range(data: bytes) -> tuple[int, int]:
    """Start and end of the entropy-coded data after the first SOS marker (before the EOI)."""
    sos = data.index(b"\xff\xda")
    return sos + 2 + int.from_bytes(data[sos + 2 : sos + 4], "big"), len(data) - 2


def flip_bytes(rng: Rng, data: bytes, start: int, end: int, count: int = 16) -> bytes:
    flipped = bytearray(data)
    for position in rng.choice(np.arange(start, end), size=count, replace=False):
        flipped[position] ^= int(rng.integers(1, 256))
    return bytes(flipped)


def png_chunks(data: bytes) -> list[tuple[int, bytes, int]]:
    """(offset, type, body length) of every chunk."""
    chunks, pos = [], 8
    while pos < len(data):
        length = int.from_bytes(data[pos : pos + 4], "big")
        chunks.append((pos, data[pos + 4 : pos + 8], length))
        pos += 12 + length
    return chunks


def first_idat(data: bytes) -> tuple[int, int]:
    pos, _, length = next(c for c in png_chunks(data) if c[1] == b"IDAT")
    return pos, length


def png_bad_crc(rng: Rng) -> bytes:
    data = bytearray(png(rng))
    pos, length = first_idat(bytes(data))
    data[pos + 8 + length] ^= 0x5A  # the CRC field only; the compressed data is intact
    return bytes(data)


def png_idat_flip(rng: Rng) -> bytes:
    data = png(rng)
    pos, length = first_idat(data)
    return flip_bytes(rng, data, pos + 8 + length // 4, pos + 8 + length * 3 // 4)


def png_bad_zlib(rng: Rng) -> bytes:
    """Damaged compressed data under a recomputed CRC: only inflating the stream shows it."""
    data = png(rng)
    pos, length = first_idat(data)
    body = flip_bytes(rng, data[pos + 8 : pos + 8 + length], length // 4, length * 3 // 4)
    return data[:pos] + png_chunk(b"IDAT", body) + data[pos + 12 + length :]


def jpeg_bitflip(rng: Rng) -> bytes:
    """16 flipped bytes in the middle of the scan data, redrawn until libjpeg notices.

    Huffman codes resynchronise: about 1 flip pattern in 10 (at 160x120; 3 in 100 at 500x375) leaves
    a stream that decodes to the right number of blocks with no warning, garbled but valid to every
    decoder. No file check can find those, so the corpus plants only the kind a decoder can notice,
    judged by OpenCV's full-size colour decode (not the reduced path datalint uses).
    """
    data = jpeg(rng)
    start, end = jpeg_scan_range(data)
    while True:
        flipped = flip_bytes(rng, data, start + (end - start) // 4, end - (end - start) // 4)
        if libjpeg_notices(flipped):
            return flipped


def libjpeg_notices(data: bytes) -> bool:
    """Does a full OpenCV decode fail or print a warning on the C-level stderr?"""
    import tempfile

    import cv2

    with tempfile.TemporaryFile() as sink:
        saved = os.dup(2)
        os.dup2(sink.fileno(), 2)
        try:
            decoded = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        sink.seek(0)
        return decoded is None or bool(sink.read().strip())


def jpeg_header_junk(rng: Rng) -> bytes:
    """Stray bytes before the DQT marker: libjpeg warns, the pixels are untouched (information)."""
    data = jpeg(rng)
    dqt = data.index(b"\xff\xdb")
    return data[:dqt] + b"\x00\x17\x2a" + data[dqt:]


def html_page(rng: Rng) -> bytes:
    return (
        b"<!DOCTYPE html>\n<html><head><title>404 Not Found</title></head>\n<body><h1>Not Found</h1>"
        b"<p>The requested URL was not found on this server.</p></body></html>\n"
    )


def bomb_header(rng: Rng) -> bytes:
    """A 100000x100000 RGB PNG header with a token of data: about 70 bytes."""
    header = struct.pack(">IIBBBBB", 100_000, 100_000, 8, 2, 0, 0, 0)
    body = zlib.compress(b"\x00" * 64)
    return (
        b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", header) + png_chunk(b"IDAT", body) + png_chunk(b"IEND", b"")
    )


def bomb_real(rng: Rng) -> bytes:
    """A real 14000x14000 grayscale PNG of zeros: 196 Mpx in about 190 KiB."""
    row = bytes(1 + 14_000)
    return png_from_rows(14_000, 14_000, lambda: row)


def cmyk_jpeg(rng: Rng) -> bytes:
    return encode(Image.fromarray(photo_pixels(rng, 160, 120)).convert("CMYK"), "JPEG", quality=90)


def gray_jpeg(rng: Rng) -> bytes:
    return encode(Image.fromarray(photo_pixels(rng, 160, 120)).convert("L"), "JPEG", quality=90)


def rgba_png(rng: Rng) -> bytes:
    image = Image.fromarray(photo_pixels(rng, 160, 120)).convert("RGBA")
    image.putalpha(Image.linear_gradient("L").resize((160, 120)))
    return encode(image, "PNG")


def png16(rng: Rng, channels: int) -> bytes:
    """16 bits per channel, written by hand (Pillow writes 16-bit grayscale but not 16-bit RGB)."""
    width, height = 96, 64
    pixels = photo_pixels(rng, width, height)[..., :channels].astype(">u2") * 257
    rows = [b"\x00" + pixels[y].tobytes() for y in range(height)]
    header = struct.pack(">IIBBBBB", width, height, 16, 2 if channels == 3 else 0, 0, 0, 0)
    body = zlib.compress(b"".join(rows))
    return (
        b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", header) + png_chunk(b"IDAT", body) + png_chunk(b"IEND", b"")
    )


def palette_png(rng: Rng) -> bytes:
    return encode(Image.fromarray(photo_pixels(rng, 160, 120)).quantize(64), "PNG")


def gif(rng: Rng) -> bytes:
    return encode(Image.fromarray(photo_pixels(rng, 160, 120)).quantize(128), "GIF")


def animated_gif(rng: Rng) -> bytes:
    frames = [Image.fromarray(photo_pixels(rng, 96, 64)).quantize(64) for _ in range(3)]
    return encode(frames[0], "GIF", save_all=True, append_images=frames[1:], duration=100, loop=0)


def exif_rotated(rng: Rng) -> bytes:
    image = Image.fromarray(photo_pixels(rng, 160, 120))
    exif = Image.Exif()
    exif[0x0112] = 6
    return encode(image, "JPEG", quality=90, exif=exif.tobytes())


def bmp(rng: Rng) -> bytes:
    return encode(Image.fromarray(photo_pixels(rng, 96, 64)), "BMP")


def webp(rng: Rng) -> bytes:
    return encode(Image.fromarray(photo_pixels(rng, 96, 64)), "WEBP", quality=80)


def cut(make: Callable[[Rng], bytes], fraction: float) -> Callable[[Rng], bytes]:
    return lambda rng: (lambda data: data[: int(len(data) * fraction)])(make(rng))


# Every planted kind. Counts follow the research corpus (36 damaged files of 12 kinds), plus the kinds
# it lacked: broken zlib under good CRCs, a broken link, a cut BMP, and the information kinds.
SPECIALS: dict[str, Special] = {
    "jpeg_trunc50": Special(5, ".jpg", cut(jpeg, 0.5), ("corrupt",)),
    "jpeg_trunc90": Special(5, ".jpg", cut(jpeg, 0.9), ("corrupt",)),
    "jpeg_no_eoi": Special(3, ".jpg", lambda rng: jpeg(rng)[:-2], ("corrupt",)),
    "jpeg_bitflip": Special(4, ".jpg", jpeg_bitflip, ("corrupt",), small_count=2),
    "zero_byte": Special(3, ".jpg", lambda rng: b"", ("empty",)),
    "random_bytes": Special(3, ".jpg", lambda rng: rng.bytes(20 * 1024), ("corrupt",)),
    "html_as_jpg": Special(2, ".jpg", html_page, ("corrupt",)),
    "png_bad_crc": Special(3, ".png", png_bad_crc, ("corrupt",)),
    "png_idat_flip": Special(3, ".png", png_idat_flip, ("corrupt",)),
    "png_bad_zlib": Special(2, ".png", png_bad_zlib, ("corrupt",)),
    "png_trunc": Special(3, ".png", cut(png, 0.6), ("corrupt",)),
    "bmp_trunc": Special(1, ".bmp", cut(bmp, 0.7), ("corrupt",)),
    "bomb_header": Special(1, ".png", bomb_header, ("decompression_bomb",)),
    "bomb_real": Special(1, ".png", bomb_real, ("decompression_bomb",)),
    "broken_link": Special(1, ".jpg", lambda rng: b"", ("unreadable",)),
    "cmyk_jpeg": Special(2, ".jpg", cmyk_jpeg, ("cmyk",)),
    "gray_jpeg": Special(2, ".jpg", gray_jpeg, ("grayscale",)),
    "rgba_png": Special(2, ".png", rgba_png, ("alpha",)),
    "png16_rgb": Special(1, ".png", lambda rng: png16(rng, 3), ("high_bit_depth",)),
    "png16_gray": Special(1, ".png", lambda rng: png16(rng, 1), ("grayscale", "high_bit_depth")),
    "palette_png": Special(1, ".png", palette_png, ("palette",)),
    "gif_as_jpg": Special(2, ".jpg", gif, ("extension_mismatch", "palette")),
    "jpeg_as_png": Special(1, ".png", jpeg, ("extension_mismatch",)),
    "animated_gif": Special(1, ".gif", animated_gif, ("multi_frame", "palette")),
    "exif_rot6": Special(2, ".jpg", exif_rotated, ("exif_rotated",)),
    "jpeg_header_junk": Special(1, ".jpg", jpeg_header_junk, ("decoder_warning",)),
    "tiny_8x8": Special(1, ".jpg", lambda rng: jpeg(rng, 8, 8), ("tiny",)),
    "extreme_aspect": Special(1, ".jpg", lambda rng: jpeg(rng, 600, 40), ("extreme_aspect",)),
    "bmp": Special(1, ".bmp", bmp, ()),
    "webp": Special(1, ".webp", webp, ()),
    "dup_exact": Special(2, ".jpg", lambda rng: b"", ("duplicate",)),  # filled with an earlier file's bytes
}

DAMAGED_KINDS = tuple(k for k, s in SPECIALS.items() if set(s.expected) & DAMAGE_KINDS)

# --------------------------------------------------------------------------- the corpus plan


@dataclass(frozen=True)
class Planned:
    index: int
    kind: str  # "clean" or a SPECIALS key
    relpath: str
    clean_format: str = "JPEG"
    width: int = 0
    height: int = 0


def plan(seed: int, n: int, small: bool) -> list[Planned]:
    """Which file gets which kind: the specials at random positions among clean files."""
    rng = np.random.default_rng([seed, 0])
    specials = [kind for kind, s in SPECIALS.items() for _ in range(s.small_count if small else s.count)]
    total = len(specials) + 16 if small else max(n, len(specials) + 1)
    kinds = specials + ["clean"] * (total - len(specials))
    order = rng.permutation(total)
    planned = []
    for index in range(total):
        kind = kinds[order[index]]
        clean_format = "PNG" if rng.random() < 0.15 else "JPEG"
        width, height = (
            ((96, 72), (128, 96))[index % 2] if small else ((500, 375), (1024, 768))[rng.random() < 0.4]
        )
        extension = (
            SPECIALS[kind].extension if kind in SPECIALS else (".png" if clean_format == "PNG" else ".jpg")
        )
        relpath = f"class_{index % CLASSES}/img_{index:05d}{extension}"
        planned.append(Planned(index, kind, relpath, clean_format, width, height))
    return planned


def make_bytes(seed: int, item: Planned) -> bytes:
    rng = np.random.default_rng([seed, 1, item.index])
    if item.kind == "clean":
        if item.clean_format == "PNG":
            return png(rng, item.width, item.height)
        return jpeg(rng, item.width, item.height)
    return SPECIALS[item.kind].make(rng)


def _write_one(args: tuple[int, Planned, str]) -> None:
    seed, item, images = args
    if item.kind in ("broken_link", "dup_exact"):
        return  # need the other files: written afterwards
    target = Path(images, item.relpath)
    target.write_bytes(make_bytes(seed, item))


def generate_corpus(
    out: str | Path, *, seed: int = 1234, n: int = 2000, small: bool = False, workers: int = 1
) -> list[CorpusFile]:
    """Write the corpus under `out` and return its manifest rows (also written to manifest.csv)."""
    images = Path(out, "images")
    planned = plan(seed, n, small)
    for k in range(CLASSES):
        (images / f"class_{k}").mkdir(parents=True, exist_ok=True)
    jobs = [(seed, item, str(images)) for item in planned]
    if workers > 1:
        with ProcessPoolExecutor(workers) as pool:
            list(pool.map(_write_one, jobs, chunksize=16))
    else:
        for job in jobs:
            _write_one(job)
    _write_dependent_files(seed, planned, images)
    for name in NON_IMAGE_FILES:
        (images / name).write_text("not an image: a scan skips and counts this file\n")
    rows = describe(planned, images)
    write_manifest(Path(out, "manifest.csv"), rows)
    return rows


def _write_dependent_files(seed: int, planned: list[Planned], images: Path) -> None:
    rng = np.random.default_rng([seed, 2])
    clean = sorted(item.relpath for item in planned if item.kind == "clean" and item.relpath.endswith(".jpg"))
    for item in planned:
        target = images / item.relpath
        if item.kind == "broken_link":
            target.unlink(missing_ok=True)  # regenerating into the same folder
            target.symlink_to(f"missing_{item.index:05d}.jpg")
        elif item.kind == "dup_exact":
            # Copy a file that sorts before the copy, so the copy is the one reported as a duplicate.
            earlier = [path for path in clean if path < item.relpath] or clean
            target.write_bytes((images / earlier[int(rng.integers(len(earlier)))]).read_bytes())


def describe(planned: list[Planned], images: Path) -> list[CorpusFile]:
    rows = []
    for item in planned:
        path = images / item.relpath
        data = b"" if path.is_symlink() and not path.exists() else path.read_bytes()
        expected = SPECIALS[item.kind].expected if item.kind in SPECIALS else ()
        fmt, width, height = _header(data)
        rows.append(
            CorpusFile(
                item.relpath,
                item.kind,
                expected,
                fmt,
                width,
                height,
                len(data),
                hashlib.sha256(data).hexdigest(),
            )
        )
    return rows


def _header(data: bytes) -> tuple[str, int, int]:
    try:
        with Image.open(io.BytesIO(data)) as image:
            return image.format or "", image.width, image.height
    except Exception:  # the damaged files: the manifest simply has no header facts for them
        return "", 0, 0


def write_manifest(path: Path, rows: list[CorpusFile]) -> None:
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["relpath", "kind", "expected", "format", "width", "height", "bytes", "sha256"])
        for row in rows:
            writer.writerow(
                [row.relpath, row.kind, " ".join(row.expected), row.format, row.width, row.height, row.nbytes,
                 row.sha256]
            )  # fmt: skip


def read_manifest(path: str | Path) -> list[CorpusFile]:
    with Path(path).open(newline="") as handle:
        return [
            CorpusFile(
                r["relpath"],
                r["kind"],
                tuple(r["expected"].split()),
                r["format"],
                int(r["width"]),
                int(r["height"]),
                int(r["bytes"]),
                r["sha256"],
            )
            for r in csv.DictReader(handle)
        ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", help="folder to write (images/ and manifest.csv go inside)")
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("-n", type=int, default=2000, help="number of files in the full corpus")
    parser.add_argument("--small", action="store_true", help="one or two of every kind, 16 clean files")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()
    rows = generate_corpus(args.out, seed=args.seed, n=args.n, small=args.small, workers=args.workers)
    damaged = sum(row.damaged for row in rows)
    size = sum(row.nbytes for row in rows) / 2**20
    print(f"{len(rows)} files ({damaged} damaged), {size:.0f} MiB, in {args.out}/images")


if __name__ == "__main__":
    main()
