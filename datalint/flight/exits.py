"""The exit status of processes that are not datalint's children, read the moment they die.

A DataLoader worker is the training process's child: only the training can wait for it, and it
reaps a dead worker within milliseconds (multiprocessing's `is_alive` calls `waitpid`), often
before a 50 Hz poll of /proc would see the zombie. A pidfd (`pidfd_open`, Linux 5.3) becomes
readable when its process exits, before the parent reaps it: one thread sleeps in `poll` on all of
them and reads each status from /proc/PID/stat while the process is still a zombie. It costs
nothing while nobody dies, so the recorder need not read every process's stat 50 times a second
to catch a death; it polls only the processes no pidfd watches (none, on Linux 5.3 and later).
The same thread listens on other file descriptors (the in-flight directory's news FIFO) and calls
`wake` after each death and each piece of news, so the recorder's loop sleeps until something
happens instead of polling.
"""

from __future__ import annotations

import os
import select
import threading
from collections.abc import Callable

from datalint.host.processes import read_stat


class ExitWatcher:
    """Watches pids; `status(pid)` is the waitpid-style status seen at its death, or None."""

    def __init__(self, wake: Callable[[], None] | None = None) -> None:
        self.available = hasattr(os, "pidfd_open")
        self._wake = wake or (lambda: None)  # called from the watcher's thread
        self._pids: dict[int, int] = {}  # pidfd -> pid
        self._statuses: dict[int, int] = {}
        self._died: list[int] = []  # died since the last take_dead()
        self._listened: set[int] = set()
        self._news = False
        self._lock = threading.Lock()
        self._poll = select.poll()
        self._wake_read, self._wake_write = os.pipe()
        self._poll.register(self._wake_read, select.POLLIN)
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name="datalint-exits", daemon=True)
        if self.available:
            self._thread.start()

    def watch(self, pid: int) -> bool:
        """Watch `pid`; False where it cannot be (gone already, no pidfds): poll it instead."""
        if not self.available:
            return False
        try:
            fd = os.pidfd_open(pid)
        except OSError:
            return False
        with self._lock:
            self._pids[fd] = pid
        self._poll.register(fd, select.POLLIN)
        os.write(self._wake_write, b"+")  # poll() re-reads its set only when woken
        return True

    def listen(self, fd: int) -> bool:
        """Wake on data readable from `fd` (drained here; `take_news` says it came)."""
        if not self.available:
            return False
        with self._lock:
            self._listened.add(fd)
        self._poll.register(fd, select.POLLIN)
        os.write(self._wake_write, b"+")
        return True

    def take_news(self) -> bool:
        """Whether a listened fd had data since the last call."""
        with self._lock:
            news, self._news = self._news, False
        return news

    def take_dead(self) -> list[int]:
        """The watched pids that died since the last call."""
        with self._lock:
            died, self._died = self._died, []
        return died

    def status(self, pid: int) -> int | None:
        with self._lock:
            return self._statuses.get(pid)

    def close(self) -> None:
        self._stopped = True
        os.write(self._wake_write, b".")
        if self._thread.is_alive():
            self._thread.join(timeout=1)
        for fd in list(self._pids):
            os.close(fd)
        os.close(self._wake_read)
        os.close(self._wake_write)

    def _run(self) -> None:
        while not self._stopped:
            for fd, _ in self._poll.poll():
                if fd == self._wake_read:
                    os.read(fd, 4096)
                elif fd in self._listened:
                    self._drain(fd)
                else:
                    self._dead(fd)

    def _drain(self, fd: int) -> None:
        try:
            os.read(fd, 4096)
        except BlockingIOError:
            return
        with self._lock:
            self._news = True
        self._wake()

    def _dead(self, fd: int) -> None:
        stat = read_stat(self._pids[fd])  # at once: the parent may reap it any moment
        self._poll.unregister(fd)
        with self._lock:
            pid = self._pids.pop(fd)
            self._died.append(pid)
            if stat is not None and stat.state == "Z" and stat.exit_code is not None:
                self._statuses[pid] = stat.exit_code
        os.close(fd)
        self._wake()
