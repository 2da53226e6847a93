"""One process (or a tree of them) from /proc/PID: stat, children, memory (RSS, PSS, private
pages), I/O and open files.

Every reader takes the /proc root and returns plain values; a process that exits mid-read gives
None fields (or None), never an exception. The flight recorder reads a tree every second through
them, `datalint bench` its loader's workers, `datalint doctor --after` the leftovers of a run.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from datalint.host.procfs import proc_text, read_text

CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


@dataclass(frozen=True)
class ProcStat:
    """The fields of /proc/PID/stat the recorder uses."""

    pid: int
    comm: str
    state: str  # R, S, D, Z (zombie: dead, not yet reaped), ...
    ppid: int
    cpu_ticks: int  # utime + stime
    start_ticks: int  # since boot
    exit_code: int | None  # waitpid-style status, readable while a zombie (Linux 3.5+)


def parse_stat(text: str) -> ProcStat | None:
    """One /proc/PID/stat line; the command name may hold spaces and parentheses."""
    try:
        head, _, rest = text.rpartition(")")
        pid_text, _, comm = head.partition(" (")
        fields = rest.split()
        exit_code = int(fields[49]) if len(fields) > 49 else None
        return ProcStat(
            pid=int(pid_text),
            comm=comm,
            state=fields[0],
            ppid=int(fields[1]),
            cpu_ticks=int(fields[11]) + int(fields[12]),
            start_ticks=int(fields[19]),
            exit_code=exit_code,
        )
    except (ValueError, IndexError):
        return None


def read_stat(pid: int, proc: Path = Path("/proc")) -> ProcStat | None:
    text = proc_text(f"{proc}/{pid}/stat")
    return parse_stat(text) if text else None


def all_processes(proc: Path = Path("/proc")) -> dict[int, ProcStat]:
    """Every process /proc lists, by pid."""
    stats: dict[int, ProcStat] = {}
    try:
        names = os.listdir(proc)
    except OSError:
        return stats
    for name in names:
        if name.isdigit():
            stat = read_stat(int(name), proc)
            if stat is not None:
                stats[stat.pid] = stat
    return stats


def descendants(stats: Mapping[int, ProcStat], root_pid: int) -> list[int]:
    """`root_pid` and every process below it, parents before children."""
    children: dict[int, list[int]] = {}
    for stat in stats.values():
        children.setdefault(stat.ppid, []).append(stat.pid)
    order, frontier = [], [root_pid] if root_pid in stats else []
    while frontier:
        pid = frontier.pop(0)
        order.append(pid)
        frontier.extend(sorted(children.get(pid, []), key=lambda p: stats[p].start_ticks))
    return order


def children_of(pid: int, proc: Path = Path("/proc")) -> list[int] | None:
    """The pids of a process's children from /proc/PID/task/*/children (no full /proc scan); None
    where the kernel lacks those files (CONFIG_PROC_CHILDREN)."""
    task_dir = f"{proc}/{pid}/task"
    try:
        tasks = os.listdir(task_dir)
    except OSError:
        return []
    children: list[int] = []
    for task in tasks:
        text = proc_text(f"{task_dir}/{task}/children")
        if text is None:
            return None if not os.path.exists(f"{task_dir}/{task}/children") else children
        children.extend(int(c) for c in text.split())
    return children


def tree_of(root_pid: int, proc: Path = Path("/proc")) -> dict[int, ProcStat]:
    """`root_pid` and its descendants with their stat, parents first."""
    stats: dict[int, ProcStat] = {}
    frontier = [root_pid]
    while frontier:
        pid = frontier.pop(0)
        stat = read_stat(pid, proc)
        if stat is None:
            continue
        stats[pid] = stat
        children = children_of(pid, proc)
        if children is None:  # no children files: one scan of /proc instead
            everything = all_processes(proc)
            return {p: everything[p] for p in descendants(everything, root_pid)}
        frontier.extend(children)
    return stats


PAGE_SIZE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def read_rss(pid: int, proc: Path = Path("/proc")) -> int | None:
    """RSS in bytes from /proc/PID/statm: a few microseconds, where smaps_rollup walks the page tables."""
    parts = (proc_text(f"{proc}/{pid}/statm") or "").split()
    return int(parts[1]) * PAGE_SIZE if len(parts) > 1 and parts[1].isdigit() else None


def read_memory(pid: int, proc: Path = Path("/proc")) -> tuple[int | None, int | None]:
    """(RSS, PSS) in bytes from smaps_rollup: PSS splits pages shared with the other workers."""
    text = read_text(proc / str(pid) / "smaps_rollup")
    if not text:
        return None, None
    values = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0] in ("Rss:", "Pss:") and parts[1].isdigit():
            values[parts[0]] = int(parts[1]) * 1024
    return values.get("Rss:"), values.get("Pss:")


def read_io(pid: int, proc: Path = Path("/proc")) -> tuple[int | None, int | None]:
    """(read_bytes, write_bytes) the process caused at the storage layer."""
    text = proc_text(f"{proc}/{pid}/io")
    if not text:
        return None, None
    values = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if value.strip().isdigit():
            values[key] = int(value)
    return values.get("read_bytes"), values.get("write_bytes")


def read_fds(
    pid: int, proc: Path = Path("/proc"), shm: str = "/dev/shm"
) -> tuple[int | None, dict[str, int]]:
    """(open files, {shared-memory file: size}) from /proc/PID/fd: the segments the process holds,
    named or already unlinked (torch's file_descriptor sharing unlinks them at once)."""
    fd_dir = f"{proc}/{pid}/fd"  # strings, not Paths: a torch process holds hundreds of fds
    try:
        names = os.listdir(fd_dir)
    except OSError:
        return None, {}
    segments: dict[str, int] = {}
    prefix = shm + "/"
    for name in names:
        try:
            target = os.readlink(f"{fd_dir}/{name}")
            if target.startswith(prefix):
                segments[target] = os.stat(f"{fd_dir}/{name}").st_size
        except OSError:
            continue
    return len(names), segments


def read_exe(pid: int, proc: Path = Path("/proc")) -> str | None:
    """The program a process runs (/proc/PID/exe); None once it is gone or when it is not ours."""
    try:
        return os.readlink(f"{proc}/{pid}/exe")
    except OSError:
        return None


def read_cmdline(pid: int, proc: Path = Path("/proc")) -> str | None:
    """The command line a process runs, its arguments joined by spaces; None once it is gone (a
    zombie's is empty: its name from /proc/PID/comm then)."""
    try:
        raw = (proc / str(pid) / "cmdline").read_bytes()
    except OSError:
        return None
    if raw:
        return " ".join(part.decode(errors="replace") for part in raw.rstrip(b"\0").split(b"\0"))
    name = read_text(proc / str(pid) / "comm")
    return f"[{name.strip()}]" if name else None


def owner(pid: int, proc: Path = Path("/proc")) -> int | None:
    """The user id a process runs as; None once it is gone."""
    try:
        return os.stat(f"{proc}/{pid}").st_uid
    except OSError:
        return None


def maps_library(pid: int, library: str, proc: Path = Path("/proc")) -> bool:
    """Whether the process has `library` (a name, e.g. "libtorch") mapped: loaded, not only imported."""
    return library in (read_text(proc / str(pid) / "maps") or "")


def child_pids(pid: int, proc: Path = Path("/proc")) -> list[int]:
    """Direct children of `pid` (DataLoader workers are children of the main process); one scan of
    /proc where the kernel has no children files."""
    children = children_of(pid, proc)
    if children is not None:
        return children
    return [stat.pid for stat in all_processes(proc).values() if stat.ppid == pid]


def private_bytes(pid: int, proc: Path = Path("/proc")) -> int | None:
    """Memory a process holds alone (private clean + dirty pages): for a forked worker, its own footprint."""
    total = None
    for line in (proc_text(f"{proc}/{pid}/smaps_rollup") or "").splitlines():
        if line.startswith(("Private_Clean:", "Private_Dirty:")):
            total = (total or 0) + int(line.split()[1]) * 1024
    return total


def open_files(pid: int, proc: Path = Path("/proc")) -> int | None:
    """How many files the process has open; None once it is gone."""
    try:
        return len(os.listdir(f"{proc}/{pid}/fd"))
    except OSError:
        return None


@dataclass(frozen=True)
class ProcessReading:
    pid: int
    rss: int
    pss: int | None  # proportional share: shared pages split between the processes that map them
    fds: int
    cpu_ticks: int


def read_process(pid: int, with_pss: bool = True, proc: Path = Path("/proc")) -> ProcessReading | None:
    """One process's memory, fds and CPU time; PSS (smaps_rollup, which walks every mapping and can
    take tens of milliseconds for a process that imported torch) only when asked."""
    rss, stat = read_rss(pid, proc), read_stat(pid, proc)
    if rss is None or stat is None:
        return None
    pss = read_memory(pid, proc)[1] if with_pss else None
    fds = open_files(pid, proc)
    return None if fds is None else ProcessReading(pid, rss, pss, fds, stat.cpu_ticks)
