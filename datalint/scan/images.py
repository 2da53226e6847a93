"""Image-file probes: is this file a decodable image, and what kind of image is it?

One file is read once; every check works on those bytes:

1. read: `unreadable` (permissions, broken link, not a regular file), `empty`;
2. sniff the magic bytes: content that is no image at all (an HTML error page, random bytes) is
   `corrupt`; a real image format this installation cannot read is `unsupported`;
3. open the header with Pillow (~30 µs): format, mode, size, EXIF orientation; a pixel count over
   `max_pixels` is a `decompression_bomb`, decided before a single pixel is decoded;
4. decode, the cheapest way that still finds every kind of damage:
   - JPEG: OpenCV at 1/8 scale in grayscale. libjpeg still walks all the entropy-coded data, so
     truncation and bit flips are found, but it skips most of the IDCT and colour work. The
     corrupt-data warnings libjpeg prints on the C-level stderr are captured per file: they are the
     only trace of flipped scan bytes. Pillow gives the message when OpenCV refuses a file. A
     JPEG with no end-of-image marker after its first scan ends inside its image data.
   - PNG: a walk over the chunks that checks every CRC (Pillow's `load()` ignores IDAT CRCs),
     IHDR's values and an APNG's animation chunks, inflates the image data with a size cap and
     checks its length and row filter bytes. That is everything a decoder can trip on, without
     unfiltering or allocating the image; but for a palette image whose PLTE is shorter than its
     depth addresses, which Pillow decodes to compare its highest index with the palette.
   - GIF, WebP, PNM, run-length BMP: Pillow's `load()` of the first frame, then OpenCV's decode,
     because Pillow alone passes some damage there (a broken RLE stream); never TIFF, where OpenCV
     refuses valid files. BMP and TGA fields decoders forgive are checked from the header.
   - anything else: Pillow's `load()` of the first frame.
   Native decoders' stderr (libjpeg, libtiff, libpng) is captured for every decode and sorted
   into damage, missing pieces and information.
5. a failure that names something this installation lacks (Ghostscript, a plugin, a codec, a
   decoder feature such as 12-bit JPEG) is `unsupported`, not damage (`judge_failure`), unless
   the file holds a value no valid file holds (a 74-bit JPEG, a TIFF layout with no bit depth).

`ImageFile.LOAD_TRUNCATED_IMAGES` is forced off while a file is probed: a user module that set it
would otherwise hide truncation. `ImageFilesSource` serves the files to the scan engine (a folder,
a list, or the files behind a dataset). Findings decided from the whole index (duplicates) or
from thresholds (tiny, extreme aspect ratio) are the policy functions at the end of this module.
The finding kinds are documented in docs/images.md.
"""

from __future__ import annotations

import errno
import hashlib
import io
import os
import re
import warnings
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from datalint.errors import UsageError
from datalint.files import FileTooLarge, read_regular_file
from datalint.index import population
from datalint.index.kinds import DAMAGE_KINDS, UNSUPPORTED_KIND
from datalint.index.store import read_key
from datalint.scan.stderr_capture import StderrCapture
from datalint.text import safe_str, shown_name

if TYPE_CHECKING:
    from PIL import Image


# Pillow's own default for Image.MAX_IMAGE_PIXELS (a test keeps the two equal).
DEFAULT_MAX_PIXELS = 89_478_485
DEFAULT_EXTENSIONS: tuple[str, ...] = (
    ".jpg", ".jpeg", ".jpe", ".jfif", ".png", ".gif", ".bmp", ".webp",
    ".tif", ".tiff", ".ppm", ".pgm", ".pbm", ".pnm",
)  # fmt: skip

# Extension -> the formats Pillow reports for a file that matches it. MPO is a camera JPEG.
_FORMATS_BY_EXTENSION: dict[str, frozenset[str]] = {
    ".jpg": frozenset({"JPEG", "MPO"}),
    ".jpeg": frozenset({"JPEG", "MPO"}),
    ".jpe": frozenset({"JPEG", "MPO"}),
    ".jfif": frozenset({"JPEG", "MPO"}),
    ".png": frozenset({"PNG"}),
    ".apng": frozenset({"PNG"}),
    ".gif": frozenset({"GIF"}),
    ".bmp": frozenset({"BMP", "DIB"}),
    ".webp": frozenset({"WEBP"}),
    ".tif": frozenset({"TIFF"}),
    ".tiff": frozenset({"TIFF"}),
    ".ppm": frozenset({"PPM"}),
    ".pgm": frozenset({"PPM"}),
    ".pbm": frozenset({"PPM"}),
    ".pnm": frozenset({"PPM"}),
}

_GRAYSCALE_MODES = frozenset({"1", "L", "LA", "La", "I", "I;16", "I;16L", "I;16B", "I;16N", "F"})
_ALPHA_MODES = frozenset({"RGBA", "RGBa", "LA", "La", "PA"})
_MODE_BIT_DEPTH: dict[str, int] = {
    "1": 1,
    "I;16": 16,
    "I;16L": 16,
    "I;16B": 16,
    "I;16N": 16,
    "I": 32,
    "F": 32,
}
_EXIF_ORIENTATION = 0x0112


@dataclass(frozen=True)
class ImageOptions:
    """How files are probed; the same for every file of a scan."""

    max_pixels: int = DEFAULT_MAX_PIXELS
    all_frames: bool = False  # decode every frame of animated / multi-page files, not only the first
    quality: bool = True  # score the decoded pixels (scan/quality.py) in the same pass


@dataclass(frozen=True)
class ImageFinding:
    kind: str
    detail: str


@dataclass(frozen=True)
class ImageProbe:
    """What one file turned out to be: its measurements and the findings decided from it alone."""

    nbytes: int
    findings: tuple[ImageFinding, ...] = ()
    sha256: str | None = None
    format: str | None = None
    mode: str | None = None
    width: int | None = None
    height: int | None = None
    bit_depth: int | None = None
    frames: int | None = None  # 1, or 2 for "more than one" (counting them all costs a decode each)
    orientation: int | None = None
    decoder: str | None = None  # which check judged the pixel data: opencv, png, pillow
    quality: dict[str, Any] | None = None  # raw quality scores and perceptual hash (scan/quality.py)

    @property
    def damaged(self) -> bool:
        return any(f.kind in DAMAGE_KINDS for f in self.findings)

    @property
    def unsupported(self) -> bool:
        return any(f.kind == UNSUPPORTED_KIND for f in self.findings)

    def info(self) -> dict[str, Any]:
        """The measurements for `samples.info` (JSON), without the Nones.

        A damaged or undecodable file has no `sha256` here: two copies of one HTML error page are
        not duplicates.
        """
        judged = not (self.damaged or self.unsupported)
        fields = {
            "file_bytes": self.nbytes, "sha256": self.sha256 if judged else None,
            "format": self.format, "mode": self.mode, "width": self.width, "height": self.height,
            "bit_depth": self.bit_depth, "frames": self.frames, "orientation": self.orientation,
            "decoder": self.decoder, "quality": self.quality if judged else None,
        }  # fmt: skip
        return {name: value for name, value in fields.items() if value is not None}

    def measurement(self) -> dict[str, Any]:
        """The plain data a scan worker reports for this file.

        The file size goes to `info`, not to `nbytes`: "oversized" judges samples in memory, and a
        large PNG among small JPEGs is no fault (the pixel count has its own check).
        """
        return {
            "info": self.info(),
            "findings": [{"kind": f.kind, "detail": f.detail} for f in self.findings],
        }


# --------------------------------------------------------------------------- file listing


@dataclass(frozen=True)
class ImageListing:
    """The image files under a folder (sorted, relative POSIX paths) and what was passed over.

    `unlisted` maps a sub-folder that could not be listed (permissions, a path too long) to why:
    it is a row of its own, reported `unreadable`, so a scan says what it could not see.
    """

    root: str
    files: tuple[str, ...]
    skipped: int = 0  # regular files whose extension is not an image extension
    skipped_examples: tuple[str, ...] = ()
    unlisted: Mapping[str, str] = field(default_factory=dict)


def normalize_extensions(extensions: Sequence[str]) -> tuple[str, ...]:
    """`["JPG", ".png"]` -> `(".jpg", ".png")`."""
    cleaned = {("." + e.strip().lstrip(".")).lower() for e in extensions if e.strip().lstrip(".")}
    return tuple(sorted(cleaned))


def list_image_files(root: str | Path, extensions: Sequence[str] = DEFAULT_EXTENSIONS) -> ImageListing:
    """Walk `root` recursively (symlinked folders are not followed, so no cycles) for image files.

    Every entry that is not a folder is listed by its name alone, whatever it is: a broken or
    looping symlink, a FIFO or a socket named `.jpg` is then reported `unreadable` with the reason
    (nothing here opens or even stats through it). A sub-folder that cannot be listed is a row too.
    """
    base = Path(root)
    wanted = frozenset(normalize_extensions(extensions))
    files: list[str] = []
    skipped: list[str] = []
    unlisted: dict[str, str] = {}
    for relative, problem in _walk(base):
        if problem is not None:
            unlisted[relative] = problem
            files.append(relative)
        elif _has_extension(relative, wanted):
            files.append(relative)
        else:
            skipped.append(relative)
    skipped.sort()
    return ImageListing(str(base), tuple(sorted(files)), len(skipped), tuple(skipped[:5]), unlisted)


def _has_extension(path: str, wanted: frozenset[str]) -> bool:
    """`file_extension(path) in wanted`, inline for the common name ("0001.jpg": a letter or
    digit before its last dot), which is all but every file of a folder."""
    dot = path.rfind(".")
    if dot > 0 and path[dot - 1] not in "./":
        tail = path[dot:]
        return "/" not in tail and tail.lower() in wanted  # "d.x/a": the dot is a folder's
    return file_extension(path) in wanted


def file_extension(path: str) -> str:
    """`os.path.splitext(path)[1].lower()` for a "/"-separated relative path, at a third of its
    cost (every incremental scan lists the whole folder): the last dot of the name, unless only
    dots come before it (".hidden", "..": no extension)."""
    dot = path.rfind(".")
    name_start = path.rfind("/") + 1
    if dot <= name_start:
        return ""
    if path[dot - 1] == "." and not path[name_start:dot].strip("."):
        return ""
    return path[dot:].lower()


def _walk(base: Path) -> Iterator[tuple[str, str | None]]:
    """(relative path, None) for each non-folder entry; (folder path + "/", why) for an unlistable folder.

    Iterative, with one open folder at a time: a tree 10,000 folders deep needs no recursion and
    no more file descriptors than a flat one.
    """
    pending = [""]
    while pending:
        relative = pending.pop()
        try:
            with os.scandir(base / relative if relative else base) as entries:
                children = [(entry.name, _is_folder(entry)) for entry in entries]
        except OSError as exc:
            if not relative:
                raise UsageError(f"cannot list the image folder {base}: {_os_reason(exc)}") from None
            yield relative + "/", f"folder not listed ({_os_reason(exc)}): its files were not scanned"
            continue
        for name, is_folder in children:
            path = f"{relative}/{name}" if relative else name
            if is_folder:
                pending.append(path)
            else:
                yield path, None


def _is_folder(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir(follow_symlinks=False)
    except OSError:  # the entry vanished or cannot be looked at: list it, and its read says why
        return False


def _os_reason(exc: OSError) -> str:
    if isinstance(exc, PermissionError):
        return "permission denied"
    return exc.strerror or type(exc).__name__


def read_file_list(list_path: str | Path) -> tuple[str, ...]:
    """Paths from a text file, one per line; blank lines and `#` comments are ignored."""
    text = Path(list_path).read_text(encoding="utf-8")
    lines = (line.strip() for line in text.splitlines())
    return tuple(line for line in lines if line and not line.startswith("#"))


# --------------------------------------------------------------------------- header sniffing


def sniff_format(head: bytes) -> str | None:
    """The image format the first bytes announce, or None; cheaper than asking Pillow."""
    for name, matches in _MAGIC.items():
        if matches(head):
            return name
    return None


_MAGIC: dict[str, Callable[[bytes], bool]] = {
    "JPEG": lambda h: h.startswith(b"\xff\xd8\xff"),
    "PNG": lambda h: h.startswith(b"\x89PNG\r\n\x1a\n"),
    "GIF": lambda h: h[:6] in (b"GIF87a", b"GIF89a"),
    "WEBP": lambda h: h[:4] == b"RIFF" and h[8:12] == b"WEBP",
    "BMP": lambda h: h[:2] == b"BM",
    "TIFF": lambda h: h[:4] in (b"II*\x00", b"MM\x00*"),
    # Netpbm allows a comment right after the magic number ("P6#made by..."), whitespace or not.
    "PPM": lambda h: (
        len(h) > 2 and h[0:1] == b"P" and h[1:2] in b"1234567" and (h[2:3].isspace() or h[2:3] == b"#")
    ),
    "ICO": lambda h: h[:4] == b"\x00\x00\x01\x00",
    "PSD": lambda h: h[:4] == b"8BPS",
    "JPEG2000": lambda h: h[:12] == b"\x00\x00\x00\x0cjP  \r\n\x87\n" or h[:4] == b"\xff\x4f\xff\x51",
    "HEIF": lambda h: h[4:8] == b"ftyp" and h[8:12] in (b"heic", b"heix", b"mif1", b"msf1", b"heim", b"hevc"),
    "AVIF": lambda h: h[4:8] == b"ftyp" and h[8:12] in (b"avif", b"avis"),
    "JPEGXL": lambda h: h[:2] == b"\xff\x0a" or h[:12] == b"\x00\x00\x00\x0cJXL \r\n\x87\n",
    "OLE": lambda h: h[:8] == b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1",  # FlashPix, MIC
    "HDR": lambda h: h.startswith((b"#?RADIANCE", b"#?RGBE")),
    "EXR": lambda h: h[:4] == b"\x76\x2f\x31\x01",
    "FARBFELD": lambda h: h[:8] == b"farbfeld",
    "VIPS": lambda h: h[:4] in (b"\x08\xf2\xa6\xb6", b"\xb6\xa6\xf2\x08"),  # libvips' own .v format
}


_SVG_MISSING = "SVG vector image: Pillow has no reader for it (rasterise it first, e.g. with cairosvg)"
# An SVG document: its root element, after an optional XML declaration, comments and doctype.
_SVG_ROOT = re.compile(
    rb"\A(?:\xef\xbb\xbf)?\s*(?:<\?xml[^>]*\?>\s*)?(?:(?:<!--.*?-->|<!DOCTYPE[^>]*>)\s*)*<svg[\s>]",
    re.DOTALL | re.IGNORECASE,
)


def is_svg(head: bytes) -> bool:
    """Whether the bytes begin an SVG document (an HTML page with inline SVG icons is not one)."""
    return _SVG_ROOT.match(head) is not None


def describe_non_image(head: bytes) -> str:
    """One line saying what a file that is no image seems to be instead."""
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n").lower()
    if text.startswith((b"<!doctype html", b"<html", b"<head", b"<body")) or b"<html" in text[:1024]:
        return "not an image: the content is an HTML page (a web error page saved under an image name?)"
    if text.startswith((b"<?xml", b"<svg")):
        return "not an image: the content is XML with no SVG root element"
    if text.startswith((b"{", b"[")):
        return "not an image: the content looks like JSON"
    if head and all(32 <= b < 127 or b in b"\t\r\n" for b in head[:256]):
        return "not an image: the content is plain text"
    return f"not an image: unrecognised content (first bytes {head[:8].hex(' ')})"


# --------------------------------------------------------------------------- the probe


class _Unreadable(Exception):
    """The file's bytes could not be read."""


def probe_image_file(path: str | Path, options: ImageOptions, capture: StderrCapture) -> ImageProbe:
    """Read, sniff, open and decode one file; every outcome is a finding, never an exception."""
    try:
        data = read_image_bytes(Path(path))
    except _Unreadable as exc:
        return ImageProbe(0, (ImageFinding("unreadable", str(exc)),))
    return probe_image_bytes(data, Path(path).suffix.lower(), options, capture)


# A file is read whole into a worker's memory; past this size it is reported instead of read, so a
# multi-gigabyte file named .jpg is one finding, not a MemoryError (or an OOM kill) in every worker.
MAX_FILE_BYTES = 1 << 30


def read_image_bytes(path: Path) -> bytes:
    """The file's bytes, at most MAX_FILE_BYTES; anything but a regular file is refused before a read
    could block (opened without blocking, checked on the open descriptor: no stat-then-open race)."""
    try:
        return read_regular_file(path, MAX_FILE_BYTES)
    except FileTooLarge as exc:
        raise _Unreadable(_too_large(exc.size)) from None
    except FileNotFoundError:
        if path.is_symlink():
            raise _Unreadable(f"broken symbolic link (to {os.readlink(path)})") from None
        raise _Unreadable("no such file") from None
    except PermissionError:
        raise _Unreadable("permission denied: the scanning user cannot read it") from None
    except OSError as exc:
        if exc.errno == errno.EINVAL and exc.strerror and exc.strerror.startswith("not a regular file"):
            raise _Unreadable(exc.strerror) from None
        raise _Unreadable(f"{type(exc).__name__}: {exc.strerror or exc}") from None


def _too_large(size: int) -> str:
    return (
        f"{size / (1 << 30):.1f} GiB, over the {MAX_FILE_BYTES >> 30} GiB limit for one image file: not read "
        "(no image in a training set is expected to be this large)"
    )


def probe_image_bytes(
    data: bytes, extension: str, options: ImageOptions, capture: StderrCapture
) -> ImageProbe:
    """The checks of one file's bytes; `extension` (".jpg") only decides `extension_mismatch`."""
    if not data:
        return ImageProbe(0, (ImageFinding("empty", "the file is empty (0 bytes)"),))
    digest = hashlib.sha256(data).hexdigest()
    sniffed = sniff_format(data[:32])
    try:
        with _pillow_guard(options):
            return _probe_decodable(data, digest, extension, sniffed, options, capture)
    except Exception as exc:  # per-file boundary: damaged files raise anything (SyntaxError, struct.error...)
        finding = _open_failure(exc, sniffed, data, options, extension)
        fmt = sniffed or _plugin_format(extension)
        if fmt is not None and finding.kind in _DECIDED and not finding.detail.startswith("not an image"):
            finding = judge_pillow_refusal(finding, fmt, data, capture)
        return ImageProbe(len(data), (finding,), sha256=digest, format=sniffed)


def _plugin_format(extension: str) -> str | None:
    """The Pillow format a name without magic bytes says (".tga" -> "TGA")."""
    from PIL import Image

    return Image.registered_extensions().get(extension) or _PLUGIN_ONLY_EXTENSIONS.get(extension)


def _open_failure(
    exc: Exception, sniffed: str | None, data: bytes, options: ImageOptions, extension: str = ""
) -> ImageFinding:
    from PIL import Image, UnidentifiedImageError

    if isinstance(exc, Image.DecompressionBombError):
        detail = f"refused from the header: {exc} (--max-pixels {options.max_pixels:,})"
        return ImageFinding("decompression_bomb", detail)
    if isinstance(exc, UnidentifiedImageError):
        if sniffed is None:
            return _unidentified_by_content(data, extension)
        if sniffed in _MISSING_PLUGINS:
            return ImageFinding(UNSUPPORTED_KIND, _MISSING_PLUGINS[sniffed])
        reason = _plugin_refusal(sniffed, data)
        if reason is None:
            return ImageFinding("corrupt", f"{sniffed} header unreadable: {exc}")
        return judge_failure(reason, sniffed, data)
    return judge_failure(_message(exc), sniffed, data)


def _unidentified_by_content(data: bytes, extension: str) -> ImageFinding:
    """No known magic and Pillow cannot identify it: no image at all, unless the name says a format
    without magic bytes (TGA, WAL) whose plugin can say why it refuses the file."""
    from PIL import Image

    if is_svg(data[:4096]):
        return ImageFinding(UNSUPPORTED_KIND, _SVG_MISSING)
    known = _NO_MAGIC_FORMATS.get(extension, lambda _: None)(data)
    if known is not None:
        return known
    fmt = Image.registered_extensions().get(extension) or _PLUGIN_ONLY_EXTENSIONS.get(extension)
    if fmt is None:
        return ImageFinding("corrupt", describe_non_image(data[:2048]))
    if fmt not in Image.OPEN:
        return ImageFinding(
            UNSUPPORTED_KIND,
            f"{fmt} files are not recognised by Image.open (only by their plugin's own open)",
        )
    reason = _plugin_refusal(fmt, data)
    if reason is None:
        return ImageFinding("corrupt", describe_non_image(data[:2048]))
    finding = judge_failure(reason, fmt, data)
    if finding.kind == "corrupt":
        return ImageFinding("corrupt", f"{describe_non_image(data[:2048])}; as {fmt}: {reason}")
    return finding


def wbmp_finding(data: bytes) -> ImageFinding | None:
    """A WBMP (type 0, the wireless bitmap), which has no magic: `unsupported` when its header and
    bits are whole (Pillow has no reader), `corrupt` when the file holds fewer bits than the header
    promises, None when the bytes are no WBMP header."""
    if len(data) < 4 or data[0] != 0 or data[1] != 0:
        return None
    pos, sides = 2, []
    for _side in range(2):
        value = 0
        while pos < len(data) and data[pos] & 0x80 and pos < 8:
            value, pos = (value << 7) | (data[pos] & 0x7F), pos + 1
        if pos >= len(data):
            return None
        value, pos = (value << 7) | data[pos], pos + 1
        sides.append(value)
    width, height = sides
    needed = (width + 7) // 8 * height
    if not width or not height:
        return None
    if len(data) - pos < needed:
        return ImageFinding(
            "corrupt",
            f"the WBMP header promises {needed:,} bytes of bits; the file holds {len(data) - pos:,}",
        )
    return ImageFinding(UNSUPPORTED_KIND, "WBMP (wireless bitmap) image: Pillow has no reader for it")


def svgz_finding(data: bytes) -> ImageFinding | None:
    """A gzip-compressed SVG: `unsupported` as any SVG when it inflates whole, `corrupt` when the
    gzip stream is cut or broken; None when it is no gzip stream or holds no SVG."""
    if data[:2] != b"\x1f\x8b":
        return None
    inflater = zlib.decompressobj(wbits=31)
    try:
        head = inflater.decompress(data, 1 << 16)
        while inflater.unconsumed_tail and not inflater.eof:
            inflater.decompress(inflater.unconsumed_tail, 1 << 20)
    except zlib.error as exc:
        return ImageFinding("corrupt", f"a gzip-compressed file (.svgz) whose stream is broken: {exc}")
    if not inflater.eof:
        return ImageFinding("corrupt", "a gzip-compressed file (.svgz) cut short: its stream does not end")
    return ImageFinding(UNSUPPORTED_KIND, f"gzip-compressed {_SVG_MISSING}") if is_svg(head[:4096]) else None


def analyze_finding(data: bytes) -> ImageFinding | None:
    """An Analyze 7.5 / NIfTI-1 header (`.hdr`, its first field 348, the header's size)."""
    if len(data) < 348 or 348 not in (int.from_bytes(data[:4], "little"), int.from_bytes(data[:4], "big")):
        return None
    return ImageFinding(
        UNSUPPORTED_KIND,
        "Analyze 7.5 / NIfTI-1 header (its pixels are in the .img beside it): Pillow has no reader for it",
    )


# Formats with no magic bytes, recognised from their name and a header read from the bytes.
_NO_MAGIC_FORMATS: dict[str, Callable[[bytes], ImageFinding | None]] = {
    ".wbmp": wbmp_finding, ".svgz": svgz_finding, ".hdr": analyze_finding,
}  # fmt: skip

# Formats Pillow reads only through their plugin's own `open()`, never through `Image.open`.
_PLUGIN_ONLY_EXTENSIONS: dict[str, str] = {".wal": "WAL"}

# Formats whose magic we know and that a stock Pillow build has no plugin for: what to install.
_MISSING_PLUGINS: dict[str, str] = {
    "OLE": "FlashPix or MIC image (an OLE container): Pillow reads these only with the olefile package",
    "HDR": "Radiance HDR image: Pillow has no reader for it (OpenCV and imageio read it)",
    "EXR": "OpenEXR image: Pillow has no reader for it (OpenEXR or imageio read it)",
    "FARBFELD": "farbfeld image: Pillow has no reader for it",
    "VIPS": "libvips native image (.v): Pillow has no reader for it (pyvips reads it)",
    "HEIF": "HEIF/HEIC image: this Pillow has no HEIF plugin (pip install pillow-heif, then register it)",
    "JPEGXL": "JPEG XL image: this Pillow has no JPEG XL plugin (pip install pillow-jxl-plugin)",
}
# Sniffed name -> Pillow's plugin name, for asking the plugin why it refused a file.
_PLUGIN_NAMES: dict[str, str] = {
    "JPEG": "JPEG", "PNG": "PNG", "GIF": "GIF", "WEBP": "WEBP", "BMP": "BMP", "TIFF": "TIFF",
    "PPM": "PPM", "ICO": "ICO", "PSD": "PSD", "JPEG2000": "JPEG2000", "AVIF": "AVIF",
}  # fmt: skip


def _plugin_refusal(sniffed: str, data: bytes) -> str | None:
    """Why the plugin for `sniffed` refuses the file ("unknown pixel mode"), which `Image.open` hides."""
    from PIL import Image

    opener = Image.OPEN.get(_PLUGIN_NAMES.get(sniffed, sniffed))
    if opener is None:
        return None if sniffed != "AVIF" else "decoder avif not available"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            opener[0](io.BytesIO(data)).close()  # type: ignore[call-arg]  # plugin classes take a file
    except Exception as exc:  # per-file boundary: the plugin raises anything on a damaged header
        return _message(exc)
    return None


# --------------------------------------------------------------------------- damage or a missing piece


_SAMPLE_LAYOUT = "a sample layout (bits, sample format, channels) Pillow does not decode"

# A decoder's refusal that names something this installation lacks, not something wrong with the
# file (research §8.8: without Ghostscript every EPS looks broken). Each pattern comes with the piece
# that is missing; `None` keeps the decoder's own words.
_MISSING_PIECES: tuple[tuple[re.Pattern[str], str | None], ...] = tuple(
    (re.compile(pattern, re.IGNORECASE), piece)
    for pattern, piece in (
        (r"unable to locate ghostscript", "Ghostscript (the `gs` program), which Pillow needs to read EPS"),
        (r"decoder (\w+) not available", "this Pillow was built without the {1} decoder"),
        (r"cannot find loader for this (\w+) file", "Pillow has only a stub for {1}: register a loader"),
        (r"(\w+) compression support is not configured", "libtiff was built without {1} compression"),
        (r"unsupported jpeg (process|data precision)", "lossless or 12/16-bit JPEG (this libjpeg lacks it)"),
        (r"unsupported bmp bitfields layout", "an uncommon BMP bit-field layout Pillow does not decode"),
        (r"unsupported bmp compression \((\d+)\)", "BMP compression {1}, which Pillow does not decode"),
        (r"unsupported bmp header type \((\d+)\)", "BMP header type {1} (OS/2 or rare), Pillow lacks it"),
        (r"unsupported bmp pixel depth \(0\)", "a BMP holding a JPEG or PNG stream, not decoded by Pillow"),
        (r"unsupported bmp pixel depth \((\d+)\)", "BMP pixel depth {1}, which Pillow does not decode"),
        (r"unknown tga map depth", "a TGA colour-map depth Pillow does not decode"),
        (r"unknown pixel mode|unknown raw mode|unable to determine .* mode|sorry, can not handle",
         _SAMPLE_LAYOUT),
        (r"unsupported bitcount|unimplemented|not implemented|unknown pixel format", None),
    )
)  # fmt: skip

# Numbers a valid file of each kind can hold; outside them the "unsupported" message is damage.
_PLAUSIBLE_NUMBERS: dict[str, frozenset[int]] = {
    "bmp compression": frozenset(range(14)),
    "bmp header type": frozenset({12, 16, 40, 52, 56, 64, 108, 124}),
    "bmp pixel depth": frozenset({0, 1, 2, 4, 8, 16, 24, 32, 64}),
}


def judge_failure(message: str, fmt: str | None, data: bytes = b"") -> ImageFinding:
    """A decoder's failure -> `unsupported` (the missing piece named) or `corrupt` (the file's fault).

    A feature a decoder lacks is not damage (a 64-bit float TIFF, an OS/2 BMP, a lossless JPEG), but
    "unsupported BMP pixel depth (30000)" is: a number no valid file holds makes it damage.
    """
    for pattern, piece in _MISSING_PIECES:
        match = pattern.search(message)
        if match is None:
            continue
        if not _plausible(match):
            return ImageFinding("corrupt", f"{message} (no valid file holds this value)")
        fault = tiff_layout_fault(data) if fmt == "TIFF" and piece == _SAMPLE_LAYOUT else None
        if fault is not None:
            return ImageFinding("corrupt", f"{message}: {fault}")
        what = message if piece is None else piece.format(*([match.group(0), *match.groups()]))
        return ImageFinding(UNSUPPORTED_KIND, f"{what} [{message}]" if piece is not None else what)
    if fmt == "TIFF" and data[:4] == b"MM\x00+" and big_endian_bigtiff_is_whole(data):
        return ImageFinding(UNSUPPORTED_KIND, f"a big-endian BigTIFF, which this Pillow misreads [{message}]")
    if fmt == "TIFF" and data:
        codec = tiff_codec_pillow_lacks(data)
        if codec is not None:
            return ImageFinding(UNSUPPORTED_KIND, f"{codec}, which this Pillow does not decode [{message}]")
    if fmt in ("JPEG", "MPO"):
        process = jpeg_unusual_process(data)
        if process is not None:
            return ImageFinding(UNSUPPORTED_KIND, f"{process}, which this Pillow cannot decode [{message}]")
    return ImageFinding("corrupt", message)


# Registered TIFF compression schemes (libtiff's tiff.h, the TIFF tag registry) that Pillow has no
# decoder for: a valid file using one is unsupported here; any other unknown number is damage.
_TIFF_CODECS_PILLOW_LACKS: dict[int, str] = {
    9: "JBIG (T.85) compression", 10: "JBIG (T.43) compression", 32766: "NeXT 2-bit RLE compression",
    32895: "TIFF/IT CT padded compression", 32896: "TIFF/IT linework compression",
    32897: "TIFF/IT monochrome picture compression", 32898: "TIFF/IT binary line art compression",
    32908: "Pixar film compression", 32909: "Pixar log compression", 32947: "Kodak DCS compression",
    33003: "Aperio JPEG 2000 (YCbCr) compression", 33005: "Aperio JPEG 2000 (RGB) compression",
    34661: "JBIG compression", 34712: "JPEG 2000 compression", 34715: "JBIG2 compression",
    34887: "LERC compression", 34892: "lossy JPEG (DNG) compression", 34933: "PNG-in-TIFF compression",
    34934: "JPEG XR compression", 50002: "JPEG XL compression", 52546: "JPEG XL (DNG) compression",
    65000: "Kodak DCR compression",
}  # fmt: skip


def tiff_codec_pillow_lacks(data: bytes) -> str | None:
    """The compression of a classic TIFF's first image when it is a registered scheme Pillow lacks."""
    from PIL import TiffImagePlugin

    compression = tiff_first_compression(data)
    if compression is None or compression in TiffImagePlugin.COMPRESSION_INFO:
        return None
    return _TIFF_CODECS_PILLOW_LACKS.get(compression)


def tiff_first_compression(data: bytes) -> int | None:
    """Tag 259 of a classic (not Big) TIFF's first directory, read from its bytes; 1 when absent."""
    tags = tiff_first_tags(data)
    return None if tags is None else _first(tags, 259, 1)


# SHORT and LONG, the integer types of the tags read here: type -> bytes per value.
_TIFF_INTEGER_SIZES = {3: 2, 4: 4}


def tiff_first_tags(data: bytes) -> dict[int, tuple[int, ...]] | None:
    """The integer tags of a classic (not Big) TIFF's first directory, read from its bytes (at most
    16 values each); None when the header or directory cannot be read."""
    order = {b"II*\x00": "little", b"MM\x00*": "big"}.get(data[:4])
    if order is None or len(data) < 8:
        return None
    endian: Any = order
    start = int.from_bytes(data[4:8], endian)
    count = int.from_bytes(data[start : start + 2], endian)
    tags: dict[int, tuple[int, ...]] = {}
    for entry in range(start + 2, start + 2 + 12 * min(count, 4096), 12):
        if len(data) < entry + 12:
            return None
        kind = int.from_bytes(data[entry + 2 : entry + 4], endian)
        size = _TIFF_INTEGER_SIZES.get(kind)
        if size is None:
            continue
        number = min(int.from_bytes(data[entry + 4 : entry + 8], endian), 16)
        at = entry + 8 if number * size <= 4 else int.from_bytes(data[entry + 8 : entry + 12], endian)
        values = data[at : at + number * size]
        tags[int.from_bytes(data[entry : entry + 2], endian)] = tuple(
            int.from_bytes(values[i : i + size], endian) for i in range(0, len(values) - size + 1, size)
        )
    return tags


def check_tiff_directories(data: bytes) -> list[ImageFinding]:
    """The chain of a classic TIFF's directories (its pages), and each page's SubIFD chains, walked
    from their offsets without decoding: a chain that comes back to a directory it holds, or a
    SubIFD chain that leads back to a page, is a loop (libtiff warns "IFD looping" and stops; a
    reader following the chain never ends), which Pillow passes while reading the first page.
    SubIFDs listed both by tag and by their neighbour's link are no loop. An offset past the end
    of the file is left to the decoders."""
    order = {b"II*\x00": "little", b"MM\x00*": "big"}.get(data[:4])
    if order is None or len(data) < 8:
        return []
    endian: Any = order
    pages: list[int] = []
    loop = _tiff_chain(data, int.from_bytes(data[4:8], endian), endian, pages, frozenset())
    for page in pages:
        if loop is not None:
            break
        count = int.from_bytes(data[page : page + 2], endian)
        for sub in _tiff_sub_directories(data, page, count, endian):
            loop = loop or _tiff_chain(data, sub, endian, [], frozenset(pages))
    if loop is None:
        return []
    return [
        ImageFinding(
            "corrupt", f"the TIFF directory chain loops: it comes back to the directory at byte {loop:,}"
        )
    ]


def _tiff_chain(
    data: bytes, start: int, endian: Any, chain: list[int], ancestors: frozenset[int]
) -> int | None:
    """Follow next-directory links from `start`, appending each directory to `chain`; the offset a
    loop comes back to (one already in the chain or among `ancestors`), or None."""
    while start and len(chain) < 1 << 16:
        if start in ancestors or start in chain:
            return start
        count = int.from_bytes(data[start : start + 2], endian)
        end = start + 2 + 12 * count
        if end + 4 > len(data):
            return None
        chain.append(start)
        start = int.from_bytes(data[end : end + 4], endian)
    return None


def _tiff_sub_directories(data: bytes, start: int, count: int, endian: Any) -> list[int]:
    """The offsets of a directory's SubIFDs (tag 330, LONG or IFD values)."""
    for entry in range(start + 2, start + 2 + 12 * count, 12):
        if int.from_bytes(data[entry : entry + 2], endian) == 330:
            number = min(int.from_bytes(data[entry + 4 : entry + 8], endian), 256)
            at = entry + 8 if number <= 1 else int.from_bytes(data[entry + 8 : entry + 12], endian)
            return [int.from_bytes(data[at + 4 * i : at + 4 * i + 4], endian) for i in range(number)]
    return []


# BigTIFF's integer types: type -> bytes per value (SHORT, LONG, LONG8).
_BIGTIFF_INTEGER_SIZES = {3: 2, 4: 4, 16: 8}


def big_endian_bigtiff_is_whole(data: bytes) -> bool:
    """A big-endian BigTIFF whose first directory is sound: a size, and strips or tiles that all lie
    inside the file. Pillow reads little-endian BigTIFF but not this byte order ("cannot identify",
    "Missing dimensions"), so such a file is one this Pillow cannot decode, not a damaged one; a cut
    or broken one fails the walk and stays damage."""
    if len(data) < 16 or data[4:8] != b"\x00\x08\x00\x00":
        return False
    start = int.from_bytes(data[8:16], "big")
    count = int.from_bytes(data[start : start + 8], "big")
    if not 0 < count <= 4096 or len(data) < start + 8 + 20 * count:
        return False
    tags: dict[int, list[int]] = {}
    for entry in range(start + 8, start + 8 + 20 * count, 20):
        size = _BIGTIFF_INTEGER_SIZES.get(int.from_bytes(data[entry + 2 : entry + 4], "big"))
        number = int.from_bytes(data[entry + 4 : entry + 12], "big")
        if size is None or number > 1 << 20:
            continue
        at = entry + 12 if number * size <= 8 else int.from_bytes(data[entry + 12 : entry + 20], "big")
        values = data[at : at + number * size]
        tags[int.from_bytes(data[entry : entry + 2], "big")] = [
            int.from_bytes(values[i : i + size], "big") for i in range(0, len(values) - size + 1, size)
        ]
    offsets, counts = tags.get(273) or tags.get(324), tags.get(279) or tags.get(325)
    return (
        bool(tags.get(256)) and bool(tags.get(257)) and bool(offsets) and offsets is not None
        and counts is not None and len(offsets) == len(counts)
        and all(offset + length <= len(data) for offset, length in zip(offsets, counts, strict=True))
    )  # fmt: skip


# Photometric interpretations (tag 262) of colour images, which no 1-bit sample can hold, and the
# SGILog ones, which exist only with SGILog compression (34676, 34677) and it only with them
# (libtiff refuses the rest).
_TIFF_COLOUR = frozenset({2, 5, 6, 8, 9, 10, 32844, 32845})
_TIFF_LOG = frozenset({32844, 32845})
_TIFF_SGILOG = frozenset({34676, 34677})


def tiff_layout_fault(data: bytes) -> str | None:
    """What makes a classic TIFF's first sample layout one no valid file holds, for a layout Pillow
    refuses ("unknown pixel mode"): no BitsPerSample (so 1 bit a sample) on a colour or multi-sample
    image, or one whose values lie past the file's end, a bit depth of 0 or past 64, SGILog data
    without its LogLuv photometric or the other way round. None when the layout is merely one
    Pillow lacks (12-bit, float, many samples): `unsupported`, not damage."""
    tags = tiff_first_tags(data)
    if tags is None:
        return None
    photometric, samples = _first(tags, 262, None), _first(tags, 277, 1)
    bits, compression = tags.get(258), _first(tags, 259, 1)
    if bits is None and (samples > 1 or photometric in _TIFF_COLOUR):
        return f"no BitsPerSample tag (so 1 bit a sample): {samples} sample(s), photometric {photometric}"
    if bits == ():
        return "a BitsPerSample tag whose values lie outside the file"
    if bits is not None and any(value == 0 or value > 64 for value in bits):
        return f"BitsPerSample {bits}: no sample holds 0 or more than 64 bits"
    if (photometric in _TIFF_LOG) != (compression in _TIFF_SGILOG):
        return f"photometric {photometric} with compression {compression}: SGILog data needs both"
    return None


def _first(tags: dict[int, tuple[int, ...]], tag: int, default: Any) -> Any:
    values = tags.get(tag)
    return values[0] if values else default


def _plausible(match: re.Match[str]) -> bool:
    text = match.group(0).lower()
    for name, allowed in _PLAUSIBLE_NUMBERS.items():
        if name in text:
            number = re.search(r"\((\d+)\)", text)
            return number is None or int(number.group(1)) in allowed
    return True


# SOF markers of the lossless JPEG processes, which a baseline/progressive decoder may lack.
_JPEG_LOSSLESS_SOF = frozenset({0xC3, 0xC7, 0xCB, 0xCF})


def jpeg_unusual_process(data: bytes) -> str | None:
    """A lossless or other-than-8-bit JPEG, or one whose height a DNL marker gives after the first
    scan (its frame header says 0: valid, but libjpeg has no DNL support), named from its frame
    header (SOFn); else None. Read by walking the markers before the scan data: no pixel is decoded.
    """
    pos = 2
    while pos + 4 <= len(data) and data[pos] == 0xFF:
        marker = data[pos + 1]
        if marker == 0xFF:  # fill byte
            pos += 1
            continue
        length = int.from_bytes(data[pos + 2 : pos + 4], "big")
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
            precision = data[pos + 4] if pos + 4 < len(data) else 8
            if marker in _JPEG_LOSSLESS_SOF:
                return f"lossless JPEG ({precision}-bit)" if 2 <= precision <= 16 else None
            if precision != 8:
                # The DCT processes hold 8- or 12-bit samples (T.81 B.2.2): any other precision
                # is a broken frame header, not a feature this libjpeg lacks.
                return f"{precision}-bit JPEG" if precision == 12 else None
            no_height = data[pos + 5 : pos + 7] == b"\x00\x00"
            return "JPEG whose height is set by a DNL marker" if no_height and _has_dnl(data, pos) else None
        if marker == 0xDA or length < 2:
            return None
        pos += 2 + length
    return None


def _has_dnl(data: bytes, start: int) -> bool:
    """A DNL marker (FFDC) after `start`: in entropy-coded data a 0xFF is always followed by 0x00
    or a restart marker, so the bytes FF DC there are the marker itself."""
    return data.find(b"\xff\xdc", start) != -1


def _message(exc: BaseException) -> str:
    text = safe_str(exc).strip() or "(no message)"
    return f"{type(exc).__name__}: {text}"


@contextmanager
def _pillow_guard(options: ImageOptions) -> Iterator[None]:
    """Pillow's globals as a scan needs them, restored afterwards (user code may rely on them)."""
    from PIL import Image, ImageFile

    truncated, limit = ImageFile.LOAD_TRUNCATED_IMAGES, Image.MAX_IMAGE_PIXELS
    ImageFile.LOAD_TRUNCATED_IMAGES = False
    Image.MAX_IMAGE_PIXELS = options.max_pixels
    try:
        with warnings.catch_warnings():
            # Between 1x and 2x the limit Pillow only warns; our own header check decides.
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            yield
    finally:
        ImageFile.LOAD_TRUNCATED_IMAGES, Image.MAX_IMAGE_PIXELS = truncated, limit


def pillow_hides_truncation() -> bool:
    """True when this process has `ImageFile.LOAD_TRUNCATED_IMAGES` on (a scan turns it off per file)."""
    from PIL import ImageFile

    return bool(ImageFile.LOAD_TRUNCATED_IMAGES)


def _probe_decodable(
    data: bytes,
    digest: str,
    extension: str,
    sniffed: str | None,
    options: ImageOptions,
    capture: StderrCapture,
) -> ImageProbe:
    from PIL import Image

    with Image.open(io.BytesIO(data)) as im:
        header = _header_facts(im, data)
        findings = [*_header_findings(im, header, extension)]
        pixels = im.width * im.height
        if pixels > options.max_pixels:
            detail = (
                f"{im.width}x{im.height} = {pixels:,} pixels, over the limit of {options.max_pixels:,} "
                f"(--max-pixels); decoding would need about {_decoded_mib(im)} MiB"
            )
            # The bomb is the story: the facts about its colours would only distract.
            return _probe(data, digest, header, [ImageFinding("decompression_bomb", detail)], decoder=None)
        decoder, damage, pixels = _decode(im, data, options, capture)
        findings.extend(damage)
        if not any(f.kind == "corrupt" for f in damage):
            header["quality"] = _quality_scores(im, pixels) if options.quality else None
            frames, frame_findings = _frame_facts(im, options, capture)
            header["frames"] = frames
            findings.extend(frame_findings)
    return _probe(data, digest, header, findings, decoder)


def _probe(
    data: bytes, digest: str, header: dict[str, Any], findings: list[ImageFinding], decoder: str | None
) -> ImageProbe:
    return ImageProbe(len(data), tuple(findings), sha256=digest, decoder=decoder, **header)


def _decoded_mib(im: Image.Image) -> int:
    channels = len(im.getbands())
    return max(1, im.width * im.height * channels // (1024 * 1024))


def _header_facts(im: Image.Image, data: bytes) -> dict[str, Any]:
    bit_depth = _MODE_BIT_DEPTH.get(im.mode, 8)
    if im.format == "PNG" and len(data) >= 25:
        bit_depth = data[24]  # IHDR bit depth: Pillow opens 16-bit RGB as 8-bit "RGB"
    return {
        "format": im.format,
        "mode": im.mode,
        "width": im.width,
        "height": im.height,
        "bit_depth": bit_depth,
    }


def _header_findings(im: Image.Image, header: dict[str, Any], extension: str) -> Iterator[ImageFinding]:
    mode, fmt = im.mode, im.format or "?"
    expected = _FORMATS_BY_EXTENSION.get(extension)
    if expected is not None and fmt not in expected:
        yield ImageFinding(
            "extension_mismatch", f"a {fmt} file named {extension} (valid, but the name is wrong)"
        )
    if mode == "CMYK":
        yield ImageFinding("cmyk", "CMYK colour: convert('RGB') gives different colours than most viewers")
    if mode in _GRAYSCALE_MODES:
        yield ImageFinding("grayscale", f"grayscale (mode {mode}): one channel where RGB is usual")
    if mode in ("P", "PA"):
        yield ImageFinding("palette", f"palette image (mode {mode}): convert it before use")
    if mode in _ALPHA_MODES or (mode == "P" and "transparency" in im.info):
        yield ImageFinding("alpha", f"has transparency (mode {mode}): convert('RGB') drops it")
    if header["bit_depth"] > 8:
        yield ImageFinding("high_bit_depth", f"{header['bit_depth']} bits per channel (mode {mode})")
    yield from _orientation_findings(im, header)


def _orientation_findings(im: Image.Image, header: dict[str, Any]) -> Iterator[ImageFinding]:
    if "exif" not in im.info and im.format != "TIFF":
        return
    try:
        orientation = im.getexif().get(_EXIF_ORIENTATION)
    except Exception as exc:  # a malformed EXIF block raises anything; the pixels may be fine
        yield ImageFinding(
            "bad_exif", f"EXIF block unreadable ({_message(exc)}): exif_transpose() would fail"
        )
        return
    if isinstance(orientation, int):
        header["orientation"] = orientation
        if orientation != 1:
            yield ImageFinding("exif_rotated", f"EXIF orientation {orientation}: shown rotated or mirrored")


# --------------------------------------------------------------------------- decoding


def _quality_scores(im: Image.Image, pixels: Any) -> dict[str, Any] | None:
    """Scores of what the decode produced (`_decode`): OpenCV's reduced JPEG (BGR), a PNG rebuilt
    with its image data stored, else the image Pillow holds (loaded here if the check did not)."""
    from PIL import Image

    from datalint.scan import quality

    try:
        if isinstance(pixels, bytes):
            with Image.open(io.BytesIO(pixels)) as rebuilt:
                return quality.score_pixels(_rgb_array(_thumbnail_source(rebuilt)))
        if isinstance(pixels, Image.Image):
            return quality.score_pixels(_rgb_array(_thumbnail_source(pixels)))
        if pixels is not None:
            return quality.score_pixels(_bgr_to_rgb(pixels) if pixels.ndim == 3 else pixels)
        return quality.score_pixels(_rgb_array(_thumbnail_source(im)))
    except Exception:  # per-file boundary: a file that decodes but cannot be scored is still judged
        return None


def _bgr_to_rgb(pixels: Any) -> Any:
    """OpenCV's channel order swapped, into a fresh array: a reversed view costs numpy's float
    conversion four times as much."""
    import cv2

    return cv2.cvtColor(pixels, cv2.COLOR_BGR2RGB) if pixels.shape[2] == 3 else pixels[:, :, ::-1]


def _thumbnail_source(im: Image.Image) -> Image.Image:
    """The image reduced by a whole factor to no less than twice the thumbnail's side. A mode Pillow
    cannot reduce (bilevel, palette) is first converted to what the scores read anyway (grey, RGB):
    one cheap pass, where scoring it at full size cost seconds for a large fax or palette image."""
    from datalint.scan import quality

    factor = quality.reduction_factor(im.height, im.width)
    if factor > 1 and im.mode not in _REDUCIBLE_MODES and not im.mode.startswith("I;16"):
        im = im.convert("L" if im.mode == "1" else "RGB")
    return im.reduce(factor) if factor > 1 and im.mode in _REDUCIBLE_MODES else im


_REDUCIBLE_MODES = frozenset({"L", "RGB", "RGBA", "LA", "CMYK", "I", "F", "I;16"})


def _rgb_array(im: Image.Image) -> Any:
    import numpy as np

    if im.mode in ("I;16", "I;16L", "I;16B", "I;16N", "I"):
        return np.asarray(im, dtype=np.float32) / (
            65535.0 if im.mode.startswith("I;16") else max(1, im.getextrema()[1])
        )
    if im.mode not in ("L", "RGB"):
        im = im.convert("RGB")
    return np.asarray(im)


def _decode(
    im: Image.Image, data: bytes, options: ImageOptions, capture: StderrCapture
) -> tuple[str, list[ImageFinding], Any]:
    """Decode the pixel data the cheapest way that still finds all damage; returns (decoder,
    findings, what the scores are taken from: the reduced BGR pixels of a JPEG, a PNG rebuilt from
    the check's inflate (`check_png_keeping_pixels`), the image libtiff decoded where Pillow's own
    TIFF reader could not (`tiff_through_libtiff`), or None for `im` itself).

    JPEG and PNG each have one check that judges them completely. Pillow alone is not a fair judge of
    GIF, WebP, PNM and run-length BMP (it loads a BMP whose RLE stream is broken, a GIF with broken
    blocks), so OpenCV decodes those too where Pillow found nothing; never TIFF, where OpenCV
    refuses many valid files (research §8.5).
    """
    if im.format in ("JPEG", "MPO"):
        findings, pixels = jpeg_findings_and_pixels(data, capture, color=options.quality, side=min(im.size))
        return "opencv", findings, pixels
    if im.format == "PNG":
        findings, rebuilt = check_png_keeping_pixels(data, keep=options.quality)
        return "png", findings, rebuilt
    findings = check_with_pillow(im, capture)
    if im.format == "TIFF" and any(f.kind == "corrupt" for f in findings) and _pillow_read_raw_tiff(im):
        findings, through_libtiff = tiff_through_libtiff(findings, data, capture)
        if through_libtiff is not None:
            return "pillow+libtiff", findings, through_libtiff
    if im.format == "TGA" and any("buffer overrun" in f.detail for f in findings if f.kind == "corrupt"):
        findings = _judge_tga_overrun(findings, data)
    if any(f.kind in _DECIDED for f in findings):  # Pillow refused it: who else reads it?
        return "pillow", _judged_refusals(findings, im.format or "?", data, capture), None
    if im.format == "BMP":
        findings.extend(check_bmp_layout(im, data))
    if im.format == "TIFF" and not any(f.kind in _DECIDED for f in findings):
        findings.extend(check_tiff_directories(data))
    if im.format == "ICO" and not any(f.kind in _DECIDED for f in findings):
        findings.extend(check_ico_directory(data))
    if im.format == "GIF" and not any(f.kind in _DECIDED for f in findings):
        findings.extend(check_gif_first_image(data) or check_gif_later_frames(data))
    if im.format == "WEBP" and not any(f.kind in _DECIDED for f in findings):
        findings.extend(check_webp_zero_fill(data))
    if not _second_opinion_is_fair(im, data) or any(f.kind in _DECIDED for f in findings) or _animated(im):
        return "pillow", findings, None  # OpenCV reads every frame of an animation: no first-frame judge
    return "pillow+opencv", [*findings, *opencv_second_opinion(data, im.format or "?", capture)], None


# Formats where an OpenCV failure never hit a valid file (research §8.5), and the findings that
# already settle a file.
_SECOND_OPINION = frozenset({"BMP", "GIF", "WEBP", "PPM"})  # not DIB: a headerless BMP OpenCV cannot read
_DECIDED = frozenset({"corrupt", UNSUPPORTED_KIND})


def _pillow_read_raw_tiff(im: Image.Image) -> bool:
    """Pillow decodes uncompressed TIFF data with its own reader, everything else through libtiff."""
    from PIL import TiffImagePlugin

    return not TiffImagePlugin.READ_LIBTIFF and getattr(im, "_compression", None) == "raw"


def tiff_through_libtiff(
    findings: list[ImageFinding], data: bytes, capture: StderrCapture
) -> tuple[list[ImageFinding], Image.Image | None]:
    """An uncompressed TIFF that Pillow's own reader refuses, decoded again through libtiff, the
    format's reference decoder: libtiff reads layouts Pillow's reader mistakes (tiles stored under
    the strip tags, as early TIFF 6 writers did). Clean there, the file is sound but a loader's
    `Image.open(...).load()` still fails on it (Pillow reads uncompressed TIFF itself unless
    `TiffImagePlugin.READ_LIBTIFF` is set): `unsupported`, naming both, with the decoded image for
    the scores; a truncated or broken file fails in libtiff too and keeps its damage (None)."""
    from PIL import Image, TiffImagePlugin

    previous, TiffImagePlugin.READ_LIBTIFF = TiffImagePlugin.READ_LIBTIFF, True
    try:
        with Image.open(io.BytesIO(data)) as again:
            second = check_with_pillow(again, capture)
            decoded = again.copy() if not any(f.kind in _DECIDED for f in second) else None
    except Exception:  # per-file boundary: libtiff refuses what Pillow's reader refused
        return findings, None
    finally:
        TiffImagePlugin.READ_LIBTIFF = previous
    if decoded is None:
        return findings, None
    refusal = "; ".join(f.detail for f in findings if f.kind == "corrupt")
    note = ImageFinding(
        UNSUPPORTED_KIND,
        f"Pillow's own TIFF reader refuses it ({refusal}), so Image.open(...).load() fails; "
        "libtiff decodes it (Pillow with TiffImagePlugin.READ_LIBTIFF = True reads it)",
    )
    return [note, *(f for f in findings if f.kind != "corrupt"), *second], decoded


def _judge_tga_overrun(findings: list[ImageFinding], data: bytes) -> list[ImageFinding]:
    """Pillow's TGA decoder reports "buffer overrun" for RLE packets that cross rows in some
    layouts, which many encoders write: when the packets hold exactly the image's pixels, the file
    is complete and the refusal is Pillow's limit, not damage."""
    if tga_rle_pixels(data) != _tga_pixel_count(data):
        return findings
    kept = [f for f in findings if not (f.kind == "corrupt" and "buffer overrun" in f.detail)]
    detail = "a run-length TGA whose packets cross rows: complete, but Pillow's TGA decoder refuses it"
    return [ImageFinding(UNSUPPORTED_KIND, detail), *kept]


def _tga_pixel_count(data: bytes) -> int:
    return (
        int.from_bytes(data[12:14], "little") * int.from_bytes(data[14:16], "little")
        if len(data) >= 18
        else -1
    )


def tga_rle_pixels(data: bytes) -> int | None:
    """Pixels the RLE packets of a run-length TGA (types 9-11) hold, or None when they run out of
    bytes: a walk over the packet headers, no pixel is decoded."""
    if len(data) < 18 or data[2] not in (9, 10, 11):
        return None
    entry_bytes = -(-data[7] // 8)
    palette = int.from_bytes(data[5:7], "little") * entry_bytes if data[1] == 1 else 0
    pixel_bytes = max(1, -(-data[16] // 8))
    pos, pixels, wanted = 18 + data[0] + palette, 0, _tga_pixel_count(data)
    while pixels < wanted:
        if pos >= len(data):
            return None
        header = data[pos]
        count = (header & 0x7F) + 1
        pos += 1 + (pixel_bytes if header & 0x80 else pixel_bytes * count)
        pixels += count
    return pixels if pos <= len(data) else None


def _second_opinion_is_fair(im: Image.Image, data: bytes) -> bool:
    """OpenCV judges GIF, WebP and PNM, and of BMPs the RLE-compressed ones: its BMP reader refuses
    valid 16-bit bit-field and V3 layouts, so there only the RLE stream is its to judge."""
    if im.format == "BMP":
        return len(data) >= 34 and int.from_bytes(data[30:34], "little") in (1, 2)
    return im.format in _SECOND_OPINION


def _animated(im: Image.Image) -> bool:
    try:
        return bool(getattr(im, "is_animated", False))
    except Exception:  # a later frame is broken: _frame_facts reports it
        return True


def check_bmp_layout(im: Image.Image, data: bytes) -> list[ImageFinding]:
    """What decoders forgive in a BMP but the format forbids: a top-down RLE image, runs past the end
    of a row or of the image, palette indices beyond the colours the header declares (decoders paint
    them black)."""
    if len(data) < 54 or int.from_bytes(data[14:18], "little") < 40:
        return []  # an OS/2 header: no compression or colour-count fields
    height = int.from_bytes(data[22:26], "little", signed=True)
    compression = int.from_bytes(data[30:34], "little")
    if height < 0 and compression in (1, 2):
        return [ImageFinding("corrupt", "a top-down BMP with RLE compression, which the format forbids")]
    if compression in (1, 2):
        fault = bmp_rle_fault(data, compression)
        if fault is not None:
            return [ImageFinding("corrupt", fault)]
    colours = int.from_bytes(data[46:50], "little")
    if im.mode == "P" and 0 < colours < 256:
        highest = im.getextrema()[1]
        if isinstance(highest, int) and highest >= colours:
            return [ImageFinding("corrupt", f"pixel index {highest} beyond the palette's {colours} colours")]
    return []


def bmp_rle_fault(data: bytes, compression: int, cut: bool = False) -> str | None:
    """A run-length BMP (RLE8: 1, RLE4: 2) whose runs, absolute runs or deltas reach past the end of
    a row or past the last row: the format forbids it, Pillow and OpenCV clip it without a word
    (bmpsuite's bad/badrle* files). With `cut`, a stream that runs out of bytes before its
    end-of-bitmap code too (OpenCV fills the rest where Pillow refuses)."""
    ended = "the run-length data ends before its end-of-bitmap code" if cut else None
    width = int.from_bytes(data[18:22], "little", signed=True)
    rows = abs(int.from_bytes(data[22:26], "little", signed=True))
    pos, x, y = int.from_bytes(data[10:14], "little"), 0, 0
    while pos + 1 < len(data):
        count, value = data[pos], data[pos + 1]
        pos += 2
        if count:
            x += count
        elif value == 0:
            x, y = 0, y + 1
            continue
        elif value == 1:
            return None
        elif value == 2:
            if pos + 1 >= len(data):
                return ended
            x, y, pos = x + data[pos], y + data[pos + 1], pos + 2
        else:
            x += value
            stored = value if compression == 1 else (value + 1) // 2
            pos += stored + (stored & 1)  # absolute runs are padded to 16 bits
        if x > width or y >= rows:
            where = "the last row" if y >= rows else f"the end of row {y}"
            return f"a run-length BMP whose runs reach past {where}"
    return ended


def check_ico_directory(data: bytes) -> list[ImageFinding]:
    """An ICO entry whose declared length cannot hold its bitmap's pixels: Pillow reads past the
    entry regardless, other readers refuse it. A cut AND mask alone is tolerated (readers agree)."""
    count = int.from_bytes(data[4:6], "little")
    for number in range(min(count, 256)):
        entry = data[6 + 16 * number : 22 + 16 * number]
        if len(entry) < 16:
            return [
                ImageFinding("corrupt", f"ICO directory cut: {count} entries announced, {number} present")
            ]
        size, offset = int.from_bytes(entry[8:12], "little"), int.from_bytes(entry[12:16], "little")
        header = data[offset : offset + 40]
        if len(header) < 40 or header[:8] == b"\x89PNG\r\n\x1a\n":
            continue  # an embedded PNG carries its own checks, and Pillow reads it as a PNG
        width = int.from_bytes(header[4:8], "little", signed=True)
        height = abs(int.from_bytes(header[8:12], "little", signed=True)) // 2  # XOR and AND masks
        bits, colours = int.from_bytes(header[14:16], "little"), int.from_bytes(header[32:36], "little")
        palette = 4 * (colours or (1 << bits if bits <= 8 else 0))
        needed = int.from_bytes(header[0:4], "little") + palette + (width * bits + 31) // 32 * 4 * height
        if size < needed:
            return [
                ImageFinding(
                    "corrupt", f"ICO entry {number + 1} declares {size:,} bytes; its bitmap needs {needed:,}"
                )
            ]
    return []


def check_gif_first_image(data: bytes) -> list[ImageFinding]:
    """The first image's LZW minimum code size, from a walk over the blocks before it. 0 is none an
    encoder writes (Pillow decodes such data into one flat colour without complaint), and from 12 on
    the first code would be wider than the 12 bits LZW codes have. Sizes 9 to 11 break the spec's
    limit of 8 but are real and decodable (Pillow's issue 2811), so they pass."""
    if len(data) < 13:
        return []
    flags, pos = data[10], 13
    if flags & 0x80:
        pos += 3 << ((flags & 7) + 1)  # the global colour table
    while pos < len(data) and data[pos] == 0x21:  # extensions: label, then sub-blocks up to a 0
        pos += 2
        while pos < len(data) and data[pos]:
            pos += data[pos] + 1
        pos += 1
    if pos + 11 > len(data) or data[pos] != 0x2C:
        return []  # the decoders judge a file cut or broken before its first image
    local = data[pos + 9]
    pos += 10 + ((3 << ((local & 7) + 1)) if local & 0x80 else 0)
    if pos >= len(data) or 1 <= data[pos] <= 11:
        return []
    detail = f"the first image's LZW minimum code size is {data[pos]}: no LZW data decodes with it"
    return [ImageFinding("corrupt", detail)]


def check_gif_later_frames(data: bytes) -> list[ImageFinding]:
    """The block grammar after the first image, walked without decoding: a file that ends inside a
    later frame or extension, a stray byte between blocks, a Graphic Control Extension of other
    than 4 bytes, an LZW code size no data decodes with. Pillow loads the first frame of such a file (and
    reads through stray bytes), so only this walk finds them by default; a file that ends after a
    whole frame with no trailer is read by every decoder and passes. The first image is the
    decoders' to judge."""
    walk = _GifWalk(data)
    if not walk.past_first_image():
        return []
    fault = walk.later_fault()
    return [] if fault is None else [ImageFinding("corrupt", fault)]


class _GifWalk:
    """A position in a GIF's blocks and the number of images passed."""

    def __init__(self, data: bytes) -> None:
        self.data, self.pos, self.images, self.code_size = data, 13, 0, 8
        if len(data) >= 13 and data[10] & 0x80:
            self.pos += 3 << ((data[10] & 7) + 1)  # the global colour table

    def past_first_image(self) -> bool:
        data = self.data
        while self.pos < len(data) and data[self.pos] == 0x21:
            if not self._skip_sub_blocks(self.pos + 2):
                return False
        return self.pos < len(data) and data[self.pos] == 0x2C and self._skip_image()

    def later_fault(self) -> str | None:
        data = self.data
        while self.pos < len(data) and data[self.pos] != 0x3B:
            at, block = self.pos, data[self.pos]
            where = f"at byte {at:,}, after frame {self.images}"
            if block == 0x21:
                if at + 2 < len(data) and data[at + 1] == 0xF9 and data[at + 2] != 4:
                    return f"a Graphic Control Extension of {data[at + 2]} bytes (4 in a valid GIF) {where}"
                if not self._skip_sub_blocks(at + 2):
                    return f"the file ends inside an extension {where}"
            elif block == 0x2C:
                frame = self.images + 1
                if not self._skip_image():
                    return f"the file ends inside frame {frame} (its data starts at byte {at:,})"
                if not 1 <= self.code_size <= 11:  # as check_gif_first_image judges the first
                    return f"frame {self.images}: LZW minimum code size {self.code_size}, no data decodes"
            elif data[at : at + 4] == b"GIF8":
                return None  # a second GIF appended (one of Pillow's own test files): not this one's frames
            else:
                return f"a stray byte 0x{block:02x} between blocks {where}"
        return None

    def _skip_image(self) -> bool:
        """Past an image descriptor, its colour table and its LZW data; False if the file ends
        first. An impossible LZW code size stops the walk as a fault of its own."""
        data, pos = self.data, self.pos
        if pos + 11 > len(data):
            return False
        local = data[pos + 9]
        pos += 10 + ((3 << ((local & 7) + 1)) if local & 0x80 else 0)
        if pos >= len(data):
            return False
        self.images += 1
        self.code_size = data[pos]
        return self._skip_sub_blocks(pos + 1)

    def _skip_sub_blocks(self, pos: int) -> bool:
        data = self.data
        while pos < len(data) and data[pos]:
            pos += data[pos] + 1
        self.pos = pos + 1
        return pos < len(data)


# Zero bytes at the end of a WebP's image data past which it is a file cut and zero-filled (an
# interrupted download into a preallocated file, blocks lost in a crash). Compressed image data
# holds no such run (2,048 zero bits): the valid WebPs of six test suites end in at most 7 zeros.
_ZERO_FILL_BYTES = 256
_WEBP_IMAGE_CHUNKS = frozenset({b"VP8 ", b"VP8L", b"ALPH", b"ANMF"})


def check_webp_zero_fill(data: bytes) -> list[ImageFinding]:
    """A WebP whose image data ends in a long run of zero bytes: libwebp decodes the zeros into the
    picture without complaint, and neither Pillow nor OpenCV notices (raw formats such as BMP or
    PPM cannot tell such zeros from black pixels; compressed TIFF, JPEG, PNG and GIF fail on them)."""
    if data[-_ZERO_FILL_BYTES:] != bytes(_ZERO_FILL_BYTES):
        return []  # the common case, without copying the file
    run_start = len(data.rstrip(b"\x00"))
    pos = 12
    while pos + 8 <= len(data):  # the RIFF chunks, to find the one where the zeros begin
        size = int.from_bytes(data[pos + 4 : pos + 8], "little")
        end = pos + 8 + size + (size & 1)
        if run_start < end:
            if data[pos : pos + 4] not in _WEBP_IMAGE_CHUNKS:
                return []
            zeros = len(data) - run_start
            detail = f"the image data ends in {zeros:,} zero bytes: the file was cut and zero-filled"
            return [ImageFinding("corrupt", detail)]
        pos = end
    return []


def opencv_second_opinion(data: bytes, fmt: str, capture: StderrCapture) -> list[ImageFinding]:
    """`corrupt` when OpenCV refuses pixel data that Pillow accepted; nothing when it decodes them.

    OpenCV's GIF reader refuses some valid GIFs for their layout (a background colour outside the
    palette, a frame that reaches past the screen): only its failures in the data count there.
    """
    import cv2
    import numpy as np

    with capture.capturing():
        try:
            decoded = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_UNCHANGED) is not None
        except cv2.error:
            decoded = False
    if decoded:
        return []
    said = _opencv_reason(capture.text)
    layout = "can't read header" in capture.text or "Assertion failed" in capture.text
    if fmt == "GIF" and layout and "code2pixel" not in capture.text:  # code2pixel: an LZW code, in the data
        # its checks of the declared geometry (a frame past the screen, a background colour outside
        # the palette), which Pillow resolves: information, not damage in the image data
        return [ImageFinding("decoder_warning", f"OpenCV refuses the GIF's layout, Pillow reads it: {said}")]
    return [ImageFinding("corrupt", f"OpenCV rejects the {fmt} pixel data Pillow accepted: {said}")]


def _opencv_reason(text: str) -> str:
    """The useful part of OpenCV's log line ("can't read data: ... Unexpected end of input stream")."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        return "no image returned (a broken data stream, e.g. a bad RLE run)"
    last = lines[-1]
    return re.sub(r"^\[[^\]]*\]\s*global\s+\S+\s*", "", last)[:200]


def check_jpeg(data: bytes, capture: StderrCapture) -> list[ImageFinding]:
    """Decode a JPEG at 1/8 scale with OpenCV, with libjpeg's warnings captured; Pillow names a failure."""
    return jpeg_findings_and_pixels(data, capture)[0]


def jpeg_findings_and_pixels(
    data: bytes, capture: StderrCapture, color: bool = False, side: int = 0
) -> tuple[list[ImageFinding], Any]:
    """`check_jpeg`'s findings and the reduced pixels it decoded (BGR with `color`, else grey): 1/8
    scale, or less reduced for a JPEG whose shorter `side` would then be under 32 pixels."""
    pixels, text = _opencv_decode(data, capture, color, side)
    decoded = pixels is not None
    findings = [*classify_jpeg_messages(text), *check_jpeg_zero_fill(data)]
    if decoded and opencv_flags_truncation():
        if _HEADER_JUNK.search(text) and not any(f.kind == "corrupt" for f in findings):
            findings.extend(_pillow_on_header_junk(data))
        return _with_end_marker(findings, data), pixels
    pillow_error = _pillow_jpeg_error(data)
    if pillow_error is not None:
        findings.append(judge_failure(pillow_error, "JPEG", data))  # a 12-bit JPEG is no damage
    elif not decoded:
        process = jpeg_unusual_process(data)
        if process is not None:  # OpenCV's libjpeg lacks the process; the loader's Pillow has it
            findings.append(
                ImageFinding("decoder_warning", f"OpenCV cannot decode this {process}; Pillow can")
            )
        else:
            findings.append(ImageFinding("corrupt", "OpenCV's libjpeg cannot decode it (Pillow can)"))
    return _with_end_marker(findings, data), None


# libjpeg skipped junk between header segments (not before a restart or end marker: that is damage).
_HEADER_JUNK = re.compile(r"extraneous bytes before marker 0x(?!d[0-9])[0-9a-f]{2}", re.IGNORECASE)


def _pillow_on_header_junk(data: bytes) -> list[ImageFinding]:
    """Pillow's answer for a JPEG with junk between its header segments, which libjpeg skips with a
    warning: Pillow's own parser skips some junk and refuses other (a segment length that runs
    into the next marker). Refused, the file is damage that a Pillow-based loader fails on; read,
    the warning stays information. Only such files pay for this second, reduced decode."""
    error = _pillow_jpeg_error(data)
    if error is None:
        return []
    detail = f"junk between the header segments, which libjpeg skips but Pillow refuses: {error}"
    return [ImageFinding("corrupt", detail)]


def _with_end_marker(findings: list[ImageFinding], data: bytes) -> list[ImageFinding]:
    """`findings`, and the missing end marker where nothing else found the file damaged (a decoder
    that saw the cut has said so already, in its own words)."""
    if any(f.kind == "corrupt" for f in findings):
        return findings
    return [*findings, *check_jpeg_end_marker(data)]


# A valid JPEG ends with its end-of-image marker (zeros may follow it), so a short run of zeros
# with no marker before it is already a file cut and zero-filled.
_JPEG_ZERO_FILL_BYTES = 16


def check_jpeg_zero_fill(data: bytes) -> list[ImageFinding]:
    """A JPEG whose scan data runs into a run of zero bytes at the end of the file, with no
    end-of-image marker after the first scan: cut and zero-filled. libjpeg decodes zeros as valid
    codes and, at 1/8 scale, never reaches the missing marker, so no decoder warns. A valid file
    padded with zeros after its EOI, or one whose scan data holds zeros, is left alone."""
    if data[-_JPEG_ZERO_FILL_BYTES:] != bytes(_JPEG_ZERO_FILL_BYTES):
        return []  # the common case, without copying the file
    run_start = len(data.rstrip(b"\x00"))
    scan = _first_jpeg_scan(data)
    if scan is None or run_start <= scan or data.rfind(b"\xff\xd9", scan, run_start) != -1:
        return []
    detail = (
        f"the image data ends in {len(data) - run_start:,} zero bytes with no end-of-image marker: "
        "the file was cut and zero-filled"
    )
    return [ImageFinding("corrupt", detail)]


_JPEG_TAIL = 4096


def check_jpeg_end_marker(data: bytes) -> list[ImageFinding]:
    """A JPEG with no end-of-image marker after its first scan: the file ends inside its image data
    (cut, or its tail overwritten). When the scan data is complete up to the cut, or stops at a
    stray marker, the 1/8-scale decode never reaches the end and no decoder warns; Pillow's full
    decode refuses the file. Valid files end with the marker, whatever padding follows it."""
    if len(data) > _JPEG_TAIL and data.rfind(b"\xff\xd9", len(data) - _JPEG_TAIL) != -1:
        return []  # the common case: the marker in the last 4 KiB, found without walking the headers
    scan = _first_jpeg_scan(data)
    if scan is None or data.rfind(b"\xff\xd9", scan) != -1:
        return []
    return [ImageFinding("corrupt", "no end-of-image marker after the image data: the file ends inside it")]


def _first_jpeg_scan(data: bytes) -> int | None:
    """Where the first scan's entropy-coded data begins, from a walk over the marker segments (an
    EXIF thumbnail, with its own markers, lies inside a segment and is skipped)."""
    pos = 2
    while pos + 4 <= len(data):
        if data[pos] != 0xFF:
            return None
        marker = data[pos + 1]
        if marker == 0xFF:  # fill bytes before a marker
            pos += 1
            continue
        length = int.from_bytes(data[pos + 2 : pos + 4], "big")
        if marker == 0xDA:
            return pos + 2 + length
        pos += 2 + length
    return None


def _opencv_decode(
    data: bytes, capture: StderrCapture, color: bool = False, side: int = 0
) -> tuple[Any, str]:
    import cv2
    import numpy as np

    # Grayscale output lets libjpeg skip the chroma IDCT and colour conversion; it still entropy-
    # decodes every component, which is where truncation and flipped bits show. Colour, at 1/8
    # scale, costs little more and is what the quality scores need.
    flags = _REDUCED_GREY[8] | cv2.IMREAD_IGNORE_ORIENTATION
    if color:
        factor = next((f for f in (8, 4, 2) if side // f >= _MIN_SCORED_SIDE), 1)
        flags = _REDUCED_COLOR[factor] | cv2.IMREAD_IGNORE_ORIENTATION
    with capture.capturing():
        try:
            pixels = cv2.imdecode(np.frombuffer(data, np.uint8), flags)
        except cv2.error:
            pixels = None
    return pixels, capture.text


# The most a JPEG is reduced for its scores: to no less than this shorter side (1/8 of a 500x375
# photo is 46 px; a 192 px thumbnail is decoded at 1/4).
_MIN_SCORED_SIDE = 32
# OpenCV's reduced-decode flags by factor (the values of cv2.IMREAD_REDUCED_*; 1 is IMREAD_COLOR).
_REDUCED_GREY = {8: 64}
_REDUCED_COLOR = {8: 65, 4: 33, 2: 17, 1: 1}


def _pillow_jpeg_error(data: bytes) -> str | None:
    from PIL import Image

    try:
        with Image.open(io.BytesIO(data)) as im:
            im.draft("L", (max(1, im.width // 8), max(1, im.height // 8)))
            im.load()
    except Exception as exc:  # per-file boundary
        return _message(exc)
    return None


@cache
def opencv_flags_truncation() -> bool:
    """Does this OpenCV refuse a truncated JPEG? 4.11+ does; 4.6 returns smeared pixels silently.

    Asked once per process on a tiny generated file; where it does not, Pillow decodes every JPEG too.
    """
    import cv2
    import numpy as np
    from PIL import Image

    buffer = io.BytesIO()
    gradient = np.add.outer(np.arange(64), np.arange(64)).astype(np.uint8)
    Image.fromarray(gradient).convert("RGB").save(buffer, "JPEG", quality=90)
    cut = buffer.getvalue()[: len(buffer.getvalue()) * 2 // 3]
    capture = StderrCapture()
    try:
        with capture.capturing():
            decoded = cv2.imdecode(np.frombuffer(cut, np.uint8), cv2.IMREAD_REDUCED_GRAYSCALE_8)
    finally:
        capture.close()
    return decoded is None


# libjpeg's warnings that mean the scan data itself is damaged (research §8.2): extraneous bytes
# before a restart or EOI marker (0xd0..0xd9), a data segment that ends early, a bad Huffman code.
# Extraneous bytes before a header marker are junk between segments, which Pillow's parser skips
# in some files and refuses in others: `jpeg_findings_and_pixels` asks Pillow about those.
_JPEG_DAMAGE = re.compile(
    r"extraneous bytes before marker 0xd[0-9]\b|premature end of (data segment|jpeg file)|"
    r"bad huffman code|huffman table 0x[0-9a-f]+ was not defined|corrupt jpeg data: found marker",
    re.IGNORECASE,
)


def classify_jpeg_messages(text: str) -> list[ImageFinding]:
    """Decoder text -> `corrupt` for damage in the scan data, `decoder_warning` for the rest."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    damage = [line for line in lines if _JPEG_DAMAGE.search(line)]
    other = [line for line in lines if line not in damage]
    findings = []
    if damage:
        findings.append(ImageFinding("corrupt", "libjpeg: " + _joined(damage)))
    if other:
        findings.append(ImageFinding("decoder_warning", "libjpeg: " + _joined(other)))
    return findings


# Native decoders' lines that are information about a valid file, not damage: libtiff's and
# libpng's warnings (a tag libtiff does not know, a chunk with an odd value). libtiff's
# "TIFF_SETGET_UNDEFINED and thus tag is not read" is a tag it skips, printed as an error.
_DECODER_INFO = re.compile(
    r"warning|unknown field with tag|tags are not sorted|incorrect count for field|bogus|ignoring|"
    r"ascii value for tag|sum of photometric|nonstandard tile|unknown tag|tiff_setget_undefined",
    re.IGNORECASE,
)


def classify_decoder_messages(decoder: str, text: str) -> list[ImageFinding]:
    """Native decoders' stderr (libtiff, libpng, libwebp...) sorted into damage, missing pieces and
    information: "WEBP compression support is not configured" is `unsupported`, a warning or an
    unknown tag is `decoder_warning`, and any other line ("Fax4Decode: Bad code word") is damage."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    missing = [line for line in lines if judge_failure(line, None).kind == UNSUPPORTED_KIND]
    info = [line for line in lines if line not in missing and _DECODER_INFO.search(line)]
    errors = [line for line in lines if line not in missing and line not in info]
    findings = []
    if errors:
        findings.append(ImageFinding("corrupt", f"{decoder}: " + _joined(errors)))
    if missing:
        findings.append(judge_failure(missing[0], None))
    if info:
        findings.append(ImageFinding("decoder_warning", f"{decoder}: " + _joined(info)))
    return findings


# Lines a native decoder writes, told apart from whatever else a dataset's code prints: libjpeg's
# warnings (jerror.h's JWRN_* texts, which it prints without a prefix), libpng's prefixed lines and
# libtiff's "<function>: <message>" lines from its TIFF* functions and codecs.
_LIBJPEG_LINE = re.compile(
    r"^(corrupt jpeg data: |premature end of jpeg file|invalid sos parameters for sequential jpeg|"
    r"inconsistent progression sequence for component|unknown adobe color transform code|"
    r"warning: unknown jfif revision number|application transferred too (many|few) scanlines|"
    r"huffman table 0x[0-9a-f]+ was not defined)",
    re.IGNORECASE,
)
_LIBPNG_LINE = re.compile(r"^libpng (warning|error): ", re.IGNORECASE)
_LIBTIFF_LINE = re.compile(r"^_?(TIFF\w*|\w+(Decode|PreDecode|Setup\w*|DecodeRow|DecodeStrip|DecodeTile)): ")


def judged_fields_facts(
    info: dict[str, Any], judged: Sequence[tuple[str, ImageProbe]], word: str = "field"
) -> tuple[dict[str, Any], list[dict[str, str]]]:
    """A sample's info and findings from its judged image fields (a Hugging Face row's `Image()`
    columns, a LitData sample's image fields): the first field's facts are the sample's (the
    policy's quality and size checks read them), the others' are kept under their field's name; a
    finding names its field when there are several."""
    findings: list[dict[str, str]] = []
    for number, (name, probe) in enumerate(judged):
        if number == 0:
            info.update(probe.info())
        else:
            info.setdefault("columns", {})[name] = probe.info()
        where = f"{word} {name!r}: " if len(judged) > 1 else ""
        findings.extend({"kind": f.kind, "detail": where + f.detail} for f in probe.findings)
    return info, findings


def classify_native_stderr(text: str) -> list[ImageFinding]:
    """A dataset sample's captured stderr, judged as the image scan judges a decode's: only the lines
    libjpeg, libpng and libtiff wrote count (anything else the dataset printed is its own business)."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    jpeg = [line for line in lines if _LIBJPEG_LINE.match(line)]
    png = [line for line in lines if _LIBPNG_LINE.match(line)]
    tiff = [line for line in lines if _LIBTIFF_LINE.match(line)]
    return [
        *(classify_jpeg_messages("\n".join(jpeg)) if jpeg else ()),
        *(classify_decoder_messages("libpng", "\n".join(png)) if png else ()),
        *(classify_decoder_messages("libtiff", "\n".join(tiff)) if tiff else ()),
    ]


def _joined(lines: list[str], limit: int = 3) -> str:
    unique = list(dict.fromkeys(lines))
    more = f" (+{len(unique) - limit} more)" if len(unique) > limit else ""
    return "; ".join(unique[:limit]) + more


def check_with_pillow(im: Image.Image, capture: StderrCapture) -> list[ImageFinding]:
    """Pillow's full decode of the current frame, with native decoders' stderr captured.

    A failure is judged (`corrupt`, or `unsupported` when it names something this installation
    lacks); Pillow's own Python warnings ("Tag data larger than file") are information.
    """
    error: str | None = None
    with capture.capturing(), warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        try:
            im.load()
        except Exception as exc:  # per-file boundary
            error = _message(exc)
    findings = classify_decoder_messages(im.format or "decoder", capture.text)
    if error is not None:
        stderr_names_missing_piece = any(f.kind == UNSUPPORTED_KIND for f in findings)
        if not stderr_names_missing_piece:
            findings.insert(0, judge_failure(error, im.format))
    pillow_warnings = [str(w.message).strip() for w in said if not issubclass(w.category, DeprecationWarning)]
    if pillow_warnings and not any(f.kind in _DECIDED for f in findings):
        findings.append(ImageFinding("decoder_warning", "Pillow: " + _joined(pillow_warnings)))
    return findings


def _frame_facts(
    im: Image.Image, options: ImageOptions, capture: StderrCapture
) -> tuple[int, list[ImageFinding]]:
    """1 or 2 ("more than one") frames; with `all_frames`, decode the others too."""
    try:
        animated = bool(getattr(im, "is_animated", False))
    except Exception as exc:  # reading past frame 1 of a damaged file: its structure is broken there
        return 2, [ImageFinding("corrupt", f"the file breaks after the first frame: {_message(exc)}")]
    if not animated:
        return 1, []
    if not options.all_frames:
        return 2, [ImageFinding("multi_frame", "several frames or pages; only the first was decoded")]
    return 2, [
        ImageFinding("multi_frame", "several frames or pages; all decoded"),
        *_later_frames(im, capture),
    ]


def _later_frames(im: Image.Image, capture: StderrCapture) -> list[ImageFinding]:
    frame = 1
    while True:
        try:
            im.seek(frame)
        except EOFError:
            return []
        except Exception as exc:  # per-file boundary
            return [_later_frame_refusal(exc, im.format, frame + 1)]
        damage = check_with_pillow(im, capture)
        if any(f.kind == "corrupt" for f in damage):
            return [ImageFinding(f.kind, f"frame {frame + 1}: {f.detail}") for f in damage]
        frame += 1


def _later_frame_refusal(exc: Exception, fmt: str | None, frame: int) -> ImageFinding:
    """Why Pillow cannot reach a later frame: damage, or, for a TIFF page in a registered
    compression Pillow lacks (its plugin fails on the lookup, `KeyError: 32896`), unsupported."""
    codec = exc.args[0] if fmt == "TIFF" and isinstance(exc, KeyError) and exc.args else None
    if isinstance(codec, int) and codec in _TIFF_CODECS_PILLOW_LACKS:
        detail = f"page {frame}: {_TIFF_CODECS_PILLOW_LACKS[codec]}, which this Pillow does not decode"
        return ImageFinding(UNSUPPORTED_KIND, detail)
    judged = judge_failure(_message(exc), fmt)
    return ImageFinding(judged.kind, f"frame {frame}: {judged.detail}")


# --------------------------------------------------------------------------- who else reads it


def _judged_refusals(
    findings: list[ImageFinding], fmt: str, data: bytes, capture: StderrCapture
) -> list[ImageFinding]:
    """`findings` with Pillow's refusal (the first `corrupt` or `unsupported`) judged again by
    `judge_pillow_refusal`; the rest as they were. Damage a native decoder printed while Pillow
    loaded the file ("TIFF: Fax3Decode: ...") is no refusal: it stands."""
    for i, finding in enumerate(findings):
        if finding.kind in _DECIDED:
            if finding.detail.startswith(f"{fmt}: "):
                return findings
            return [*findings[:i], judge_pillow_refusal(finding, fmt, data, capture), *findings[i + 1 :]]
    return findings


def judge_pillow_refusal(
    finding: ImageFinding, fmt: str, data: bytes, capture: StderrCapture
) -> ImageFinding:
    """Pillow cannot load the file: a loader built on it fails, so it is quarantined either way.
    Whether it is damaged is decided by evidence, and the detail says which decoders read it:

    - a header that contradicts itself or the file's size (`header_fault`) is damage, whatever a
      lenient decoder makes of it;
    - a file OpenCV decodes whole, with no word of damage from its native decoder, is a structure
      Pillow's reader does not accept: `unsupported`, with Pillow's words and OpenCV named;
    - a structure read whole from the file's own bytes where no other decoder here has a reader
      for the variant (a Netpbm comment right after the magic number) is `unsupported` too;
    - else Pillow's own judgement stands (a missing piece named, or damage), and the detail adds
      that no other decoder here reads the file. A JPEG is left as judged: OpenCV's libjpeg reads
      through damage there, and the JPEG path has judged its warnings already.
    """
    fault = header_fault(fmt, data)
    if fault is not None:
        return ImageFinding("corrupt", f"{fault} [Pillow: {finding.detail}]")
    if finding.kind == "corrupt" and _SETTLED.search(finding.detail):
        return finding  # a value no valid file holds, or a safety limit a hostile file trips
    if fmt in _NO_SECOND_READER:
        return finding
    readable = _declared_pixels(fmt, data) <= DEFAULT_MAX_PIXELS and opencv_reads_cleanly(data, capture)
    sound = None if readable else _SOUND_STRUCTURES.get(fmt, lambda _: None)(data)
    if sound is not None and finding.kind == "corrupt":
        return ImageFinding(
            UNSUPPORTED_KIND,
            f"Pillow cannot load it ({finding.detail}), so a Pillow-based loader fails on it; {sound}",
        )
    if finding.kind == UNSUPPORTED_KIND:
        others = "OpenCV reads it" if readable else "no other decoder here reads it"
        return ImageFinding(UNSUPPORTED_KIND, f"{finding.detail}; {others}")
    if not readable:
        return ImageFinding("corrupt", f"{finding.detail} (no other decoder here reads it either)")
    return ImageFinding(
        UNSUPPORTED_KIND,
        f"Pillow cannot load it ({finding.detail}), so a Pillow-based loader fails on it; "
        f"OpenCV decodes it whole: a {fmt} structure Pillow's reader does not accept",
    )


# Formats whose damage OpenCV reads through without a word, so its decode is no evidence of a sound
# file: JPEG (libjpeg fills a cut scan with grey; the JPEG path judges from its warnings already).
_NO_SECOND_READER = frozenset({"JPEG", "MPO"})

# Refusals already decided by evidence: a value no valid file holds (`judge_failure`), a layout
# fault read from the file, Pillow's limits on what a chunk may inflate to.
_SETTLED = re.compile(r"no valid file holds|decompressed data too large", re.IGNORECASE)

# Words in a native decoder's or OpenCV's own log lines that mean the data is not whole.
_DAMAGE_WORDS = re.compile(
    r"corrupt|premature|truncat|invalid|not enough|unexpected|too short|bad |overrun|error|exceed|"
    r"fail|broken|missing|cannot|can't",
    re.IGNORECASE,
)


def _declared_pixels(fmt: str, data: bytes) -> int:
    """The pixel count a TIFF's first directory declares (0 for other formats): Pillow never opened
    the file, so its bomb check never ran, and OpenCV would allocate what the header says."""
    tags = tiff_first_tags(data) if fmt == "TIFF" else None
    return _first(tags, 256, 0) * _first(tags, 257, 0) if tags else 0


def opencv_reads_cleanly(data: bytes, capture: StderrCapture) -> bool:
    """Whether OpenCV decodes the file and neither it nor the native decoder under it says a word
    of damage (a libjpeg "Premature end of JPEG file" comes with pixels)."""
    import cv2
    import numpy as np

    with capture.capturing():
        try:
            decoded = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_UNCHANGED) is not None
        except cv2.error:  # its size checks raise rather than return None
            decoded = False
    lines = [line for line in capture.text.splitlines() if line.strip()]
    return decoded and not any(_DAMAGE_WORDS.search(line) for line in lines)


def header_fault(fmt: str, data: bytes) -> str | None:
    """A header that contradicts itself or the file's size, for the formats whose refusals Pillow
    words as a missing feature (an unknown colour-map depth, a bit-field layout); None if sound."""
    check = _HEADER_FAULTS.get(fmt)
    return None if check is None else check(data)


_TGA_MAP_DEPTHS = frozenset({8, 15, 16, 24, 32})  # 8: rare, but written (Pillow's tests hold one)


def tga_header_fault(data: bytes) -> str | None:
    """A TGA header the file contradicts: a colour map declared but absent or cut, a colour-mapped
    image with no map, or fewer bytes than an uncompressed image's pixels need."""
    if len(data) < 18:
        return f"a TGA of {len(data)} bytes: shorter than its 18-byte header"
    map_type, image_type, depth = data[1], data[2], data[16]
    map_length, map_depth = int.from_bytes(data[5:7], "little"), data[7]
    if map_type not in (0, 1):
        return f"TGA colour-map type {map_type} (0 or 1 in a valid file)"
    if image_type in (1, 9) and map_type != 1:
        return f"a colour-mapped TGA (image type {image_type}) with no colour map"
    map_bytes = map_length * -(-map_depth // 8) if map_type == 1 else 0
    if map_type == 1 and map_length and map_depth not in _TGA_MAP_DEPTHS:
        return f"TGA colour-map entries of {map_depth} bits (8, 15, 16, 24 or 32 in a valid file)"
    pixels_at = 18 + data[0] + map_bytes
    if pixels_at > len(data):
        return (
            f"the TGA header declares a {data[0]}-byte ID and a colour map of {map_bytes:,} bytes, "
            f"but the file holds {len(data) - 18:,} bytes after its header"
        )
    if image_type in (1, 2, 3):
        needed = _tga_pixel_count(data) * -(-depth // 8)
        if pixels_at + needed > len(data):
            held = len(data) - pixels_at
            return f"the TGA header promises {needed:,} bytes of pixels; the file holds {held:,}"
    return None


def bmp_header_fault(data: bytes) -> str | None:
    """A BMP header the file contradicts: pixel data said to start past the end of the file, more
    than a row fewer bytes than an uncompressed image's rows need, run-length data that overruns
    the image or ends before its end-of-bitmap code."""
    if len(data) < 26:
        return f"a BMP of {len(data)} bytes: shorter than its headers"
    offset, header = int.from_bytes(data[10:14], "little"), int.from_bytes(data[14:18], "little")
    if offset > len(data):
        return f"BMP pixel data said to start at byte {offset:,}, past the file's end ({len(data):,} bytes)"
    if header < 40 or len(data) < 34:
        return None  # an OS/2 header: its sizes are 16-bit fields, left to the decoders
    width = int.from_bytes(data[18:22], "little", signed=True)
    height = abs(int.from_bytes(data[22:26], "little", signed=True))
    bits, compression = int.from_bytes(data[28:30], "little"), int.from_bytes(data[30:34], "little")
    if compression in (1, 2):
        return bmp_rle_fault(data, compression, cut=True)
    if compression not in (0, 3, 6) or width <= 0 or not 0 < bits <= 64:
        return None
    row = (width * bits + 31) // 32 * 4
    if len(data) - offset < row * (height - 1):
        return (
            f"the BMP header promises {row * height:,} bytes of pixels from byte {offset:,}; "
            f"the file holds {len(data) - offset:,}"
        )
    return None


_JP2_SIGNATURE = b"\x00\x00\x00\x0cjP  \r\n\x87\n"
_JP2_SUPERBOXES = frozenset({b"jp2h", b"res "})  # the boxes of boxes a reader walks for the header


def jp2_header_fault(data: bytes) -> str | None:
    """A JP2 box whose length contradicts the file: shorter than its own header, or running past
    the end (a cut file); the boxes inside the header box likewise. OpenJPEG reads on through such
    boxes, so OpenCV decoding the codestream is no evidence of a sound file."""
    if not data.startswith(_JP2_SIGNATURE):
        return None  # a bare codestream: its markers are OpenJPEG's to judge
    return _jp2_boxes_fault(data, 0, len(data), outer=True)


def _jp2_boxes_fault(data: bytes, pos: int, end: int, outer: bool) -> str | None:
    while pos < end:
        if pos + 8 > end:
            return f"the file ends inside a JP2 box header at byte {pos:,}"
        length, name, head = int.from_bytes(data[pos : pos + 4], "big"), data[pos + 4 : pos + 8], 8
        if length == 1 and pos + 16 <= end:
            length, head = int.from_bytes(data[pos + 8 : pos + 16], "big"), 16
        elif length == 0 and outer:
            return None  # the last box runs to the end of the file
        shown = name.decode("latin-1")
        if length < head:
            return f"JP2 box '{shown}' at byte {pos:,} declares {length} bytes, less than its own header"
        if pos + length > end:
            return f"JP2 box '{shown}' at byte {pos:,} declares {length:,} bytes; {end - pos:,} are left"
        if name in _JP2_SUPERBOXES:
            inner = _jp2_boxes_fault(data, pos + head, pos + length, outer=False)
            if inner is not None:
                return inner
        pos += length
    return None


_NETPBM_FIELDS = {b"1": 2, b"2": 3, b"3": 3, b"4": 2, b"5": 3, b"6": 3}  # width, height (, maxval)
_NETPBM_CHANNELS = {b"5": 1, b"6": 3}


def netpbm_layout(data: bytes) -> tuple[int, int] | None:
    """(bytes the raster needs, where it starts) of a binary Netpbm file (P4, P5, P6), read as the
    Netpbm format defines it: comments from `#` to the end of a line anywhere in the header, even
    right after the magic number; (0, start) for the plain-text kinds; None if the header does not
    parse."""
    kind = data[1:2]
    if data[:1] != b"P" or kind not in _NETPBM_FIELDS:
        return None
    fields: list[int] = []
    pos = 2
    while len(fields) < _NETPBM_FIELDS[kind]:
        pos = _past_netpbm_blanks(data, pos)
        end = pos
        while end < len(data) and data[end : end + 1].isdigit():
            end += 1
        if end == pos or end - pos > 9:
            return None
        fields.append(int(data[pos:end]))
        pos = end
    if pos >= len(data) or not data[pos : pos + 1].isspace():
        return None
    width, height = fields[0], fields[1]
    if kind == b"4":
        return (width + 7) // 8 * height, pos + 1
    if kind in _NETPBM_CHANNELS:
        sample = 2 if fields[2] > 255 else 1
        return width * height * _NETPBM_CHANNELS[kind] * sample, pos + 1
    return 0, pos + 1


def _past_netpbm_blanks(data: bytes, pos: int) -> int:
    """Past whitespace and `#` comments (to the end of their line)."""
    while pos < len(data):
        if data[pos] == 0x23:
            pos = data.find(b"\n", pos) + 1 or len(data)
        elif data[pos : pos + 1].isspace():
            pos += 1
        else:
            break
    return pos


def netpbm_header_fault(data: bytes) -> str | None:
    layout = netpbm_layout(data)
    if layout is None or len(data) - layout[1] >= layout[0]:
        return None
    return (
        f"the Netpbm header promises {layout[0]:,} bytes of raster; the file holds {len(data) - layout[1]:,}"
    )


def netpbm_sound(data: bytes) -> str | None:
    """Why a Netpbm file Pillow refuses is sound: its header parses as the format allows and its
    raster is whole (Pillow's reader wants whitespace right after the magic number)."""
    layout = netpbm_layout(data)
    if layout is None or len(data) - layout[1] < layout[0]:
        return None
    return "its Netpbm header (comments allowed anywhere, even after the magic number) and raster are whole"


_HEADER_FAULTS: dict[str, Callable[[bytes], str | None]] = {
    "TGA": tga_header_fault, "BMP": bmp_header_fault, "JPEG2000": jp2_header_fault,
    "PPM": netpbm_header_fault,
}  # fmt: skip
# Structures read whole from the file's bytes: a refusal of such a file is Pillow's limit.
_SOUND_STRUCTURES: dict[str, Callable[[bytes], str | None]] = {"PPM": netpbm_sound}


# --------------------------------------------------------------------------- PNG


_PNG_CHANNELS: dict[int, int] = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}  # by IHDR colour type
_PNG_DEPTHS: dict[int, frozenset[int]] = {
    0: frozenset({1, 2, 4, 8, 16}), 2: frozenset({8, 16}), 3: frozenset({1, 2, 4, 8}),
    4: frozenset({8, 16}), 6: frozenset({8, 16}),
}  # fmt: skip
_ADAM7 = ((0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2))


class _PngDamage(Exception):
    """One-line description of what is wrong in a PNG's chunk structure or image data."""


def check_png(data: bytes) -> list[ImageFinding]:
    """Every chunk's CRC, IHDR's values, the IDAT zlib stream inflated and checked against IHDR's
    size, and an animated PNG's control chunks (the frames a decoder would trip on)."""
    return check_png_keeping_pixels(data, keep=False)[0]


def check_png_keeping_pixels(
    data: bytes, keep: bool = True
) -> tuple[list[ImageFinding], bytes | Image.Image | None]:
    """`check_png`'s findings and, with `keep`, the pixels for the scores: the same PNG with its
    image data stored rather than compressed (`_StoredIdat`), which Pillow decodes to the very
    pixels of the original while skipping the inflate the check has just done, or the image itself
    where the palette check decoded it already. None when the file is damaged or its image data is
    past `_KEEP_LIMIT`."""
    try:
        apng, rebuilt, palette = _walk_png(data, keep)
    except _PngDamage as exc:
        return [ImageFinding("corrupt", str(exc))], None
    findings = apng.findings()
    if any(f.kind == "corrupt" for f in findings):
        return findings, None
    if not palette.short():
        return findings, rebuilt
    overrun, decoded = palette_index_overrun(rebuilt or data, palette.entries)
    return [*findings, *overrun], None if overrun else decoded if keep else None


def palette_index_overrun(png: bytes, entries: int) -> tuple[list[ImageFinding], Image.Image]:
    """A palette image whose pixels use an index past its PLTE's last colour: an error by the PNG
    spec, which libpng reports ("palette index exceeding num_palette") and Pillow and OpenCV decode
    without a word, as black or as whatever the palette table held. Decoded by Pillow, only for the
    palette images whose PLTE has fewer colours than the bit depth can address
    (`_PaletteRules.short`); the decoded image is returned for the scores, which would decode it
    again otherwise."""
    from PIL import Image

    im = Image.open(io.BytesIO(png))
    im.load()
    extrema: Any = im.getextrema()  # (lowest, highest) index for a palette image
    highest = int(extrema[1]) if im.mode == "P" else -1
    if highest < entries:
        return [], im
    detail = f"palette index {highest} used, but the PLTE chunk holds only {entries} colours"
    return [ImageFinding("corrupt", detail)], im


def _walk_png(data: bytes, keep: bool = False) -> tuple[_ApngChunks, bytes | None, _PaletteRules]:
    inflater: _IdatInflater | None = None
    apng, palette = _ApngChunks(), _PaletteRules()
    pos, idat = 8, _IdatSpan()
    while True:
        chunk_start = pos
        chunk_type, body, pos = _next_png_chunk(data, pos)
        idat.see(chunk_type, chunk_start, pos)
        if chunk_type == b"IHDR":
            if inflater is not None:
                raise _PngDamage(f"a second IHDR chunk at byte {chunk_start:,}")
            layout = _PngLayout.from_ihdr(body)
            stored = _StoredIdat() if keep and layout.size <= _KEEP_LIMIT else None
            inflater = _IdatInflater(layout, stored)
            palette.colour, palette.depth = body[9], body[8]
        elif chunk_type == b"PLTE":
            palette.see(body, chunk_start)
        elif chunk_type == b"IDAT":
            if inflater is None:
                raise _PngDamage("IDAT before IHDR: the chunk order is broken")
            if idat.span is None:  # libpng stops ("Too many IDATs"); Pillow's load() reads no further
                raise _PngDamage(
                    f"IDAT chunks apart: another chunk comes between them, before byte {chunk_start:,}"
                )
            palette.before_image_data()
            inflater.feed(body)
        elif chunk_type == b"IEND":
            break
        elif chunk_type[:1].isupper() and chunk_type not in _PNG_KNOWN_CRITICAL:
            # A critical chunk a decoder does not know must stop it (PNG spec 5.4).
            raise _PngDamage(f"unknown critical chunk {_chunk_name(chunk_type)} at byte {chunk_start:,}")
        apng.see(chunk_type, body, chunk_start)
    if inflater is None:
        raise _PngDamage("no IHDR chunk")
    inflater.finish()
    apng.finish()
    stored = inflater.stored
    rebuilt = None if stored is None or idat.span is None else stored.png(data, *idat.span)
    return apng, rebuilt, palette


class _PaletteRules:
    """What libpng, the reference decoder, stops on in a PNG's PLTE chunk, though Pillow reads on:
    a second PLTE, an empty one, and for a palette image (colour type 3) a missing one (none before
    the image data) or one whose length is no whole number of colours up to 256. A suggested palette
    of another colour type that is merely too long, or comes after the image data, is skipped with
    a warning, so it is left alone.
    """

    def __init__(self) -> None:
        self.colour: int | None = None
        self.depth = 8
        self.entries = 0
        self._seen = False

    def see(self, body: bytes, at: int) -> None:
        if self._seen:
            raise _PngDamage(f"a second PLTE chunk at byte {at:,} (a PNG has at most one)")
        self._seen = True
        self.entries = len(body) // 3
        if not body:
            raise _PngDamage(f"empty PLTE chunk at byte {at:,}: a palette of no colours")
        if self.colour == 3 and (len(body) % 3 or len(body) > 3 * 256):
            raise _PngDamage(f"PLTE chunk of {len(body):,} bytes: no whole number of colours up to 256")

    def short(self) -> bool:
        """A palette image whose PLTE has fewer colours than its pixels can address: only then can
        a pixel's index fall past the palette."""
        return self.colour == 3 and 0 < self.entries < 1 << self.depth

    def before_image_data(self) -> None:
        if self.colour == 3 and not self._seen:
            raise _PngDamage("a palette image (colour type 3) with no PLTE chunk before its image data")


class _IdatSpan:
    """Where the IDAT chunks are: (first byte, end) when they follow each other, as the format wants
    (None once they are apart, which the walk reports as damage)."""

    def __init__(self) -> None:
        self.span: tuple[int, int] | None = None
        self._state = "before"  # before -> in -> after (-> broken: IDAT chunks apart)

    def see(self, chunk_type: bytes, start: int, end: int) -> None:
        if chunk_type != b"IDAT":
            self._state = "after" if self._state == "in" else self._state
        elif self._state == "before":
            self.span, self._state = (start, end), "in"
        elif self._state == "in" and self.span is not None:
            self.span = (self.span[0], end)
        else:
            self.span, self._state = None, "broken"


class _StoredIdat:
    """The inflated image data, written back as one IDAT chunk of stored (uncompressed) deflate
    blocks as it streams out of the check's inflate.

    Pillow's own decode of a PNG is mostly its inflate (zlib, slower than the check's ISA-L): given
    the stored copy it only copies and unfilters, about a third of the cost, to the same pixels.
    """

    def __init__(self) -> None:
        self._zlib = inflate_module()
        self._parts: list[bytes | memoryview] = [b"\x78\x01"]  # a zlib header: deflate, 32K window
        self._adler = 1

    def add(self, piece: bytes) -> None:
        self._adler = self._zlib.adler32(piece, self._adler)
        view = memoryview(piece)
        for start in range(0, len(piece), 0xFFFF):
            block = view[start : start + 0xFFFF]
            size = len(block)  # a block header: not final, stored, then LEN and its complement
            header = b"\x00" + size.to_bytes(2, "little") + (size ^ 0xFFFF).to_bytes(2, "little")
            self._parts += [header, block]

    def png(self, data: bytes, first: int, end: int) -> bytes:
        """`data` with the IDAT chunks at data[first:end] replaced by the stored copy."""
        stream = [*self._parts, b"\x01\x00\x00\xff\xff", self._adler.to_bytes(4, "big")]  # final block
        crc = self._zlib.crc32(b"IDAT")
        for part in stream:
            crc = self._zlib.crc32(part, crc)
        length = sum(len(part) for part in stream)
        head = length.to_bytes(4, "big") + b"IDAT"
        return b"".join([data[:first], head, *stream, crc.to_bytes(4, "big"), data[end:]])


# The most inflated image data kept for the scores (a 4,600 x 4,600 RGB image): past it a PNG is
# decoded a second time for them, as a worker would otherwise hold it twice over (the inflated
# pieces and the rebuilt file) on top of the pixels.
_KEEP_LIMIT = 64 << 20


_PNG_KNOWN_CRITICAL = frozenset({b"IHDR", b"PLTE", b"IDAT", b"IEND"})


class _ApngChunks:
    """The animation chunks of an APNG (acTL, fcTL, fdAT), checked as a decoder reads them.

    An APNG whose acTL is absent, repeated, after the image data or announces no frames is shown by
    decoders as a still PNG: information. Once the animation is valid, a frame-data chunk without
    its frame-control chunk, a frame with no data, sequence numbers out of order or fewer frames
    than acTL announces are damage: Pillow refuses such a file when it reaches that frame. The
    chunks are judged at IEND, when acTL's validity is known (an fcTL may come before acTL).
    """

    def __init__(self) -> None:
        self.announced: int | None = None  # acTL's frame count, None before (or without) acTL
        self.ignored: list[str] = []  # why decoders show the still image instead
        self.damage: str | None = None
        self._idat_seen = False
        self._events: list[tuple[bytes, int, int]] = []  # (IDAT/fcTL/fdAT, sequence number, byte)

    def see(self, chunk_type: bytes, body: bytes, at: int) -> None:
        if chunk_type == b"IDAT":
            if not self._idat_seen:
                self._events.append((chunk_type, -1, at))
            self._idat_seen = True
        elif chunk_type == b"acTL":
            self._see_actl(body)
        elif chunk_type in (b"fcTL", b"fdAT"):
            self._events.append((chunk_type, int.from_bytes(body[:4], "big") if len(body) >= 4 else -1, at))

    def _see_actl(self, body: bytes) -> None:
        frames = int.from_bytes(body[:4], "big") if len(body) >= 4 else 0
        if self.announced is not None:
            self.ignored.append("two acTL chunks")
        elif self._idat_seen:
            self.ignored.append("acTL after the image data")
        elif not 0 < frames < 2**31:
            self.ignored.append(f"acTL announces {frames:,} frames")
        self.announced = frames

    def finish(self) -> None:
        if self.announced is None or self.ignored:
            return
        self.damage = self._first_damage()

    def _first_damage(self) -> str | None:
        sequence, frames, frame_has_data = 0, 0, True
        no_data = "APNG frame {} has a frame-control chunk (fcTL) but no image data"
        for chunk_type, number, at in self._events:
            if chunk_type == b"IDAT":
                frame_has_data = frame_has_data or frames == 1  # IDAT is frame 1's data after its fcTL
                continue
            name = chunk_type.decode()
            if number != sequence:
                return f"APNG {name} at byte {at:,} has sequence number {number}, {sequence} expected"
            sequence += 1
            if chunk_type == b"fcTL":
                if frames and not frame_has_data:
                    return no_data.format(frames)
                frames, frame_has_data = frames + 1, False
            elif not frames:
                return f"APNG frame data (fdAT) at byte {at:,} without a frame-control chunk (fcTL) before it"
            else:
                frame_has_data = True
        if frames and not frame_has_data:
            return no_data.format(frames)
        if self.announced is not None and frames < self.announced:
            return f"acTL announces {self.announced:,} frames, the file has {frames}"
        return None

    def findings(self) -> list[ImageFinding]:
        if self.damage is not None:
            return [ImageFinding("corrupt", self.damage)]
        if self.ignored:
            reason = "; ".join(self.ignored)
            return [
                ImageFinding("decoder_warning", f"invalid APNG ({reason}): decoders show the still image")
            ]
        return []


def _next_png_chunk(data: bytes, pos: int) -> tuple[bytes, bytes, int]:
    if pos + 8 > len(data):
        raise _PngDamage(f"PNG cut: the file ends at byte {len(data):,} before the IEND chunk")
    length = int.from_bytes(data[pos : pos + 4], "big")
    chunk_type = data[pos + 4 : pos + 8]
    end = pos + 8 + length
    if end + 4 > len(data):
        raise _PngDamage(
            f"PNG cut: chunk {_chunk_name(chunk_type)} at byte {pos:,} needs {length + 12:,} bytes, "
            f"the file ends {len(data) - pos:,} bytes later"
        )
    body = data[pos + 8 : end]
    if zlib.crc32(body, zlib.crc32(chunk_type)) != int.from_bytes(data[end : end + 4], "big"):
        raise _PngDamage(
            f"bad CRC in {_chunk_name(chunk_type)} chunk at byte {pos:,}: its bytes were altered"
        )
    return chunk_type, body, end + 4


def _chunk_name(chunk_type: bytes) -> str:
    return chunk_type.decode("latin-1") if chunk_type.isalpha() else repr(chunk_type)


@dataclass(frozen=True)
class _PngLayout:
    """Where the filter bytes sit in the inflated image data: one per row, rows per Adam7 pass."""

    rows: tuple[tuple[int, int], ...] = field(default=())  # (row count, bytes per row incl. filter byte)

    @property
    def size(self) -> int:
        return sum(count * stride for count, stride in self.rows)

    def passes(self) -> tuple[tuple[int, int, int], ...]:
        """(offset of the first row, row count, bytes per row) of each pass in the inflated data."""
        offsets, start = [], 0
        for count, stride in self.rows:
            offsets.append((start, count, stride))
            start += count * stride
        return tuple(offsets)

    @staticmethod
    def from_ihdr(body: bytes) -> _PngLayout:
        if len(body) != 13:
            raise _PngDamage(f"IHDR chunk has {len(body)} bytes, not 13")
        width, height = int.from_bytes(body[0:4], "big"), int.from_bytes(body[4:8], "big")
        depth, colour, interlace = body[8], body[9], body[12]
        if colour not in _PNG_CHANNELS:
            raise _PngDamage(f"IHDR colour type {colour} does not exist")
        if depth not in _PNG_DEPTHS[colour]:
            raise _PngDamage(f"IHDR bit depth {depth} is not allowed with colour type {colour}")
        if not (width and height) or body[10] != 0 or body[11] != 0 or interlace > 1:
            raise _PngDamage(
                f"IHDR values no PNG may hold: {width}x{height}, compression {body[10]}, "
                f"filter {body[11]}, interlace {interlace}"
            )
        bits = depth * _PNG_CHANNELS[colour]
        if interlace == 0:
            return _PngLayout(((height, 1 + (width * bits + 7) // 8),))
        passes = []
        for x0, y0, dx, dy in _ADAM7:
            pass_w, pass_h = max(0, -(-(width - x0) // dx)), max(0, -(-(height - y0) // dy))
            if pass_w and pass_h:
                passes.append((pass_h, 1 + (pass_w * bits + 7) // 8))
        return _PngLayout(tuple(passes))


@cache
def inflate_module() -> Any:
    """ISA-L's zlib-compatible inflate where the `isal` package is installed, else zlib.

    Inflating is most of a PNG's cost; ISA-L does it 1.6-1.8x faster, with the same checks
    (the Adler-32 at the end of the stream included).
    """
    try:
        from isal import isal_zlib
    except ImportError:
        return zlib
    return isal_zlib


class _IdatInflater:
    """Inflates IDAT data piece by piece, checking each row's filter byte as it streams by.

    Memory stays at one piece whatever the image size, and the output is capped at the size IHDR
    promises, so a zlib bomb behind a small header costs nothing.
    """

    def __init__(self, layout: _PngLayout, stored: _StoredIdat | None = None) -> None:
        self._size = layout.size
        self._passes = layout.passes()
        self._zlib = inflate_module()
        self._inflate = self._zlib.decompressobj()
        self._produced = 0
        self.stored = stored  # where the inflated data also goes, for the scores

    def feed(self, body: bytes) -> None:
        pending = body
        while pending and not self._inflate.eof:  # data after the stream's end: decoders ignore it
            try:
                piece = self._inflate.decompress(pending, _INFLATE_PIECE)
            except self._zlib.error as exc:
                raise _PngDamage(f"broken zlib stream in the image data: {exc}") from None
            self._check_filter_bytes(piece)
            self._produced += len(piece)
            if self._produced > self._size:
                raise _PngDamage(f"more image data than IHDR's size allows ({self._size:,} bytes)")
            if self.stored is not None:
                self.stored.add(piece)
            pending = self._inflate.unconsumed_tail

    def finish(self) -> None:
        if self._produced < self._size:
            state = "the zlib stream ends" if self._inflate.eof else "the IDAT chunks end"
            raise _PngDamage(
                f"image data too short: {state} after {self._produced:,} of {self._size:,} bytes"
            )

    def _check_filter_bytes(self, piece: bytes) -> None:
        low, high = self._produced, self._produced + len(piece)
        for number, (start, count, stride) in enumerate(self._passes):
            first = max(start, start + -(-(low - start) // stride) * stride)
            last = min(high, start + count * stride)
            filters = piece[first - low : last - low : stride] if first < last else b""
            if filters and max(filters) > 4:
                at = next(i for i, value in enumerate(filters) if value > 4)
                row = (first - start) // stride + at
                where = (
                    f"row {row}" if len(self._passes) == 1 else f"row {row} of interlace pass {number + 1}"
                )
                raise _PngDamage(f"{where}: filter type {filters[at]} does not exist (damaged image data)")


_INFLATE_PIECE = 1 << 20


# --------------------------------------------------------------------------- sources for the engine


class ImageFilesSource:
    """Image files as a source for the scan engine: a folder, a list of paths, or a dataset's files.

    Description options: `root` (absolute folder that relative paths, and a folder's keys, are
    relative to), `file_list` (a text file of paths instead of walking the folder), `files` (the
    paths themselves, scanned exactly as given: the pre-commit hook's staged files), `dataset` (a
    dataset spec whose `samples` / `imgs` name the files; each sample is then measured too),
    `extensions`, `max_pixels`, `all_frames`, `labels`. The engine forks its workers from the
    process that built the source, so the folder is walked once.
    """

    def __init__(self, description: Any, listing: ImageListing | None = None) -> None:
        self.description = description
        self.root = Path(description.option("root", description.spec))
        self.options = ImageOptions(
            max_pixels=int(description.option("max_pixels", DEFAULT_MAX_PIXELS)),
            all_frames=bool(description.option("all_frames", False)),
            quality=bool(description.option("scores", True)),
        )
        self.dataset: Any = None
        if listing is not None:  # the folder's files as known without walking it (`datalint watch`)
            self.listing = listing
        elif description.option("dataset") is not None:
            self.dataset, files = _dataset_and_files(description)
            self.root = resolve_dataset_root(
                files,
                description.option("image_root"),
                getattr(self.dataset.dataset, "root", None),
                self.root,
                str(description.option("dataset")),
            )
            self.listing = ImageListing(str(self.root), files)
        elif description.option("files") is not None:
            self.listing = ImageListing(str(self.root), tuple(description.option("files")))
        else:
            extensions = description.option("extensions", DEFAULT_EXTENSIONS)
            self.listing = image_listing(self.root, description.option("file_list"), extensions)
        self._capture: StderrCapture | None = None
        self._capture_pid = 0

    def warm_up(self) -> None:
        """Import the decoders in the process that forks the workers; a scan calls it once it has
        files to measure, so a rerun that measures none (an incremental scan, a watch update
        with nothing new) never pays it."""
        if self.listing.files:
            warm_up_decoders()

    def __len__(self) -> int:
        return len(self.listing.files)

    def key(self, index: int) -> str:
        return self.listing.files[index]

    def measure(self, index: int) -> dict[str, Any]:
        if self._capture is None or self._capture_pid != os.getpid():
            # One per process: the engine forks its workers from the process that built the source.
            self._capture, self._capture_pid = StderrCapture(), os.getpid()
        key = self.listing.files[index]
        if key in self.listing.unlisted:
            return ImageProbe(0, (ImageFinding("unreadable", self.listing.unlisted[key]),)).measurement()
        probe = probe_image_file(self.root / key, self.options, self._capture)
        measured = probe.measurement()
        if self.dataset is None or probe.damaged or probe.unsupported:
            return measured  # a damaged file's sample would only fail again on the same bytes
        sample = self.dataset.measure(index)  # raises for the sample's own error, as a dataset scan does
        sample.pop("duration", None)  # the engine times the file and the sample together
        info = {**(sample.get("info") or {}), **measured["info"]}
        return {**sample, "info": info, "findings": [*measured["findings"], *sample.get("findings", [])]}


def warm_up_decoders() -> None:
    """Import the decoders and ask OpenCV's question once, in the process that forks the workers.

    Forked workers inherit all of it; each would otherwise pay ~0.3 CPU-seconds of imports.
    """
    import cv2  # noqa: F401
    from PIL import Image

    Image.init()  # every format plugin, not only the five Pillow preloads
    opencv_flags_truncation()


def image_listing(root: Path, file_list: str | None, extensions: Sequence[str]) -> ImageListing:
    """The folder's image files, or the paths of `file_list` (kept as written: they are the keys)."""
    if file_list is None:
        return list_image_files(root, extensions)
    try:
        return ImageListing(str(root), read_file_list(file_list))
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read the file list {file_list}: {exc}") from None


def _dataset_and_files(description: Any) -> tuple[Any, tuple[str, ...]]:
    from datalint.scan.sources import DatasetSource, SourceDescription

    spec = str(description.option("dataset"))
    dataset_description = SourceDescription.make("dataset", spec, labels=description.option("labels", ()))
    source = DatasetSource(dataset_description)
    files = dataset_file_paths(source.dataset)
    if files is None:
        raise UsageError(
            f"--files-from-dataset: {spec} does not name its files (no `samples` or `imgs` list of "
            "(path, label) pairs, as torchvision's ImageFolder has); scan its folder with --images DIR"
        )
    if len(files) != len(source):
        raise UsageError(f"--files-from-dataset: {spec} has {len(source)} samples but {len(files)} files")
    return source, files


def resolve_dataset_root(
    files: Sequence[str], image_root: str | None, dataset_root: Any, cwd: Path, spec: str
) -> Path:
    """The folder the dataset's relative paths are in, as the dataset itself resolves them.

    Tried in order: `--image-root`, the dataset's `root` attribute (ImageFolder keeps one), the
    current directory; the first where most of a sample of the files exist wins. When none has
    most of them, quarantining the whole dataset as "no such file" would hide the real mistake,
    so it is a usage error that says where it looked.
    """
    candidates: list[tuple[str, Path]] = []
    if image_root is not None:
        candidates.append(("--image-root", Path(image_root)))
    if isinstance(dataset_root, (str, os.PathLike)) and str(dataset_root):
        candidates.append(("the dataset's root", Path(os.path.abspath(os.fspath(dataset_root)))))
    candidates.append(("the current directory", cwd))
    step = max(1, len(files) // _ROOT_SAMPLE)
    sample = files[::step][:_ROOT_SAMPLE]
    tried = []
    for name, base in candidates[:1] if image_root is not None else candidates:
        present = sum(1 for path in sample if (base / path).exists())
        if present * 2 > len(sample):
            return base
        tried.append(f"{name} {base} ({len(sample) - present} of {len(sample)} missing)")
    raise UsageError(
        f"--files-from-dataset: most files behind {spec} do not exist: looked in {'; '.join(tried)}. "
        "Pass --image-root DIR, the folder its paths are relative to"
    )


_ROOT_SAMPLE = 200  # files checked per candidate folder: enough to tell, cheap on a million


def dataset_file_paths(dataset: Any) -> tuple[str, ...] | None:
    """The file behind each sample, from the ImageFolder convention (`samples`, or the older `imgs`)."""
    from datalint.index.keys import path_reader

    reader = path_reader(dataset)
    if reader is None:
        return None
    return tuple(reader(index) for index in range(len(reader)))


FILES_SPEC = "the listed files"  # the spec of a scan of image paths given one by one (its index name)


def images_description(
    *,
    folder: str | None = None,
    file_list: str | None = None,
    dataset: str | None = None,
    files: Sequence[str] | None = None,
    extensions: Sequence[str] | None = None,
    max_pixels: int = DEFAULT_MAX_PIXELS,
    all_frames: bool = False,
    labels: Sequence[str] = (),
    image_root: str | None = None,
    scores: bool = True,
) -> Any:
    """The SourceDescription of an image scan; a folder that does not exist is a usage error.

    With `dataset`, relative sample paths are resolved against `image_root`, else the dataset's own
    `root`, else the current directory (`resolve_dataset_root`).
    """
    from datalint.scan.sources import SourceDescription

    options: dict[str, Any] = {"max_pixels": max_pixels, "all_frames": all_frames, "scores": scores}
    if files:
        absent = [path for path in files if not Path(path).is_file()]
        if absent:
            more = ", ..." if len(absent) > 5 else ""
            raise UsageError(f"no such image file: {', '.join(absent[:5])}{more}")
        # Keys are the paths as given (the names pre-commit and the user know), relative to here.
        return SourceDescription.make("images", FILES_SPEC, root=os.getcwd(), files=tuple(files), **options)
    if dataset is not None:
        if image_root is not None and not Path(image_root).is_dir():
            raise UsageError(f"--image-root {image_root}: no such folder")
        return SourceDescription.make(
            "images", dataset, dataset=dataset, root=os.getcwd(), labels=tuple(labels),
            image_root=os.path.abspath(image_root) if image_root is not None else None, **options,
        )  # fmt: skip
    if folder is not None and not Path(folder).is_dir():
        raise UsageError(f"--images {folder}: no such folder")
    if file_list is not None and not Path(file_list).is_file():
        what = "not a regular file" if Path(file_list).exists() else "no such file"
        raise UsageError(f"--files {file_list}: {what} (it should list one image path per line)")
    root = os.path.abspath(folder if folder is not None else os.getcwd())
    if file_list is not None:
        return SourceDescription.make("images", file_list, root=root, file_list=file_list, **options)
    assert folder is not None
    wanted = normalize_extensions(extensions) if extensions else DEFAULT_EXTENSIONS
    return SourceDescription.make("images", folder, root=root, extensions=wanted, **options)


def listing_note(source: ImageFilesSource) -> str:
    """One line for the user before the scan: how many files, and what was passed over."""
    listing = source.listing
    where = source.description.spec
    if not listing.files:
        extensions = ", ".join(source.description.option("extensions", DEFAULT_EXTENSIONS))
        found = f"no image files in {where} (extensions: {extensions}; change them with --ext)"
    else:
        found = f"{len(listing.files):,} image file(s) in {where}"
    if listing.skipped:
        shown = ", ".join(listing.skipped_examples) + (
            ", ..." if listing.skipped > len(listing.skipped_examples) else ""
        )
        found += f"; {listing.skipped:,} other file(s) skipped ({shown})"
    return found


# --------------------------------------------------------------------------- whole-index policy


@dataclass(frozen=True)
class ShapeThresholds:
    """When an image is tiny or oddly shaped; applied after a scan, so they change without rescanning."""

    min_side: int = 32
    max_aspect: float = 10.0


def shape_findings(width: int, height: int, thresholds: ShapeThresholds) -> list[ImageFinding]:
    findings = []
    if min(width, height) < thresholds.min_side:
        findings.append(ImageFinding("tiny", f"{width}x{height}: a side under {thresholds.min_side} pixels"))
    if min(width, height) > 0 and max(width, height) / min(width, height) > thresholds.max_aspect:
        ratio = max(width, height) / min(width, height)
        detail = f"{width}x{height}: aspect ratio {ratio:.1f}:1, over {thresholds.max_aspect:g}:1"
        findings.append(ImageFinding("extreme_aspect", detail))
    return findings


def duplicate_findings(hashes: Mapping[int, tuple[str, str]]) -> dict[int, ImageFinding]:
    """`{index: (key, sha256)}` -> `duplicate` for every file of a group but the first by key.

    Pass only undamaged files: two copies of the same HTML error page are `corrupt`, not duplicates.
    """
    groups: dict[str, list[tuple[str, int]]] = {}
    for index, (key, digest) in hashes.items():
        groups.setdefault(digest, []).append((key, index))
    findings: dict[int, ImageFinding] = {}
    for members in groups.values():
        if len(members) < 2:
            continue
        members.sort()
        first_key = members[0][0]
        for _key, index in members[1:]:
            others = f" and {len(members) - 2} more" if len(members) > 2 else ""
            findings[index] = ImageFinding("duplicate", f"same bytes as {shown_name(first_key)}{others}")
    return findings


def index_findings(db: Any, thresholds: ShapeThresholds | None = None) -> list[tuple[int, str, str]]:
    """(index, kind, detail) for `tiny`, `extreme_aspect` and `duplicate` over the image files of an index.

    Only undamaged files carry a `sha256` in `samples.info`, so damaged ones take no part. SQLite
    narrows the rows first, so a clean index of a million files costs one pass of json_extract.
    """
    limits = thresholds or ShapeThresholds()
    found: list[tuple[int, str, str]] = []
    for idx, width, height in population.images_past_shape_limits(db, limits.min_side, limits.max_aspect):
        found.extend((idx, f.kind, f.detail) for f in shape_findings(int(width), int(height), limits))
    shared = population.images_sharing_bytes(db)
    hashes = {idx: (read_key(key) or f"#{idx}", digest) for idx, key, digest in shared}
    found.extend((idx, f.kind, f.detail) for idx, f in duplicate_findings(hashes).items())
    return sorted(found)


