"""Reading files that may be anything: a FIFO, a socket or a device must never block a read.

Standard library only: `datalint check` uses it.
"""

from __future__ import annotations

import errno
import json
import os
import stat
from pathlib import Path
from typing import Any


class FileTooLarge(OSError):
    """A regular file over the size the caller is willing to read."""

    size: int = 0  # the bytes it has (or had read when it grew past the limit)


def read_regular_file(path: str | os.PathLike[str], limit: int | None = None) -> bytes:
    """A file's bytes, refusing anything but a regular file before a read could block.

    Opened without blocking and checked with fstat on the open descriptor, so a file replaced by a
    FIFO between a listing and this read is refused too. Raises OSError (with a reason a person
    can read) for every file it will not read; `FileTooLarge` over `limit` bytes.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.ENXIO:  # a socket (or a device with nothing behind it): say which
            mode = os.stat(path).st_mode
            raise OSError(errno.EINVAL, f"not a regular file ({file_kind(mode)})", os.fspath(path)) from None
        raise
    try:
        status = os.fstat(fd)
        if not stat.S_ISREG(status.st_mode):
            raise OSError(errno.EINVAL, f"not a regular file ({file_kind(status.st_mode)})", os.fspath(path))
        if limit is not None and status.st_size > limit:
            raise _too_large(status.st_size, limit)
        with os.fdopen(fd, "rb", closefd=False) as handle:
            if limit is None:
                return handle.read()
            # read(n) allocates n bytes first: ask for the size fstat gave (one more shows growth), and
            # for the rest only up to the limit, so a file growing while it is read stays bounded.
            data = handle.read(status.st_size + 1)
            if len(data) > status.st_size:
                data += handle.read(limit + 1 - len(data))
        if len(data) > limit:
            raise _too_large(len(data), limit)
        return data
    finally:
        os.close(fd)


def _too_large(size: int, limit: int) -> FileTooLarge:
    error = FileTooLarge(errno.EFBIG, f"{size:,} bytes, over the limit of {limit:,}")
    error.size = size
    return error


def file_kind(mode: int) -> str:
    """What a non-regular file is, in words."""
    kinds = {
        stat.S_ISDIR: "a directory",
        stat.S_ISFIFO: "a named pipe",
        stat.S_ISSOCK: "a socket",
        stat.S_ISCHR: "a character device",
        stat.S_ISBLK: "a block device",
    }
    return next((name for test, name in kinds.items() if test(mode)), "a special file")


def is_regular(path: Path) -> bool:
    """True for a regular file (following symlinks); False for anything else or nothing."""
    try:
        return stat.S_ISREG(path.stat().st_mode)
    except OSError:
        return False


class UnreadableDocument(ValueError):
    """A JSON file that is no document. `problem` says what is wrong, without the file's name."""

    def __init__(self, path: str | os.PathLike[str], problem: str, *, syntax: bool = False) -> None:
        super().__init__(f"{path}: {problem}")
        self.problem = problem
        self.syntax = syntax  # the text is not JSON (rather than unreadable, not UTF-8, too deep)


def load_json_document(path: str | os.PathLike[str]) -> Any:
    """A JSON file, decoded, or `UnreadableDocument` naming the file and the problem.

    Covers everything a file can be instead of a document: unreadable, not a regular file, not
    UTF-8, not JSON, or nested too deep to decode (the decoder recurses once per level).
    """
    try:
        text = read_regular_file(path).decode("utf-8")
    except OSError as exc:
        raise UnreadableDocument(path, f"cannot read it ({exc.strerror or exc})") from None
    except UnicodeDecodeError as exc:
        raise UnreadableDocument(path, f"not UTF-8 text (byte {exc.start}: {exc.reason})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        problem = f"not valid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}"
        raise UnreadableDocument(path, problem, syntax=True) from None
    except RecursionError:
        raise UnreadableDocument(path, "nested too deeply to read as JSON") from None
