"""The shared-memory file system (/dev/shm): its size and use, and the segments in it with who holds them."""

from __future__ import annotations

import contextlib
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path

from datalint.host.procfs import read_text

TORCH_SEGMENT = re.compile(r"^torch_(\d+)_")


@dataclass(frozen=True)
class Shm:
    path: str
    total: int | None  # None: not mounted / not there
    free: int | None
    mount: str = ""  # the /proc/mounts line, for the record


def mount_line(mounts: str, shm_path: str) -> str:
    """The /proc/mounts line of the file system mounted at `shm_path` (the last one), or ""."""
    found = ""
    for line in mounts.splitlines():
        fields = line.split()
        if len(fields) >= 4 and fields[1] == shm_path:
            found = line
    return found


def read_shm(shm_path: Path, root: Path = Path("/")) -> Shm:
    """Size and free space of the shared-memory mount, from statvfs and /proc/mounts."""
    mount = mount_line(read_text(root / "proc/mounts") or "", str(shm_path))
    try:
        st = os.statvfs(shm_path)
    except OSError:
        return Shm(str(shm_path), None, None, mount)
    return Shm(str(shm_path), st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize, mount)


def shm_usage(shm: str = "/dev/shm") -> tuple[int | None, int | None]:
    """(used, total) bytes of the shared-memory file system; (None, None) where it is not there."""
    try:
        st = os.statvfs(shm)
    except OSError:
        return None, None
    return (st.f_blocks - st.f_bfree) * st.f_frsize, st.f_blocks * st.f_frsize


# --- segments ------------------------------------------------------------------------------------


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@dataclass(frozen=True)
class Segment:
    """A file in /dev/shm and who could still need it."""

    path: str
    size: int
    age: float  # seconds since it was last written
    creator: int | None  # the pid its name carries (torch's segments), None when it names none
    held_by: tuple[int, ...]  # live processes with it open or mapped

    @property
    def leaked(self) -> bool:
        """Its creator is gone and no process holds it: nobody can ever unlink it but us."""
        return self.creator is not None and not self.held_by and not pid_alive(self.creator)


def held_segments(proc: Path, shm_dir: str) -> dict[str, list[int]]:
    """shared-memory path -> pids holding it, from every readable /proc/PID/fd and /proc/PID/maps."""
    held: dict[str, list[int]] = {}
    prefix = shm_dir.rstrip("/") + "/"
    for name in os.listdir(proc):
        if not name.isdigit():
            continue
        pid = int(name)
        paths: set[str] = set()
        with contextlib.suppress(OSError):
            for fd in os.listdir(proc / name / "fd"):
                with contextlib.suppress(OSError):
                    target = os.readlink(proc / name / "fd" / fd)
                    if target.startswith(prefix):
                        paths.add(target.removesuffix(" (deleted)"))
        for line in (read_text(proc / name / "maps") or "").splitlines():
            where = line.find(prefix)
            if where >= 0:
                paths.add(line[where:].removesuffix(" (deleted)"))
        for path in paths:
            held.setdefault(path, []).append(pid)
    return held


def read_segments(
    shm_dir: str = "/dev/shm", proc: Path = Path("/proc"), now: float | None = None
) -> list[Segment]:
    """Every file in the shared-memory directory with its size, age, creator and holders."""
    now = time.time() if now is None else now
    held = held_segments(proc, shm_dir)
    segments = []
    with contextlib.suppress(OSError):
        for entry in os.scandir(shm_dir):
            with contextlib.suppress(OSError):
                if not entry.is_file(follow_symlinks=False):
                    continue
                st = entry.stat(follow_symlinks=False)
                match = TORCH_SEGMENT.match(entry.name)
                segments.append(Segment(
                    path=entry.path, size=st.st_blocks * 512, age=max(0.0, now - st.st_mtime),
                    creator=int(match.group(1)) if match else None,
                    held_by=tuple(sorted(held.get(entry.path, []))),
                ))
    return sorted(segments, key=lambda s: s.path)
