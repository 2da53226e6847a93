"""Reading files that may be anything (a FIFO, a socket or a device must never block a read), and
writing one atomically.

Standard library only: `datalint check` uses it.
"""

from __future__ import annotations

import errno
import json
import os
import stat
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

Content = bytes | bytearray | memoryview | str | Iterable[bytes | bytearray | memoryview | str]


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


def write_atomically(
    path: str | os.PathLike[str],
    data: Content,
    *,
    mode: int | None = None,
    durable: bool = True,
    sync_folder: bool = False,
) -> None:
    """Replace `path` with `data` in one rename: a reader sees the old file or the new, never half.

    `data` is bytes, text (UTF-8), or an iterable of parts written one after another (a large list
    is never joined into a second copy). A temporary file beside `path` is written, fsynced
    (`durable=False` skips that for caches, which a crash may lose), then renamed over `path`;
    `sync_folder` fsyncs the folder too, so the rename itself survives a crash. The file gets `mode`
    exactly; without one, what a plain `open()` would give it: the mode of the file it replaces, or
    0666 less the umask. On any error the temporary file is removed, the old file is left as it was,
    and an OSError without a file name (a write's ENOSPC) is raised naming `path`.
    """
    target = Path(path)
    descriptor, temporary = _temporary_beside(target)
    try:
        with os.fdopen(descriptor, "wb") as out:
            os.fchmod(out.fileno(), _mode_for(target) if mode is None else mode)
            for part in _parts(data):
                out.write(part.encode("utf-8") if isinstance(part, str) else part)
            if durable:
                out.flush()
                os.fsync(out.fileno())
        os.replace(temporary, target)
    except BaseException as exc:
        temporary.unlink(missing_ok=True)
        if isinstance(exc, OSError) and exc.filename is None:
            raise OSError(exc.errno, exc.strerror, str(target)) from exc
        raise
    if sync_folder:
        _fsync_folder(target.parent)


def json_parts(value: Any, *, indent: int | None = None, part_chars: int = 1 << 20) -> Iterator[str]:
    """The text of `json.dumps(value, indent=indent)` in parts of about `part_chars` characters, for
    `write_atomically`: a list of 1e7 samples is never one string of a gigabyte."""
    pending: list[str] = []
    size = 0
    for piece in json.JSONEncoder(indent=indent).iterencode(value):
        pending.append(piece)
        size += len(piece)
        if size >= part_chars:
            yield "".join(pending)
            pending, size = [], 0
    yield "".join(pending)


def _temporary_beside(target: Path) -> tuple[int, Path]:
    """A new file in the target's folder (the rename must not cross file systems), hidden, unique
    across processes and threads (O_EXCL: never an old leftover)."""
    while True:
        temporary = target.with_name(f".{target.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
        try:
            return os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600), temporary
        except FileExistsError:
            continue


def _parts(data: Content) -> Iterable[bytes | bytearray | memoryview | str]:
    return (data,) if isinstance(data, bytes | bytearray | memoryview | str) else data


def _mode_for(target: Path) -> int:
    try:
        return stat.S_IMODE(target.stat().st_mode)
    except OSError:
        umask = os.umask(0o022)  # reading the umask means setting it; put it straight back
        os.umask(umask)
        return 0o666 & ~umask


def _fsync_folder(folder: Path) -> None:
    descriptor = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


# ---- lock files ---------------------------------------------------------------------------------


class LockHeld(Exception):
    """Another process holds the lock; `holder` says who, as it wrote itself (pid, host, since)."""

    def __init__(self, holder: str) -> None:
        super().__init__(holder)
        self.holder = holder


def take_lock(path: Path, *, mode: int = 0o666) -> int:
    """Hold an exclusive POSIX record lock on `path` (created if absent) and write this process's pid,
    host and start time into it for whoever is refused. The kernel drops the lock when the process
    dies, however it dies, so it is never stale; forked children do not inherit it. Returns the open
    descriptor (closing it lets go); raises LockHeld naming the holder, or the OSError of creating it."""
    import fcntl
    import socket
    from datetime import UTC, datetime

    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, mode)
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = lock_holder(fd)
            os.close(fd)
            raise LockHeld(holder) from None
        if _same_file(fd, path):
            break
        os.close(fd)  # the holder removed the file as we opened it: take the new one
    started = datetime.now(UTC).isoformat(timespec="seconds")
    record = {"pid": os.getpid(), "host": socket.gethostname(), "started": started}
    os.ftruncate(fd, 0)
    os.pwrite(fd, json.dumps(record).encode(), 0)
    return fd


def lock_holder(fd: int) -> str:
    """Who holds the lock of the open lock file `fd`, as its holder wrote it (pid, host, start)."""
    try:
        record = json.loads(os.pread(fd, 4096, 0) or b"{}")
        return f"pid {int(record['pid'])} on host {record['host']}, since {record['started']}"
    except (OSError, ValueError, KeyError, TypeError):
        return "a process that has not yet written its name"


def _same_file(fd: int, path: Path) -> bool:
    try:
        return os.path.samestat(os.fstat(fd), os.stat(path))
    except OSError:
        return False
