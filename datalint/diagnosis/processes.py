"""Reading a process from /proc: memory (RSS, PSS, private pages), open fds, CPU time, children.

The lowest layer of loader diagnosis: `doctor` (estimates) and `bench` (sweeps, soaks) both read
processes through it, and it imports neither.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass

PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")


@dataclass(frozen=True)
class ProcessReading:
    pid: int
    rss: int
    pss: int | None  # proportional share: shared pages split between the processes that map them
    fds: int
    cpu_ticks: int


def _read(path: str) -> str | None:
    try:
        with open(path) as handle:
            return handle.read()
    except OSError:  # the process ended between listing and reading
        return None


def children_of(pid: int) -> list[int]:
    """Direct children of `pid` (DataLoader workers are children of the main process)."""
    found: list[int] = []
    with contextlib.suppress(OSError):
        for tid in os.listdir(f"/proc/{pid}/task"):
            listed = _read(f"/proc/{pid}/task/{tid}/children")
            if listed is None:  # a kernel without CONFIG_PROC_CHILDREN: look at every process
                return _children_by_parent(pid)
            found.extend(int(c) for c in listed.split())
    return found


def _children_by_parent(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        stat = _read(f"/proc/{entry}/stat") if entry.isdigit() else None
        if stat and int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            found.append(int(entry))
    return found


def read_process(pid: int, with_pss: bool = True) -> ProcessReading | None:
    """One process's memory, fds and CPU time; PSS (smaps_rollup, which walks every mapping and can
    take tens of milliseconds for a process that imported torch) only when asked."""
    statm, stat = _read(f"/proc/{pid}/statm"), _read(f"/proc/{pid}/stat")
    if not statm or not stat:
        return None
    # utime and stime are fields 14 and 15; field 2 (the command) may hold spaces, so split after ')'.
    after_command = stat.rsplit(")", 1)[1].split()
    cpu_ticks = int(after_command[11]) + int(after_command[12])
    pss = None
    for line in (_read(f"/proc/{pid}/smaps_rollup") or "").splitlines() if with_pss else ():
        if line.startswith("Pss:"):
            pss = int(line.split()[1]) * 1024
            break
    try:
        fds = len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return None
    return ProcessReading(pid, int(statm.split()[1]) * PAGE_SIZE, pss, fds, cpu_ticks)


def private_bytes(pid: int) -> int | None:
    """Memory a process holds alone (private clean + dirty pages): for a forked worker, its own footprint."""
    total = None
    for line in (_read(f"/proc/{pid}/smaps_rollup") or "").splitlines():
        if line.startswith(("Private_Clean:", "Private_Dirty:")):
            total = (total or 0) + int(line.split()[1]) * 1024
    return total
