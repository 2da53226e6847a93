"""What independent decoders say about each file of a corpus: the evidence column's raw material.

    python benchmarks/image_corpora_evidence.py /tmp/corpora/libgd+libgd files.txt > evidence.jsonl

One JSON line per file: Pillow's `open().load()` of the first frame, OpenCV's `imread`, ImageMagick's
decode (`convert FILE[0] null:`) and libvips' (`vips avg`), each as `ok`, `ok+warning: ...` or
`fail: ...` with the decoder's own words. Pillow and OpenCV run in this process with fd 2 pointed at
a file per decode (libjpeg, libpng and libtiff print there); the others are their command-line tools,
skipped when absent. No datalint code runs here: this is the second opinion the verdicts rest on.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

IMAGEMAGICK = "/usr/bin/convert" if Path("/usr/bin/convert").exists() else shutil.which("magick")
VIPS = shutil.which("vips")


@contextmanager
def native_stderr() -> Iterator[list[str]]:
    """fd 2 into a temporary file for the block; the list holds its text afterwards."""
    text: list[str] = []
    saved = os.dup(2)
    with tempfile.TemporaryFile() as sink:
        os.dup2(sink.fileno(), 2)
        try:
            yield text
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            text.append(sink.read().decode("utf-8", "replace").strip())


def pillow(path: Path) -> str:
    from PIL import Image, ImageFile

    ImageFile.LOAD_TRUNCATED_IMAGES = False
    with native_stderr() as printed, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            with Image.open(path) as image:
                image.load()
                said = f"ok {image.format} {image.mode} {image.size[0]}x{image.size[1]}"
        except Exception as exc:  # the decoder's refusal is the evidence
            said = f"fail: {type(exc).__name__}: {exc}"
    notes = [str(w.message) for w in caught] + [line for line in printed if line]
    return said + (f" (+ {' | '.join(notes)[:300]})" if notes else "")


def opencv(path: Path) -> str:
    import cv2

    refused = "imread returned None"
    with native_stderr() as printed:
        try:
            pixels = cv2.imread(str(path), cv2.IMREAD_UNCHANGED)
        except cv2.error as exc:  # its size checks raise instead of returning None
            pixels, refused = None, str(exc).strip().splitlines()[-1]
    notes = " | ".join(line for line in printed if line)[:300]
    said = f"fail: {refused}" if pixels is None else f"ok {pixels.shape}"
    return said + (f" (+ {notes})" if notes else "")


def tool(command: list[str]) -> str:
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    except subprocess.TimeoutExpired:
        return "fail: timeout"
    notes = done.stderr.strip().replace("\n", " | ")[:300]
    if done.returncode != 0:
        return f"fail: {notes or done.returncode}"
    return "ok" + (f" (+ {notes})" if notes else "")


def imagemagick(path: Path) -> str:
    return tool([IMAGEMAGICK, f"{path}[0]", "null:"]) if IMAGEMAGICK else "absent"


def vips(path: Path) -> str:
    return tool([VIPS, "avg", str(path)]) if VIPS else "absent"


DECODERS: dict[str, Callable[[Path], str]] = {
    "pillow": pillow, "opencv": opencv, "imagemagick": imagemagick, "vips": vips,
}  # fmt: skip


def main(argv: list[str]) -> int:
    root, listing = Path(argv[0]), Path(argv[1])
    for relative in listing.read_text(encoding="utf-8").split("\n"):
        if relative:
            said = {name: decode(root / relative) for name, decode in DECODERS.items()}
            print(json.dumps({"path": relative, **said}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
