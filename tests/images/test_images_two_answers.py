"""Two answers per file: is it damaged, and will a loader built on Pillow load it?

Each test builds, from a Pillow-made image, the defect a public test corpus showed the scan
misjudging (benchmarks/image_corpora_verdicts.csv keeps the real files' verdicts), and checks
Pillow's own behaviour first, so the test fails if the premise stops holding.
"""

from __future__ import annotations

import io
import struct
import zlib

import numpy as np
import pytest
from PIL import Image

from datalint.scan.images import (
    ImageOptions,
    StderrCapture,
    classify_decoder_messages,
    probe_image_bytes,
)


@pytest.fixture
def capture() -> StderrCapture:
    return StderrCapture()


def _findings(data: bytes, extension: str, capture: StderrCapture, **options: bool) -> dict[str, str]:
    probe = probe_image_bytes(data, extension, ImageOptions(**options), capture)
    return {f.kind: f.detail for f in probe.findings}


def _pillow_refuses(data: bytes) -> str:
    try:
        with Image.open(io.BytesIO(data)) as im:
            im.load()
    except Exception as exc:
        return str(exc)
    raise AssertionError("Pillow loads the file: the test's premise no longer holds")


def _pixels(height: int = 24, width: int = 32) -> np.ndarray:
    return (np.random.default_rng(3).random((height, width, 3)) * 255).astype(np.uint8)


def _encoded(fmt: str, **params: int) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(_pixels()).save(buffer, fmt, **params)
    return buffer.getvalue()


def _chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


# --------------------------------------------------------------------------- libtiff's notices


def test_a_libtiff_tag_it_skips_as_undefined_is_information_not_damage() -> None:
    notice = (
        "TIFFFetchNormalTag: Defined set_get_field_type of custom tag 0 (Tag 0) is "
        "TIFF_SETGET_UNDEFINED and thus tag is not read from file."
    )
    assert [f.kind for f in classify_decoder_messages("libtiff", notice)] == ["decoder_warning"]
    damage = "ThunderDecode: Not enough data at scanline 320 (0 != 1512)."
    assert [f.kind for f in classify_decoder_messages("libtiff", damage)] == ["corrupt"]


# --------------------------------------------------------------------------- TGA and BMP headers


def _tga(map_depth: int, map_length: int, image_type: int = 1, id_length: int = 0) -> bytes:
    header = struct.pack(
        "<BBBHHBHHHHBB", id_length, 1, image_type, 0, map_length, map_depth, 0, 0, 8, 4, 8, 0x20
    )
    colour_map = bytes(map_length * -(-map_depth // 8))
    return header + bytes(id_length) + colour_map + bytes(range(32))


def test_a_tga_whose_header_declares_a_colour_map_the_file_does_not_hold_is_damaged(
    capture: StderrCapture,
) -> None:
    complete = _tga(map_depth=15, map_length=16)  # 15-bit entries: valid, but Pillow lacks them
    _pillow_refuses(complete)
    assert "corrupt" not in _findings(complete, ".tga", capture)
    assert "unsupported" in _findings(complete, ".tga", capture)

    header_only = _tga(map_depth=15, map_length=256, id_length=30)[:18]  # as Pillow's p_8.tga
    found = _findings(header_only, ".tga", capture)
    assert "unsupported" not in found
    assert "colour map of 512 bytes" in found["corrupt"]


def test_a_tga_colour_map_of_entries_no_writer_makes_is_damage(capture: StderrCapture) -> None:
    odd = _tga(map_depth=2, map_length=2, image_type=2)  # libgd's bug00247a.tga: 2-bit entries
    assert "colour-map entries of 2 bits" in _findings(odd, ".tga", capture)["corrupt"]


def _bmp_bitfields(height: int, masks: tuple[int, int, int], rows: int) -> bytes:
    width, row = 8, 16
    header = struct.pack("<IiiHHIIiiII", 40, width, height, 1, 16, 3, row * height, 2835, 2835, 0, 0)
    pixel_offset = 14 + 40 + 12
    data = header + struct.pack("<III", *masks) + bytes(row * rows)
    return b"BM" + struct.pack("<IHHI", 14 + len(data), 0, 0, pixel_offset) + data


def test_a_bmp_far_shorter_than_its_header_promises_is_damaged_whole_it_is_unsupported(
    capture: StderrCapture,
) -> None:
    masks = (0xF000, 0x0F00, 0x00F0)  # a 4-4-4 bit-field layout this Pillow does not decode
    whole = _bmp_bitfields(height=40, masks=masks, rows=40)
    assert "bitfields layout" in _pillow_refuses(whole)
    assert "unsupported" in _findings(whole, ".bmp", capture)

    cut = _bmp_bitfields(height=40, masks=masks, rows=3)
    found = _findings(cut, ".bmp", capture)
    assert "unsupported" not in found
    assert "promises 640 bytes of pixels" in found["corrupt"]


# --------------------------------------------------------------------------- who else reads it


def test_a_netpbm_comment_right_after_the_magic_number_is_no_damage_but_pillow_refuses_it(
    capture: StderrCapture,
) -> None:
    raster = _pixels().tobytes()
    commented = b"P6#written by a scanner\n32 24\n255\n" + raster
    _pillow_refuses(commented)
    found = _findings(commented, ".ppm", capture)
    assert "corrupt" not in found
    assert "Pillow-based loader fails" in found["unsupported"]
    assert "Netpbm header" in found["unsupported"]
    cut = commented[: len(commented) // 2]
    assert "promises 2,304 bytes of raster" in _findings(cut, ".ppm", capture)["corrupt"]


def test_a_jp2_box_running_past_its_parent_is_damage_though_openjpeg_reads_on(
    capture: StderrCapture,
) -> None:
    jp2 = bytearray(_encoded("JPEG2000"))
    colr = jp2.index(b"colr") - 4
    jp2[colr : colr + 4] = struct.pack(">I", 60)  # as Pillow's invalid_header_length.jp2
    _pillow_refuses(bytes(jp2))
    found = _findings(bytes(jp2), ".jp2", capture)
    assert "unsupported" not in found
    assert "JP2 box 'colr'" in found["corrupt"]


def test_a_tiff_only_libtiff_reads_is_quarantined_as_unsupported_naming_both(
    capture: StderrCapture,
) -> None:
    from tests.images.test_images_judges import _tiles_under_strip_tags

    tiff = _tiles_under_strip_tags()
    _pillow_refuses(tiff)  # the loader's own Image.open(...).load()
    found = _findings(tiff, ".tif", capture)
    assert "corrupt" not in found
    assert "libtiff decodes it" in found["unsupported"]
    assert "Image.open(...).load() fails" in found["unsupported"]


# --------------------------------------------------------------------------- PNG, GIF, JPEG


def test_a_png_whose_image_data_chunks_are_apart_is_damaged(capture: StderrCapture) -> None:
    png = _encoded("PNG")
    start = png.index(b"IDAT") - 4
    length = struct.unpack(">I", png[start : start + 4])[0]
    body = png[start + 8 : start + 8 + length]
    half = len(body) // 2
    apart = (
        png[:start]
        + _chunk(b"IDAT", body[:half])
        + _chunk(b"tEXt", b"key\x00value")
        + _chunk(b"IDAT", body[half:])
        + png[start + 12 + length :]
    )
    assert "truncated" in _pillow_refuses(apart)
    assert "IDAT chunks apart" in _findings(apart, ".png", capture)["corrupt"]


def _animated_gif(frames: int = 4) -> bytes:
    images = [Image.fromarray(np.roll(_pixels(), 5 * n, axis=1)).convert("P") for n in range(frames)]
    buffer = io.BytesIO()
    images[0].save(buffer, "GIF", save_all=True, append_images=images[1:], duration=50)
    return buffer.getvalue()


def test_damage_after_the_first_frame_of_a_gif_is_found_by_default(capture: StderrCapture) -> None:
    gif = _animated_gif()
    assert not {"corrupt", "unsupported"} & set(_findings(gif, ".gif", capture))
    cut = gif[: len(gif) - 60]
    with Image.open(io.BytesIO(cut)) as im:
        im.load()  # the first frame, all a loader's convert("RGB") reads, is whole
    assert "the file ends inside frame 4" in _findings(cut, ".gif", capture)["corrupt"]
    last = gif.rindex(b"\x21\xf9\x04")
    stray = gif[:last] + b"\x00" + gif[last:]  # as libvips' invalid_multiframe.gif
    assert "a stray byte 0x00" in _findings(stray, ".gif", capture)["corrupt"]
    appended = gif[:-1] + gif  # another GIF after the first's frames: Pillow's own test files hold one
    assert "corrupt" not in _findings(appended, ".gif", capture)


def test_junk_between_jpeg_header_segments_is_damage_where_pillow_refuses_it(
    capture: StderrCapture,
) -> None:
    jpeg = _encoded("JPEG", quality=90)
    tables = jpeg.index(b"\xff\xdb")
    skipped = jpeg[:tables] + b"\x00\x00\x00" + jpeg[tables:]  # libjpeg and Pillow skip it
    assert "extraneous bytes" in _findings(skipped, ".jpg", capture)["decoder_warning"]
    refused = jpeg[:tables] + b"\x00\xff\x01" + jpeg[tables:]  # libjpeg skips it, Pillow does not
    _pillow_refuses(refused)
    assert "unsupported" not in _findings(refused, ".jpg", capture)
    assert "corrupt" in _findings(refused, ".jpg", capture)


# --------------------------------------------------------------------------- structure walks


def test_a_tiff_whose_directory_chain_loops_is_damaged(capture: StderrCapture) -> None:
    buffer = io.BytesIO()
    Image.fromarray(_pixels()).save(buffer, "TIFF")
    tiff = bytearray(buffer.getvalue())
    first = struct.unpack("<I", tiff[4:8])[0]
    count = struct.unpack("<H", tiff[first : first + 2])[0]
    next_at = first + 2 + 12 * count
    assert not {"corrupt", "unsupported"} & set(_findings(bytes(tiff), ".tif", capture))
    tiff[next_at : next_at + 4] = struct.pack("<I", first)  # as libgd's test_ifd_loop_to_self.tif
    with Image.open(io.BytesIO(bytes(tiff))) as im:
        im.load()  # the first page loads
    assert "directory chain loops" in _findings(bytes(tiff), ".tif", capture)["corrupt"]


def _rle8_bmp(stream: bytes, width: int = 8, height: int = 2) -> bytes:
    palette = b"".join(bytes((n, n, n, 0)) for n in range(256))
    header = struct.pack("<IiiHHIIiiII", 40, width, height, 1, 8, 1, len(stream), 2835, 2835, 256, 0)
    offset = 14 + 40 + len(palette)
    body = header + palette + stream
    return b"BM" + struct.pack("<IHHI", 14 + len(body), 0, 0, offset) + body


def test_a_run_length_bmp_whose_runs_pass_the_end_of_a_row_is_damaged(capture: StderrCapture) -> None:
    whole = _rle8_bmp(b"\x08\x10\x00\x00\x08\x20\x00\x01")  # 8 pixels, end of line, 8 pixels, end
    assert not {"corrupt", "unsupported"} & set(_findings(whole, ".bmp", capture))
    overrun = _rle8_bmp(b"\x0c\x10\x00\x00\x08\x20\x00\x01")  # 12 pixels in a row of 8
    with Image.open(io.BytesIO(overrun)) as im:
        im.load()  # Pillow clips the run without a word
    assert "past the end of row 0" in _findings(overrun, ".bmp", capture)["corrupt"]


def test_formats_without_magic_are_named_when_whole_and_damage_when_cut(capture: StderrCapture) -> None:
    wbmp = b"\x00\x00\x10\x04" + bytes(8)  # 16 x 4 one-bit pixels
    assert "WBMP" in _findings(wbmp, ".wbmp", capture)["unsupported"]
    assert "promises 8 bytes" in _findings(wbmp[:-3], ".wbmp", capture)["corrupt"]
    svg = b'<svg xmlns="http://www.w3.org/2000/svg" width="4" height="4"></svg>'
    svgz = zlib.compressobj(wbits=31)
    packed = svgz.compress(svg) + svgz.flush()
    assert "gzip-compressed SVG" in _findings(packed, ".svgz", capture)["unsupported"]
    assert "cut short" in _findings(packed[:-12], ".svgz", capture)["corrupt"]
    analyze = struct.pack("<i", 348) + bytes(344)
    assert "Analyze 7.5" in _findings(analyze, ".hdr", capture)["unsupported"]
