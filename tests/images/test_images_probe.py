"""The per-file image probe on the corpus generator's small mode and on hand-made edge cases."""

from __future__ import annotations

import io
import os
import struct
import subprocess
import sys
import textwrap
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from images_support import corpus_module, kinds_found
from PIL import Image, ImageFile

from datalint.scan.images import (
    DAMAGE_KINDS,
    DEFAULT_MAX_PIXELS,
    ImageOptions,
    StderrCapture,
    check_png,
    classify_jpeg_messages,
    opencv_flags_truncation,
    probe_image_bytes,
    probe_image_file,
)

CORPUS_KINDS = [*corpus_module().SPECIALS, "clean"]


@pytest.fixture(scope="module")
def found_by_kind(small_corpus: tuple[Path, list[Any]]) -> dict[str, list[tuple[set[str], set[str]]]]:
    """kind -> [(kinds found, kinds expected)] for every file of the small corpus."""
    images, rows = small_corpus
    found = kinds_found(images, [row.relpath for row in rows])
    by_kind: dict[str, list[tuple[set[str], set[str]]]] = {}
    for row, kinds in zip(rows, found, strict=True):
        by_kind.setdefault(row.kind, []).append((kinds, set(row.expected)))
    return by_kind


@pytest.mark.parametrize("kind", CORPUS_KINDS)
def test_every_planted_kind_gets_exactly_its_findings(found_by_kind: dict, kind: str) -> None:
    pairs = found_by_kind[kind]
    assert pairs, f"the small corpus has no {kind} file"
    for found, expected in pairs:
        assert found == expected


@pytest.fixture
def capture() -> Any:
    sink = StderrCapture()
    yield sink
    sink.close()


def _file_of(small_corpus: tuple[Path, list[Any]], kind: str) -> Path:
    images, rows = small_corpus
    return images / next(row.relpath for row in rows if row.kind == kind)


@pytest.mark.parametrize(
    ("kind", "words"),
    [
        ("jpeg_trunc50", "truncated"),
        ("jpeg_bitflip", "Corrupt JPEG data"),
        ("png_bad_crc", "bad CRC in IDAT"),
        ("png_bad_zlib", "zlib"),
        ("png_trunc", "PNG cut"),
        ("html_as_jpg", "HTML page"),
        ("broken_link", "broken symbolic link"),
        ("bomb_header", "10000000000 pixels"),
    ],
)
def test_damage_details_say_what_is_wrong(
    small_corpus: Any, capture: StderrCapture, kind: str, words: str
) -> None:
    probe = probe_image_file(_file_of(small_corpus, kind), ImageOptions(), capture)
    damage = [f for f in probe.findings if f.kind in DAMAGE_KINDS]
    assert len(damage) == 1 and words in damage[0].detail


def test_libjpeg_warnings_do_not_leak_into_the_next_file(small_corpus: Any, capture: StderrCapture) -> None:
    flipped = probe_image_file(_file_of(small_corpus, "jpeg_bitflip"), ImageOptions(), capture)
    assert flipped.damaged and "Corrupt JPEG data" in capture.text
    clean = probe_image_file(_file_of(small_corpus, "clean"), ImageOptions(), capture)
    assert clean.findings == () and capture.text == ""


def test_decoder_warnings_are_captured_not_printed_and_stderr_comes_back(small_corpus: Any) -> None:
    script = textwrap.dedent(
        """
        import os, sys
        from datalint.scan.images import ImageOptions, StderrCapture, probe_image_file
        probe = probe_image_file(sys.argv[1], ImageOptions(), StderrCapture())
        print(probe.findings[0].kind, probe.findings[0].detail)
        os.write(2, b"stderr is back\\n")
        """
    )
    flipped = str(_file_of(small_corpus, "jpeg_bitflip"))
    result = subprocess.run(
        [sys.executable, "-c", script, flipped], capture_output=True, text=True, timeout=60
    )
    assert result.stdout.startswith("corrupt libjpeg: Corrupt JPEG data")
    assert result.stderr == "stderr is back\n"


def test_in_a_worker_whose_stderr_is_a_file_the_text_is_read_back_per_file(
    small_corpus: Any, tmp_path: Path
) -> None:
    # A scan worker's fd 2 is its output file: nothing is redirected, so a crash dump would still land there.
    script = textwrap.dedent(
        """
        import sys
        from datalint.scan.images import ImageOptions, StderrCapture, probe_image_file
        capture = StderrCapture()
        for path in sys.argv[1:]:
            probe = probe_image_file(path, ImageOptions(), capture)
            print([f.kind for f in probe.findings], repr(capture.text[:18]))
        """
    )
    files = [
        str(_file_of(small_corpus, kind)) for kind in ("jpeg_bitflip", "clean", "jpeg_header_junk", "clean")
    ]
    with (tmp_path / "worker-output").open("w+b") as output:
        result = subprocess.run(
            [sys.executable, "-c", script, *files],
            stdout=subprocess.PIPE,
            stderr=output,
            text=True,
            timeout=60,
        )
        output.seek(0)
        written = output.read().decode()
    assert result.stdout.splitlines() == [
        "['corrupt'] 'Corrupt JPEG data:'",
        "[] ''",
        "['decoder_warning'] 'Corrupt JPEG data:'",
        "[] ''",
    ]
    assert written.count("Corrupt JPEG data") == 2


def test_stderr_redirected_to_a_write_only_log_is_captured_too(small_corpus: Any, tmp_path: Path) -> None:
    # `datalint scan --workers 0 2> scan.log`: fd 2 is a file that cannot be read back.
    script = "import sys\nfrom datalint.scan.images import *\n" + (
        "print([f.kind for f in probe_image_file(sys.argv[1], ImageOptions(), StderrCapture()).findings])"
    )
    flipped = str(_file_of(small_corpus, "jpeg_bitflip"))
    with (tmp_path / "scan.log").open("wb") as log:
        result = subprocess.run(
            [sys.executable, "-c", script, flipped], stdout=subprocess.PIPE, stderr=log, text=True
        )
    assert result.stdout == "['corrupt']\n" and (tmp_path / "scan.log").read_bytes() == b""


BOMB_UNDER_MEMORY_LIMIT = """
import resource, sys
from PIL import Image
from datalint.scan.images import ImageOptions, StderrCapture, opencv_flags_truncation, probe_image_file
opencv_flags_truncation()  # warm every import before the limit
capture = StderrCapture()
with open("/proc/self/status") as status:
    vm_size = next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmSize:"))
resource.setrlimit(resource.RLIMIT_AS, (vm_size + 120 * 2**20, resource.RLIM_INFINITY))
for max_pixels in (None, 150_000_000):  # Pillow's refusal (over 2x its limit), then datalint's own check
    options = ImageOptions() if max_pixels is None else ImageOptions(max_pixels=max_pixels)
    probe = probe_image_file(sys.argv[1], options, capture)
    print(" ".join(f.kind for f in probe.findings))
Image.MAX_IMAGE_PIXELS = None
try:
    Image.open(sys.argv[1]).load()  # the control: a real decode cannot fit under this limit
    print("decoded")
except MemoryError:
    print("MemoryError")
"""


def test_bomb_is_decided_from_the_header_without_allocating_the_image(small_corpus: Any) -> None:
    bomb = _file_of(small_corpus, "bomb_real")  # 14000x14000 grayscale PNG: 187 MiB decoded
    result = subprocess.run(
        [sys.executable, "-c", BOMB_UNDER_MEMORY_LIMIT, str(bomb)], capture_output=True, text=True, timeout=60
    )
    assert result.stdout.split("\n")[:3] == ["decompression_bomb", "decompression_bomb", "MemoryError"], (
        result
    )


def test_max_pixels_is_configurable(small_corpus: Any, capture: StderrCapture) -> None:
    clean = _file_of(small_corpus, "clean")
    probe = probe_image_file(clean, ImageOptions(max_pixels=1_000), capture)
    assert [f.kind for f in probe.findings] == ["decompression_bomb"]
    assert "--max-pixels" in probe.findings[0].detail and probe.decoder is None


def test_default_max_pixels_is_pillows() -> None:
    assert DEFAULT_MAX_PIXELS == Image.MAX_IMAGE_PIXELS


def test_truncation_is_found_even_when_user_code_turned_it_off(
    small_corpus: Any, capture: StderrCapture
) -> None:
    ImageFile.LOAD_TRUNCATED_IMAGES = True
    try:
        for kind in ("jpeg_trunc90", "png_trunc", "bmp_trunc"):
            assert probe_image_file(_file_of(small_corpus, kind), ImageOptions(), capture).damaged, kind
        assert ImageFile.LOAD_TRUNCATED_IMAGES is True  # the user's setting is left as it was
    finally:
        ImageFile.LOAD_TRUNCATED_IMAGES = False


def test_this_opencv_refuses_truncated_jpegs() -> None:
    # Where it does not (OpenCV 4.6), every JPEG is also decoded by Pillow; this build takes the fast path.
    assert opencv_flags_truncation()


def test_special_files_are_unreadable_not_a_hang(tmp_path: Path, capture: StderrCapture) -> None:
    (tmp_path / "folder.jpg").mkdir()
    os.mkfifo(tmp_path / "pipe.jpg")
    details = [
        probe_image_file(tmp_path / name, ImageOptions(), capture).findings
        for name in ("folder.jpg", "pipe.jpg")
    ]
    assert [(f[0].kind, f[0].detail) for f in details] == [
        ("unreadable", "not a regular file (a directory)"),
        ("unreadable", "not a regular file (a named pipe)"),
    ]


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their mode")
def test_a_file_without_read_permission_is_unreadable(tmp_path: Path, capture: StderrCapture) -> None:
    locked = tmp_path / "locked.jpg"
    locked.write_bytes(b"\xff\xd8\xff")
    locked.chmod(0)
    assert probe_image_file(locked, ImageOptions(), capture).findings[0].kind == "unreadable"


def test_a_later_frame_cut_is_found_from_the_block_walk_and_decoded_only_with_all_frames(
    corpus: Any, capture: StderrCapture
) -> None:
    animated = corpus.animated_gif(np.random.default_rng(5))
    cut_in_last_frame = animated[: len(animated) - 200]
    first = probe_image_bytes(cut_in_last_frame, ".gif", ImageOptions(), capture)
    every = probe_image_bytes(cut_in_last_frame, ".gif", ImageOptions(all_frames=True), capture)
    assert [f.detail for f in first.findings if f.kind == "corrupt"] == [
        "the file ends inside frame 3 (its data starts at byte 9,594)"
    ]
    assert {f.kind for f in probe_image_bytes(animated, ".gif", ImageOptions(), capture).findings} == {
        "multi_frame",
        "palette",
    }
    assert any(
        f.kind == "corrupt" and f.detail.startswith("the file ends inside frame 3") for f in every.findings
    )


@pytest.mark.parametrize(
    ("text", "kinds"),
    [
        ("Corrupt JPEG data: 12 extraneous bytes before marker 0xd9", ["corrupt"]),
        ("Corrupt JPEG data: 3 extraneous bytes before marker 0xd4", ["corrupt"]),
        ("Corrupt JPEG data: premature end of data segment", ["corrupt"]),
        ("Corrupt JPEG data: 3 extraneous bytes before marker 0xdb", ["decoder_warning"]),
        ("Warning: unknown JFIF revision number 3.01", ["decoder_warning"]),
        ("", []),
    ],
)
def test_libjpeg_messages_about_scan_data_are_damage_the_rest_information(
    text: str, kinds: list[str]
) -> None:
    assert [f.kind for f in classify_jpeg_messages(text)] == kinds


# --------------------------------------------------------------------------- PNG edge cases


def _png(width: int, height: int, depth: int, colour: int, raw: bytes, interlace: int = 0) -> bytes:
    def chunk(kind: bytes, body: bytes) -> bytes:
        return (
            struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(body, zlib.crc32(kind)))
        )

    ihdr = struct.pack(">IIBBBBB", width, height, depth, colour, 0, 0, interlace)
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")
    )


def _adam7_rows(pixels: np.ndarray) -> bytes:
    """The raw (filter type 0) data of an interlaced PNG of 8-bit RGB pixels."""
    raw = b""
    for x0, y0, dx, dy in (
        (0, 0, 8, 8),
        (4, 0, 8, 8),
        (0, 4, 4, 8),
        (2, 0, 4, 4),
        (0, 2, 2, 4),
        (1, 0, 2, 2),
        (0, 1, 1, 2),
    ):
        sub = pixels[y0::dy, x0::dx]
        if sub.size:
            raw += b"".join(b"\x00" + row.tobytes() for row in sub)
    return raw


def _pillow_loads(data: bytes) -> bool:
    try:
        Image.open(io.BytesIO(data)).load()
    except Exception:
        return False
    return True


def test_interlaced_png_of_odd_size_is_valid_and_its_cut_copy_is_not() -> None:
    pixels = np.random.default_rng(3).integers(0, 256, (23, 37, 3), dtype=np.uint8)
    data = _png(37, 23, 8, 2, _adam7_rows(pixels), interlace=1)
    assert _pillow_loads(data)
    assert check_png(data) == []
    short = _png(37, 23, 8, 2, _adam7_rows(pixels)[:-40], interlace=1)
    assert [f.kind for f in check_png(short)] == ["corrupt"] and not _pillow_loads(short)


def test_a_row_filter_byte_that_does_not_exist_is_damage_pillow_agrees() -> None:
    rows = bytearray(b"".join(b"\x00" + bytes(range(30)) for _ in range(8)))
    rows[5 * 31] = 7
    data = _png(10, 8, 8, 2, bytes(rows))
    assert "row 5: filter type 7" in check_png(data)[0].detail and not _pillow_loads(data)


def test_a_zlib_bomb_behind_a_small_header_stops_at_the_promised_size() -> None:
    data = _png(10, 10, 8, 0, bytes(50_000_000))  # IHDR says 110 bytes of image data
    assert "more image data than IHDR's size allows (110 bytes)" in check_png(data)[0].detail


def test_low_bit_depth_palette_png_is_valid(capture: StderrCapture) -> None:
    image = Image.fromarray(np.random.default_rng(1).integers(0, 255, (33, 45, 3), dtype=np.uint8)).quantize(
        16
    )
    buffer = io.BytesIO()
    image.save(buffer, "PNG", bits=4)
    probe = probe_image_bytes(buffer.getvalue(), ".png", ImageOptions(), capture)
    assert buffer.getvalue()[24] == 4 and [f.kind for f in probe.findings] == ["palette"]


@pytest.mark.parametrize("inflater", ["zlib", "isal"])
@pytest.mark.parametrize("kind", ["png_bad_zlib", "png_idat_flip", "png_trunc", "clean_png", "png16_rgb"])
def test_png_verdicts_do_not_depend_on_the_inflater(
    corpus: Any, monkeypatch: pytest.MonkeyPatch, inflater: str, kind: str
) -> None:
    pytest.importorskip("isal")
    import datalint.scan.images as images

    if inflater == "zlib":
        monkeypatch.setitem(sys.modules, "isal", None)  # `import isal` now fails: the zlib fallback
    images.inflate_module.cache_clear()
    try:
        rng = np.random.default_rng(11)
        data = corpus.png(rng) if kind == "clean_png" else corpus.SPECIALS[kind].make(rng)
        assert images.inflate_module().__name__.split(".")[0] == inflater
        assert [f.kind for f in check_png(data)] == (
            [] if kind in ("clean_png", "png16_rgb") else ["corrupt"]
        )
    finally:
        images.inflate_module.cache_clear()
