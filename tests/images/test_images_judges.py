"""Damage against missing pieces: second decoders, APNG chunks, native stderr sorted, `unsupported`.

Every file here is a real encoded image, made by Pillow and then damaged the way real files are.
"""

from __future__ import annotations

import io
import json
import shutil
import struct
import textwrap
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from images_support import run_cli
from PIL import Image

from datalint.scan.images import (
    ImageOptions,
    StderrCapture,
    check_png,
    classify_decoder_messages,
    probe_image_bytes,
)


@pytest.fixture
def capture() -> Any:
    sink = StderrCapture()
    yield sink
    sink.close()


def _kinds(data: bytes, extension: str, capture: StderrCapture) -> dict[str, str]:
    probe = probe_image_bytes(data, extension, ImageOptions(), capture)
    return {f.kind: f.detail for f in probe.findings}


def _encoded(fmt: str, mode: str = "RGB", size: tuple[int, int] = (48, 40), **options: Any) -> bytes:
    pixels = (np.add.outer(np.arange(size[1]), np.arange(size[0])) % 256).astype(np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(pixels).convert(mode).save(buffer, fmt, **options)
    return buffer.getvalue()


# --------------------------------------------------------------------------- BMP


def _rle8_bmp(rows: list[bytes], width: int) -> bytes:
    """An 8-bit RLE BMP (bottom-up) of `rows`, each an already encoded RLE8 row; 4 grey levels."""
    palette = b"".join(bytes((v, v, v, 0)) for v in (0, 85, 170, 255))
    pixels = b"".join(row + b"\x00\x00" for row in rows) + b"\x00\x01"
    header_size = 14 + 40 + len(palette)
    info = struct.pack("<IiiHHIIiiII", 40, width, len(rows), 1, 8, 1, len(pixels), 2835, 2835, 4, 0)
    return (
        b"BM" + struct.pack("<IHHI", header_size + len(pixels), 0, 0, header_size) + info + palette + pixels
    )


def test_a_bmp_whose_rle_stream_overruns_its_rows_is_damage_although_pillow_loads_it(
    capture: StderrCapture,
) -> None:
    good = _rle8_bmp([b"\x04\x01", b"\x04\x02"], width=4)
    broken = _rle8_bmp([b"\x04\x01", b"\xff\x02\xff\x03"], width=4)  # 510 pixels into a 4-pixel row
    with Image.open(io.BytesIO(broken)) as im:
        im.load()  # Pillow's verdict alone: fine
    assert "corrupt" not in _kinds(good, ".bmp", capture)
    assert "runs reach past the end of row 1" in _kinds(broken, ".bmp", capture)["corrupt"]


def test_a_bmp_feature_pillow_lacks_is_unsupported_an_impossible_value_is_damage(
    capture: StderrCapture,
) -> None:
    bmp = bytearray(_encoded("BMP"))
    two_bit, absurd = bytearray(bmp), bytearray(bmp)
    two_bit[28:30] = struct.pack("<H", 2)  # 2 bits per pixel: valid (Windows CE), Pillow cannot decode
    absurd[28:30] = struct.pack("<H", 30000)
    unsupported = _kinds(bytes(two_bit), ".bmp", capture)
    assert set(unsupported) == {"unsupported"}
    assert "pixel depth 2" in unsupported["unsupported"]
    assert "no valid file holds this value" in _kinds(bytes(absurd), ".bmp", capture)["corrupt"]


# --------------------------------------------------------------------------- JPEG


def test_a_12_bit_jpeg_is_unsupported_not_corrupt(capture: StderrCapture) -> None:
    data = bytearray(_encoded("JPEG", quality=90))
    sof = data.index(b"\xff\xc0")
    data[sof + 4] = 12  # the frame header's sample precision
    found = _kinds(bytes(data), ".jpg", capture)
    assert "corrupt" not in found
    assert "12-bit JPEG" in found["unsupported"]


# --------------------------------------------------------------------------- APNG


def _chunks(data: bytes) -> list[tuple[bytes, bytes]]:
    chunks, pos = [], 8
    while pos < len(data):
        length = int.from_bytes(data[pos : pos + 4], "big")
        chunks.append((data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]))
        pos += 12 + length
    return chunks


def _png_of(chunks: list[tuple[bytes, bytes]]) -> bytes:
    out = b"\x89PNG\r\n\x1a\n"
    for kind, body in chunks:
        out += struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
    return out


@pytest.fixture(scope="module")
def apng() -> bytes:
    frames = [Image.new("RGB", (32, 24), (40 * i, 255 - 40 * i, 90)) for i in range(3)]
    buffer = io.BytesIO()
    frames[0].save(buffer, "PNG", save_all=True, append_images=frames[1:], duration=50)
    return buffer.getvalue()


def test_a_valid_apng_passes_and_a_frame_without_its_control_chunk_is_damage(
    apng: bytes, capture: StderrCapture
) -> None:
    chunks = _chunks(apng)
    assert [kind for kind, _ in chunks].count(b"fcTL") == 3
    assert check_png(apng) == []
    last_fctl = max(i for i, (kind, _) in enumerate(chunks) if kind == b"fcTL")
    without_fctl = _png_of(chunks[:last_fctl] + chunks[last_fctl + 1 :])
    with Image.open(io.BytesIO(without_fctl)) as im, pytest.raises(SyntaxError):
        im.seek(im.n_frames - 1)  # what Pillow does when a loader reaches that frame
    found = _kinds(without_fctl, ".png", capture)
    assert "sequence number" in found["corrupt"] or "fcTL" in found["corrupt"]


def test_apng_frame_data_before_any_frame_control_is_damage(apng: bytes) -> None:
    chunks = [(k, b) for k, b in _chunks(apng) if k != b"fcTL"]
    renumbered, sequence = [], 0
    for kind, body in chunks:
        if kind == b"fdAT":
            body, sequence = struct.pack(">I", sequence) + body[4:], sequence + 1
        renumbered.append((kind, body))
    (finding,) = check_png(_png_of(renumbered))
    assert finding.kind == "corrupt"
    assert "without a frame-control chunk" in finding.detail


def test_an_apng_whose_actl_decoders_ignore_is_a_still_png_not_damage(apng: bytes) -> None:
    chunks = _chunks(apng)
    actl = next(i for i, (kind, _) in enumerate(chunks) if kind == b"acTL")
    zero_frames = list(chunks)
    zero_frames[actl] = (b"acTL", struct.pack(">II", 0, 0))
    (finding,) = check_png(_png_of(zero_frames))
    assert finding.kind == "decoder_warning"


# --------------------------------------------------------------------------- stderr, helpers


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("Fax4Decode: Bad code word at line 27 of strip 0 (x 0).", "corrupt"),
        ("TIFFFillStrip: Read error on strip 0; got 12 bytes, expected 10980.", "corrupt"),
        ("tempfile.tif: WEBP compression support is not configured.", "unsupported"),
        ("TIFFReadDirectory: Unknown field with tag 42112 (0xa480) encountered", "decoder_warning"),
        ("libpng warning: iCCP: known incorrect sRGB profile", "decoder_warning"),
        ("libpng error: IDAT: CRC error", "corrupt"),
    ],
)
def test_native_decoder_lines_are_sorted_into_damage_missing_pieces_and_information(
    text: str, kind: str
) -> None:
    assert [f.kind for f in classify_decoder_messages("TIFF", text)] == [kind]


@pytest.mark.skipif(shutil.which("gs") is not None, reason="Ghostscript is installed here")
def test_eps_without_ghostscript_is_unsupported_quarantined_and_not_counted_as_damage(tmp_path: Path) -> None:
    folder = tmp_path / "figures"
    folder.mkdir()
    Image.new("RGB", (40, 40), (200, 30, 30)).save(folder / "plot.eps")
    (folder / "good.png").write_bytes(_encoded("PNG"))
    (folder / "cut.png").write_bytes(_encoded("PNG")[:-40])
    db = tmp_path / "index.db"
    code, stdout, _ = run_cli(
        "scan",
        "--images",
        str(folder),
        "--ext",
        "eps,png",
        "--workers",
        "1",
        "--db",
        str(db),
        "--format",
        "json",
    )
    summary = json.loads(stdout)
    assert code == 1
    assert summary["outcomes"] == {
        "ok": 1,
        "damaged": 1,
        "unsupported": 1,
        "error": 0,
        "crash": 0,
        "timeout": 0,
    }
    quarantine = json.loads((tmp_path / "index.quarantine.json").read_text())
    entries = {entry["key"]: entry for entry in quarantine["samples"]}
    assert entries["plot.eps"]["kinds"] == ["unsupported"]
    assert "Ghostscript" in entries["plot.eps"]["detail"]
    code, text, _ = run_cli(
        "scan", "--images", str(folder), "--ext", "eps,png", "--workers", "1", "--db", str(db)
    )
    assert "ok 1  damaged 1  unsupported 1" in text
    _, _, progress = run_cli(
        "scan", "--images", str(folder), "--ext", "eps,png", "--workers", "1", "--db", str(db),
        "--rescan", "--progress", "plain",
    )  # fmt: skip
    assert "ok=1 damaged=1 unsupported=1 error=0" in progress  # the live line counts the same way


# --------------------------------------------------------------------------- --files-from-dataset


def _image_folder_module(tmp_path: Path) -> Path:
    """A dataset like torchvision's ImageFolder built with a relative root: samples relative to it."""
    data = tmp_path / "flowers"
    for name in ("daisy", "rose"):
        (data / name).mkdir(parents=True)
        for i in range(3):
            (data / name / f"{i}.png").write_bytes(_encoded("PNG", size=(40 + i, 40)))
    (data / "rose" / "2.png").write_bytes(b"<html>not found</html>")
    module = tmp_path / "flowers_ds.py"
    module.write_text(
        textwrap.dedent(
            """
            import os
            from PIL import Image

            class Folder:
                def __init__(self, root):
                    self.root = root
                    self.samples = sorted(
                        (os.path.join(c, f), i)
                        for i, c in enumerate(sorted(os.listdir(root)))
                        for f in os.listdir(os.path.join(root, c))
                    )
                def __len__(self):
                    return len(self.samples)
                def __getitem__(self, i):
                    path, label = self.samples[i]
                    return Image.open(os.path.join(self.root, path)).convert("RGB").size, label

            train = Folder(os.path.join(os.path.dirname(__file__), "flowers"))
            bogus = Folder(os.path.join(os.path.dirname(__file__), "flowers"))
            bogus.root = "/nonexistent"
            """
        )
    )
    return module


def test_files_from_dataset_resolves_relative_paths_against_the_datasets_root(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = _image_folder_module(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    db = tmp_path / "ds.db"
    code, stdout, _ = run_cli(
        "scan", "--dataset", f"{module}:train", "--files-from-dataset", "--workers", "1",
        "--db", str(db), "--format", "json",
    )  # fmt: skip
    summary = json.loads(stdout)
    assert code == 1
    assert summary["outcomes"]["damaged"] == 1
    assert summary["outcomes"]["ok"] == 5
    assert "unreadable" not in summary["findings"]


def test_files_from_dataset_refuses_when_most_files_are_missing(tmp_path: Path) -> None:
    module = _image_folder_module(tmp_path)
    code, _, stderr = run_cli(
        "scan", "--dataset", f"{module}:bogus", "--files-from-dataset", "--workers", "1",
        "--db", str(tmp_path / "b.db"),
    )  # fmt: skip
    assert code == 2
    assert "most files behind" in stderr and "--image-root" in stderr
    code, stdout, _ = run_cli(
        "scan", "--dataset", f"{module}:bogus", "--files-from-dataset",
        "--image-root", str(tmp_path / "flowers"), "--workers", "1", "--db", str(tmp_path / "b.db"),
        "--format", "json",
    )  # fmt: skip
    assert code == 1
    assert json.loads(stdout)["outcomes"]["damaged"] == 1


# --------------------------------------------------------------------------- layouts one decoder lacks


def _rle_tga(width: int, height: int, packets: list[int]) -> bytes:
    """A top-left 32-bit run-length TGA: one run packet per count in `packets`."""
    header = struct.pack("<BBBHHBHHHHBB", 0, 0, 10, 0, 0, 0, 0, 0, width, height, 32, 0x28)
    return header + b"".join(bytes((0x80 | (count - 1), 10, 20, 30, 255)) for count in packets)


def test_a_complete_tga_whose_runs_cross_rows_is_unsupported_a_short_one_damage(
    capture: StderrCapture,
) -> None:
    per_row = _rle_tga(8, 4, [8, 8, 8, 8])
    crossing = _rle_tga(8, 4, [12, 20])  # packets that span rows: complete, Pillow refuses them
    short = _rle_tga(8, 4, [12, 10])  # 22 of 32 pixels
    assert not {"corrupt", "unsupported"} & set(_kinds(per_row, ".tga", capture))
    with Image.open(io.BytesIO(crossing)) as im, pytest.raises(OSError, match="buffer overrun"):
        im.load()
    found = _kinds(crossing, ".tga", capture)
    assert "corrupt" not in found
    assert "cross rows" in found["unsupported"]
    assert "corrupt" in _kinds(short, ".tga", capture)


def test_a_gif_frame_past_the_screen_is_information_not_damage(capture: StderrCapture) -> None:
    gif = bytearray(_encoded("GIF", mode="P", size=(40, 30)))
    gif[6:8] = struct.pack("<H", 24)  # logical screen narrower than the frame: Pillow copes, OpenCV asserts
    with Image.open(io.BytesIO(bytes(gif))) as im:
        im.load()
    found = _kinds(bytes(gif), ".gif", capture)
    assert "corrupt" not in found
    assert "OpenCV refuses the GIF's layout" in found["decoder_warning"]


def test_hdr_exr_and_farbfeld_files_are_unsupported_with_the_missing_reader_named(
    capture: StderrCapture,
) -> None:
    radiance = b"#?RADIANCE\nFORMAT=32-bit_rle_rgbe\n\n-Y 2 +X 2\n" + bytes(16)
    farbfeld = b"farbfeld" + struct.pack(">II", 1, 1) + bytes(8)
    assert "Radiance HDR" in _kinds(radiance, ".hdr", capture)["unsupported"]
    assert "farbfeld" in _kinds(farbfeld, ".ff", capture)["unsupported"]


def test_the_report_says_the_same_time_as_the_scan_summary(tmp_path: Path) -> None:
    from datalint.report.charts import format_seconds

    folder = tmp_path / "few"
    folder.mkdir()
    for i in range(3):
        (folder / f"{i}.png").write_bytes(_encoded("PNG", size=(40 + i, 40)))
    db = tmp_path / "few.db"
    _, stdout, _ = run_cli(
        "scan", "--images", str(folder), "--workers", "1", "--db", str(db), "--format", "json"
    )
    elapsed = json.loads(stdout)["elapsed"]
    page = tmp_path / "few.html"
    assert run_cli("report", str(db), "-o", str(page))[0] == 0
    assert f"took {format_seconds(elapsed)}" in page.read_text(encoding="utf-8")


def test_an_ico_entry_too_short_for_its_bitmap_is_damage_a_missing_mask_is_not(
    capture: StderrCapture,
) -> None:
    icon = bytearray(_encoded("ICO", mode="RGBA", size=(32, 32), sizes=[(32, 32)], bitmap_format="bmp"))
    declared = int.from_bytes(icon[14:18], "little")
    assert declared == 40 + 32 * 32 * 4  # Pillow writes a 32-bit bitmap with no AND mask at all
    assert "corrupt" not in _kinds(bytes(icon), ".ico", capture)
    half = bytearray(icon)
    half[14:18] = (declared // 2).to_bytes(4, "little")
    with Image.open(io.BytesIO(bytes(half))) as im:
        im.load()  # Pillow reads past the entry regardless
    assert "its bitmap needs" in _kinds(bytes(half), ".ico", capture)["corrupt"]


# --------------------------------------------------------------------------- lessons of held-out corpora
# (benchmarks/data/{pngsuite,imagetestsuite,jhove}-verdicts.csv: files no probe was tuned on)


def _with_plte(png: bytes, plte: list[bytes]) -> bytes:
    """`png` with its PLTE chunks replaced by `plte` (each a body), placed right after IHDR."""
    chunks = [chunk for chunk in _chunks(png) if chunk[0] != b"PLTE"]
    return _png_of([chunks[0], *((b"PLTE", body) for body in plte), *chunks[1:]])


def test_png_palettes_libpng_stops_on_are_damage_a_suggested_palette_it_skips_is_not(
    capture: StderrCapture,
) -> None:
    indexed = _encoded("PNG", mode="P")
    palette = next(body for kind, body in _chunks(indexed) if kind == b"PLTE")
    rgb = _encoded("PNG")
    assert "corrupt" not in _kinds(indexed, ".png", capture)
    twice = _kinds(_with_plte(indexed, [palette, palette]), ".png", capture)
    assert "a second PLTE chunk" in twice["corrupt"]
    assert "empty PLTE" in _kinds(_with_plte(rgb, [b""]), ".png", capture)["corrupt"]
    assert "no PLTE chunk" in _kinds(_with_plte(indexed, []), ".png", capture)["corrupt"]
    assert "no whole number" in _kinds(_with_plte(indexed, [palette[:-1]]), ".png", capture)["corrupt"]
    # An RGB image's palette is only a suggestion: 257 colours, or a PLTE after the image data,
    # is a warning to libpng
    too_long = _with_plte(rgb, [bytes(3 * 257)])
    with Image.open(io.BytesIO(too_long)) as im:
        im.load()
    assert "corrupt" not in _kinds(too_long, ".png", capture)
    chunks = _chunks(rgb)
    late = _png_of([*chunks[:-1], (b"PLTE", palette), chunks[-1]])  # just before IEND
    assert "corrupt" not in _kinds(late, ".png", capture)


def _first_gif_image(gif: bytes) -> int:
    """Where the first image descriptor is: after the colour table and any extensions."""
    pos = 13 + (3 << ((gif[10] & 7) + 1) if gif[10] & 0x80 else 0)
    while gif[pos] == 0x21:
        pos += 2
        while gif[pos]:
            pos += gif[pos] + 1
        pos += 1
    assert gif[pos] == 0x2C
    return pos


def test_a_gif_whose_first_image_has_lzw_code_size_0_is_damage(capture: StderrCapture) -> None:
    gif = _encoded("GIF", mode="P")
    image = _first_gif_image(gif)
    assert gif[image + 9] & 0x80 == 0  # no local colour table: the code size follows the descriptor
    code_size = image + 10
    zero = gif[:code_size] + b"\x00" + gif[code_size + 1 :]
    with Image.open(io.BytesIO(zero)) as im:
        im.load()  # Pillow alone: one flat colour, no complaint
    assert "corrupt" not in _kinds(gif, ".gif", capture)
    assert "LZW minimum code size is 0" in _kinds(zero, ".gif", capture)["corrupt"]


def _tiff_with_compression(compression: int, tiff_bytes: bytes | None = None, page: int = 0) -> bytes:
    """A Pillow-made TIFF with the compression tag of one page (0: the first) set to `compression`."""
    tiff = bytearray(tiff_bytes or _encoded("TIFF", mode="L"))
    assert tiff[:4] == b"II*\x00"
    start = int.from_bytes(tiff[4:8], "little")
    for _ in range(page):  # follow the next-directory offsets
        count = int.from_bytes(tiff[start : start + 2], "little")
        start = int.from_bytes(tiff[start + 2 + 12 * count : start + 6 + 12 * count], "little")
    for entry in range(start + 2, start + 2 + 12 * int.from_bytes(tiff[start : start + 2], "little"), 12):
        if int.from_bytes(tiff[entry : entry + 2], "little") == 259:
            tiff[entry + 8 : entry + 10] = compression.to_bytes(2, "little")
            return bytes(tiff)
    raise AssertionError("Pillow wrote no compression tag")


def test_a_registered_tiff_compression_pillow_lacks_is_unsupported_an_unknown_number_is_damage(
    capture: StderrCapture,
) -> None:
    it8 = _kinds(_tiff_with_compression(32896), ".tif", capture)  # TIFF/IT linework (prepress)
    assert "corrupt" not in it8
    assert "TIFF/IT linework compression" in it8["unsupported"]
    assert "corrupt" in _kinds(_tiff_with_compression(12345), ".tif", capture)


def test_a_later_tiff_page_in_a_codec_pillow_lacks_is_unsupported_with_all_frames(
    capture: StderrCapture,
) -> None:
    pages = [Image.new("L", (24, 16), shade) for shade in (40, 200)]
    buffer = io.BytesIO()
    pages[0].save(buffer, "TIFF", save_all=True, append_images=pages[1:])
    it8 = _tiff_with_compression(32896, buffer.getvalue(), page=1)
    every_frame = ImageOptions(all_frames=True)
    found = {f.kind: f.detail for f in probe_image_bytes(it8, ".tif", every_frame, capture).findings}
    assert "corrupt" not in found
    assert "page 2: TIFF/IT linework compression" in found["unsupported"]
    broken = _tiff_with_compression(12345, buffer.getvalue(), page=1)
    assert "corrupt" in {f.kind for f in probe_image_bytes(broken, ".tif", every_frame, capture).findings}


def _tiles_under_strip_tags(width: int = 40, height: int = 20, tile: int = 16) -> bytes:
    """An uncompressed 8-bit grey TIFF whose tiles are listed under the strip tags (273, 279), with
    TileWidth / TileLength set, as early TIFF 6 writers stored them: libtiff reads it. The directory
    comes first and the tiles last, so cutting the file's end cuts the last tile."""
    count = -(-width // tile) * -(-height // tile)
    entries = 10
    arrays = 8 + 2 + 12 * entries + 4
    first_tile = arrays + 8 * count
    tags = [
        (256, 3, 1, width), (257, 3, 1, height), (258, 3, 1, 8), (259, 3, 1, 1), (262, 3, 1, 1),
        (273, 4, count, arrays), (277, 3, 1, 1), (279, 4, count, arrays + 4 * count),
        (322, 3, 1, tile), (323, 3, 1, tile),
    ]  # fmt: skip
    ifd = struct.pack("<H", entries)
    for tag, kind, number, value in tags:
        packed = struct.pack("<HH", value, 0) if kind == 3 else struct.pack("<I", value)
        ifd += struct.pack("<HHI", tag, kind, number) + packed
    offsets = [first_tile + n * tile * tile for n in range(count)]
    lists = struct.pack(f"<{count}I", *offsets) + struct.pack(f"<{count}I", *[tile * tile] * count)
    pixels = b"".join(bytes([40 * n % 256]) * tile * tile for n in range(count))
    return b"II*\x00" + struct.pack("<I", 8) + ifd + struct.pack("<I", 0) + lists + pixels


def test_a_tiff_only_libtiff_reads_is_sound_but_unsupported_a_cut_one_is_damaged(
    capture: StderrCapture,
) -> None:
    tiff = _tiles_under_strip_tags()
    with Image.open(io.BytesIO(tiff)) as im, pytest.raises(OSError):
        im.load()  # Pillow's own reader takes the tiles for strips
    sound = _kinds(tiff, ".tif", capture)
    assert "corrupt" not in sound
    assert "libtiff decodes it" in sound["unsupported"]  # sound, but the loader's load() fails
    assert "corrupt" in _kinds(tiff[:-100], ".tif", capture)  # the last tile cut short


def test_an_svg_or_libvips_image_is_unsupported_an_html_page_with_inline_svg_is_not_an_image(
    capture: StderrCapture,
) -> None:
    svg = b'<?xml version="1.0"?>\n<!-- logo -->\n<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 8 8"/>'
    page = b'<!DOCTYPE html><html><body><svg viewBox="0 0 8 8"></svg>Not Found</body></html>'
    vips = b"\xb6\xa6\xf2\x08" + struct.pack("<iii", 8, 8, 3) + bytes(52)  # a .v header, little-endian
    for data, extension in ((svg, ".svg"), (svg, ".png"), (vips, ".v")):
        found = _kinds(data, extension, capture)
        assert "corrupt" not in found
        assert "Pillow has no reader" in found["unsupported"]
    assert "HTML page" in _kinds(page, ".jpg", capture)["corrupt"]


@pytest.mark.parametrize("lossless", [False, True])
def test_a_webp_cut_and_zero_filled_is_damage_though_every_decoder_reads_it(
    lossless: bool, capture: StderrCapture
) -> None:
    noise = np.random.default_rng(0).integers(0, 256, (96, 128, 3), dtype=np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(noise).save(buffer, "WEBP", lossless=lossless)
    webp = buffer.getvalue()
    keep = len(webp) * 3 // 5
    zero_filled = webp[:keep] + bytes(len(webp) - keep)  # the length kept, the tail lost
    with Image.open(io.BytesIO(zero_filled)) as im:
        im.load()  # Pillow (libwebp) decodes the zeros as picture
    assert "corrupt" not in _kinds(webp, ".webp", capture)
    assert "zero bytes" in _kinds(zero_filled, ".webp", capture)["corrupt"]


def test_a_jpeg_cut_and_zero_filled_is_damage_zeros_after_its_end_marker_are_not(
    capture: StderrCapture,
) -> None:
    yy, xx = np.mgrid[0:120, 0:160]
    waves = np.stack(
        [(xx * 0.8 + yy * 0.3) % 256, np.sin(xx / 17) * 60 + 120, np.cos(yy / 13) * 70 + 110], -1
    )
    noisy = waves + np.random.default_rng(2).normal(0, 12, waves.shape)
    buffer = io.BytesIO()
    # a comment holding the end-of-image marker's bytes, which the check must not take for it
    photo = Image.fromarray(np.clip(noisy, 0, 255).astype(np.uint8))
    photo.save(buffer, "JPEG", quality=95, comment=b"x\xff\xd9y")  # zeros decode quietly at this quality
    jpeg = buffer.getvalue()
    keep = len(jpeg) * 3 // 5
    zero_filled = jpeg[:keep] + bytes(len(jpeg) - keep)
    padded = jpeg + bytes(4096)  # zeros after the EOI, as some writers pad files
    assert "corrupt" not in _kinds(jpeg, ".jpg", capture)
    assert "corrupt" not in _kinds(padded, ".jpg", capture)
    assert "no end-of-image marker" in _kinds(zero_filled, ".jpg", capture)["corrupt"]


def test_a_jpeg_whose_height_comes_from_a_dnl_marker_is_unsupported_a_zero_height_alone_is_damage(
    capture: StderrCapture,
) -> None:
    jpeg = _encoded("JPEG", size=(48, 40))
    frame = jpeg.index(b"\xff\xc0")  # baseline frame header: length, precision, then the height
    no_height = jpeg[: frame + 5] + b"\x00\x00" + jpeg[frame + 7 :]
    dnl = no_height[:-2] + b"\xff\xdc\x00\x04" + (40).to_bytes(2, "big") + no_height[-2:]  # before EOI
    later = _kinds(dnl, ".jpg", capture)
    assert "corrupt" not in later
    assert "DNL marker" in later["unsupported"]
    assert "corrupt" in _kinds(no_height, ".jpg", capture)


def _four_colour_png(bits: int = 8) -> bytes:
    """A palette PNG whose pixels use the indices 0-3 (bands of 4 colours), saved at `bits`."""
    im = Image.fromarray((np.arange(40 * 48).reshape(40, 48) // 480).astype(np.uint8), mode="P")
    im.putpalette([0, 0, 0, 90, 90, 90, 180, 180, 180, 255, 255, 255])
    buffer = io.BytesIO()
    im.save(buffer, "PNG", bits=bits)
    return buffer.getvalue()


@pytest.mark.parametrize("bits", [2, 8])
def test_a_palette_index_past_the_plte_is_damage_though_pillow_decodes_it(
    bits: int, capture: StderrCapture
) -> None:
    png = _four_colour_png(bits)
    four = next(body for kind, body in _chunks(png) if kind == b"PLTE")[:12]
    assert "corrupt" not in _kinds(_with_plte(png, [four]), ".png", capture)
    short = _with_plte(png, [four[:9]])  # one colour short of the indices the pixels use
    with Image.open(io.BytesIO(short)) as im:
        im.load()  # Pillow reads it without a word
    assert "palette index 3 used" in _kinds(short, ".png", capture)["corrupt"]


def test_a_jpeg_precision_no_jpeg_process_holds_is_damage_not_unsupported(capture: StderrCapture) -> None:
    data = bytearray(_encoded("JPEG", quality=90))
    data[data.index(b"\xff\xc0") + 4] = 74  # a frame header's sample precision hit by a flipped byte
    found = _kinds(bytes(data), ".jpg", capture)
    assert "unsupported" not in found
    assert "corrupt" in found


def _tiff_entry(tiff: bytes, tag: int) -> int:
    """Where the first directory's entry for `tag` sits in a Pillow-made (little-endian) TIFF."""
    start = int.from_bytes(tiff[4:8], "little")
    for entry in range(start + 2, start + 2 + 12 * int.from_bytes(tiff[start : start + 2], "little"), 12):
        if int.from_bytes(tiff[entry : entry + 2], "little") == tag:
            return entry
    raise AssertionError(f"Pillow wrote no tag {tag}")


def test_a_tiff_layout_no_valid_file_holds_is_damage_one_pillow_lacks_stays_unsupported(
    capture: StderrCapture,
) -> None:
    rgb = bytearray(_encoded("TIFF"))
    bits = _tiff_entry(rgb, 258)
    twelve = bytearray(rgb)  # 12 bits a sample: valid, but no Pillow mode
    at = int.from_bytes(twelve[bits + 8 : bits + 12], "little")
    twelve[at : at + 6] = struct.pack("<3H", 12, 12, 12)
    found = _kinds(bytes(twelve), ".tif", capture)
    assert "corrupt" not in found
    assert "sample layout" in found["unsupported"]
    no_bits = bytearray(rgb)  # the BitsPerSample tag lost (renamed to a private tag): 1-bit RGB
    no_bits[bits : bits + 2] = (65000).to_bytes(2, "little")
    assert "no BitsPerSample tag" in _kinds(bytes(no_bits), ".tif", capture)["corrupt"]
    zero = bytearray(twelve)
    zero[at : at + 6] = struct.pack("<3H", 8, 0, 8)
    assert "no sample holds 0" in _kinds(bytes(zero), ".tif", capture)["corrupt"]
    logluv = bytearray(twelve)  # a LogLuv photometric on uncompressed data: SGILog needs both
    photometric = _tiff_entry(logluv, 262)
    logluv[photometric + 8 : photometric + 10] = (32845).to_bytes(2, "little")
    assert "SGILog data needs both" in _kinds(bytes(logluv), ".tif", capture)["corrupt"]


def test_a_jpeg_whose_end_marker_is_lost_is_damage_though_the_reduced_decode_passes(
    capture: StderrCapture,
) -> None:
    data = _encoded("JPEG", quality=90)
    assert data.endswith(b"\xff\xd9") and "corrupt" not in _kinds(data, ".jpg", capture)
    overwritten = data[:-2] + b"\xff\xc9"  # the end marker's place taken by a frame marker
    assert "no end-of-image marker" in _kinds(overwritten, ".jpg", capture)["corrupt"]
    padded = data + bytes(range(256)) * 20  # junk after the marker, as some cameras write
    assert "corrupt" not in _kinds(padded, ".jpg", capture)


def _big_endian_bigtiff(width: int = 8, height: int = 6) -> bytes:
    """An uncompressed RGB BigTIFF in big-endian byte order, its pixels from a Pillow image."""
    pixels = Image.fromarray(np.full((height, width, 3), 90, np.uint8)).tobytes()
    fields = [  # (tag, type, values): SHORT 3, LONG8 16
        (256, 3, [width]), (257, 3, [height]), (258, 3, [8, 8, 8]), (259, 3, [1]), (262, 3, [2]),
        (273, 16, [16]), (277, 3, [3]), (278, 3, [height]), (279, 16, [len(pixels)]),
    ]  # fmt: skip
    directory = len(fields).to_bytes(8, "big")
    for tag, kind, values in fields:
        value = b"".join(v.to_bytes(2 if kind == 3 else 8, "big") for v in values)
        directory += struct.pack(">HHQ", tag, kind, len(values)) + value.ljust(8, b"\x00")
    header = b"MM\x00\x2b\x00\x08\x00\x00" + (16 + len(pixels)).to_bytes(8, "big")
    return header + pixels + directory + bytes(8)


def test_a_big_endian_bigtiff_pillow_misreads_is_unsupported_a_cut_one_is_damage(
    capture: StderrCapture,
) -> None:
    whole = _big_endian_bigtiff()
    found = _kinds(whole, ".tif", capture)
    assert "corrupt" not in found
    assert "big-endian BigTIFF" in found["unsupported"]
    cut = whole[:16] + whole[40:]  # pixels lost in the middle: the strip now reaches past the end
    assert "corrupt" in _kinds(cut, ".tif", capture)
