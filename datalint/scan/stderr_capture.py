"""What native code prints on the C-level stderr (fd 2) while one sample or file is produced.

libjpeg reports damaged scan data only there ("Premature end of JPEG file", "Corrupt JPEG data:
..."), never through an exception; libtiff and libpng do the same for some damage. The image-file
scan captures it around each decode, the dataset scan around each `dataset[i]`; the words are
judged in one place, `datalint.scan.images` (`classify_jpeg_messages`, `classify_native_stderr`).
"""

from __future__ import annotations

import fcntl
import os
import stat
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO

MAX_CAPTURED_BYTES = 64 * 1024


class StderrCapture:
    """Catches what native decoders print on the C-level stderr (fd 2) while one file is decoded.

    Where fd 2 is a readable regular file (a scan worker's output file) the text written during the
    decode is read back from it, and nothing is redirected: a decoder that segfaults still leaves
    its crash dump where the engine looks for it, and the text stays where it was. Elsewhere (a
    terminal, a pipe, a write-only log file) fd 2 is pointed at a private file for the decode; with
    `echo`, what was caught is written on to the real fd 2 afterwards, so output the user would
    have seen still shows. Either way only the text of this one decode is kept, so one file's
    warnings never show up in the next. Use it from one thread: fd 2 is per process.
    """

    def __init__(self, echo: bool = False) -> None:
        self._sink: IO[bytes] | None = None
        self.echo = echo
        self.text = ""

    def close(self) -> None:
        if self._sink is not None:
            self._sink.close()

    @contextmanager
    def capturing(self) -> Iterator[StderrCapture]:
        sys.stderr.flush()
        if _readable_regular_file(2):
            with self._reading_back():
                yield self
        else:
            with self._redirecting():
                yield self

    @contextmanager
    def _reading_back(self) -> Iterator[None]:
        start = os.lseek(2, 0, os.SEEK_END)
        try:
            yield
        finally:
            end = os.lseek(2, 0, os.SEEK_CUR)
            self.text = _decoded(os.pread(2, min(end - start, MAX_CAPTURED_BYTES), start))

    @contextmanager
    def _redirecting(self) -> Iterator[None]:
        if self._sink is None:
            # Kept for the worker's life: one file per decoded image would cost more than the decode.
            self._sink = tempfile.TemporaryFile(buffering=0)  # noqa: SIM115
        self._sink.seek(0)
        self._sink.truncate()
        saved = os.dup(2)
        os.dup2(self._sink.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            self._sink.seek(0)
            raw = self._sink.read() if self.echo else self._sink.read(MAX_CAPTURED_BYTES)
            if self.echo and raw:
                _write_all(2, raw)
            self.text = _decoded(raw[:MAX_CAPTURED_BYTES])


def _readable_regular_file(fd: int) -> bool:
    """A scan worker's output file is; `2> log.txt` (write-only) and terminals are not."""
    return stat.S_ISREG(os.fstat(fd).st_mode) and fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE == os.O_RDWR


def _decoded(raw: bytes) -> str:
    return raw.decode("utf-8", "replace") if raw else ""


def _write_all(fd: int, data: bytes) -> None:
    try:
        while data:
            data = data[os.write(fd, data) :]
    except OSError:  # a closed or full stderr: the text was the user's, the scan goes on
        pass
