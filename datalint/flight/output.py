"""The command's stderr, passed through to datalint's own as it comes, with its last part kept.

What a training prints last before it fails (a worker's traceback, PyTorch's message about shared
memory) is what `datalint run` explains (flight/explain.py), so the recorder puts itself between
the command's stderr and the terminal: one thread copies every byte through unchanged and keeps the
last TAIL_BYTES. Where datalint's stderr is a terminal the command writes to a pseudo-terminal in
raw mode, so it still sees a terminal (progress bars, colours and their width behave as without
datalint); elsewhere (a CI log, a file) to a pipe. Stdout and stdin are not touched.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import struct
import sys
import termios
import threading
import tty

TAIL_BYTES = 64 * 1024
_PIECE = 64 * 1024


class OutputTail:
    """Start before the command (`child_fd` is its stderr), `close_child_end()` once it started,
    `finish()` after it exited: returns the kept tail, decoded."""

    def __init__(self, destination: int | None = None) -> None:
        self._destination = sys.stderr.fileno() if destination is None else destination
        self._tail = bytearray()
        self._lock = threading.Lock()
        self.child_fd, self._read_fd = _pair(self._destination)
        self._thread = threading.Thread(target=self._copy, name="datalint-run-stderr", daemon=True)
        self._thread.start()

    def close_child_end(self) -> None:
        """The command holds its own copy now: closing ours lets the reader see the end."""
        with contextlib.suppress(OSError):
            os.close(self.child_fd)

    def finish(self, wait: float = 2.0) -> str:
        """The tail, after waiting up to `wait` seconds for what is still in flight: a process the
        command left running may hold its stderr open for ever, and the run does not wait for it."""
        self._thread.join(wait)
        with self._lock:
            return bytes(self._tail).decode("utf-8", errors="replace")

    def _copy(self) -> None:
        while True:
            try:
                piece = os.read(self._read_fd, _PIECE)
            except OSError as exc:
                if exc.errno == errno.EINTR:
                    continue
                break  # EIO: every holder of the pseudo-terminal closed it
            if not piece:
                break
            _write_all(self._destination, piece)
            with self._lock:
                self._tail += piece
                if len(self._tail) > 2 * TAIL_BYTES:
                    del self._tail[: len(self._tail) - TAIL_BYTES]
        with contextlib.suppress(OSError):
            os.close(self._read_fd)
        with self._lock:
            del self._tail[: max(0, len(self._tail) - TAIL_BYTES)]


def _pair(destination: int) -> tuple[int, int]:
    """(the command's end, the reader's end): a raw pseudo-terminal of the terminal's size where
    `destination` is a terminal, else a pipe."""
    if os.isatty(destination):
        with contextlib.suppress(OSError):
            leader, follower = os.openpty()
            tty.setraw(follower)  # bytes through as written: no \n -> \r\n, no echo
            with contextlib.suppress(OSError):
                size = fcntl.ioctl(destination, termios.TIOCGWINSZ, struct.pack("HHHH", 0, 0, 0, 0))
                fcntl.ioctl(follower, termios.TIOCSWINSZ, size)
            return follower, leader
    read_end, write_end = os.pipe()
    return write_end, read_end


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        try:
            written = os.write(fd, view)
        except InterruptedError:
            continue
        except OSError:
            return  # datalint's stderr is gone (a closed pipe): keep reading so the command never blocks
        view = view[written:]
