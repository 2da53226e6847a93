"""Pure readers of one moment of a process tree: /proc/PID/{stat,smaps_rollup,io,fd}, /dev/shm,
the cgroup and the GPU.

Every reader takes the /proc root (tests and `datalint doctor --after` share them) and returns plain
values; a process that exits mid-read gives None fields, never an exception.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from datalint.limits import read_text

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


def proc_text(path: str) -> str | None:
    """A /proc file's text, None when unreadable: `limits.read_text` without pathlib, whose path
    objects cost more than the read itself in the recorder's once-a-second walk of every process
    and thread (a torch process has dozens)."""
    try:
        with open(path, "rb") as file:
            return file.read().decode(errors="replace")
    except OSError:
        return None


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


def shm_usage(shm: str = "/dev/shm") -> tuple[int | None, int | None]:
    """(used, total) bytes of the shared-memory file system."""
    try:
        st = os.statvfs(shm)
    except OSError:
        return None, None
    return (st.f_blocks - st.f_bfree) * st.f_frsize, st.f_blocks * st.f_frsize


# --- GPU ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GpuSample:
    index: int
    memory_used: int  # bytes
    memory_total: int
    utilization: int  # percent


NVIDIA_SMI_QUERY = (
    "--query-gpu=index,memory.used,memory.total,utilization.gpu",
    "--format=csv,noheader,nounits",
)


def parse_nvidia_smi(text: str) -> list[GpuSample]:
    """`nvidia-smi --query-gpu=... --format=csv,noheader,nounits` lines (MiB, percent)."""
    gpus = []
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 4 and all(p.isdigit() for p in parts):
            index, used, total, util = (int(p) for p in parts)
            gpus.append(GpuSample(index, used * 1024 * 1024, total * 1024 * 1024, util))
    return gpus


class GpuReader:
    """NVML through nvidia-ml-py when it is installed, else `nvidia-smi` on PATH, else nothing.

    `source` says which one (None: no GPU readable, said once by the caller)."""

    def __init__(self) -> None:
        self.source: str | None = None
        self._nvml: object | None = None
        self._smi = shutil.which("nvidia-smi")
        try:
            import pynvml  # type: ignore[import-not-found]

            pynvml.nvmlInit()
            self._nvml, self.source = pynvml, "nvml"
        except Exception:  # no binding, no driver: fall back to nvidia-smi
            if self._smi and self._read_smi() is not None:
                self.source = "nvidia-smi"

    def _read_smi(self) -> list[GpuSample] | None:
        assert self._smi is not None
        try:
            done = subprocess.run(
                [self._smi, *NVIDIA_SMI_QUERY], capture_output=True, text=True, timeout=5, check=False,
            )
        except (OSError, subprocess.TimeoutExpired):
            return None
        return parse_nvidia_smi(done.stdout) if done.returncode == 0 else None

    def read(self) -> list[GpuSample]:
        if self.source == "nvidia-smi":
            return self._read_smi() or []
        if self.source == "nvml":
            nvml: object = self._nvml
            gpus = []
            for index in range(nvml.nvmlDeviceGetCount()):  # type: ignore[attr-defined]
                handle = nvml.nvmlDeviceGetHandleByIndex(index)  # type: ignore[attr-defined]
                memory = nvml.nvmlDeviceGetMemoryInfo(handle)  # type: ignore[attr-defined]
                util = nvml.nvmlDeviceGetUtilizationRates(handle)  # type: ignore[attr-defined]
                gpus.append(GpuSample(index, int(memory.used), int(memory.total), int(util.gpu)))
            return gpus
        return []


def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def describe_status(status: int) -> tuple[str, int | None]:
    """A waitpid status as ('killed by SIGKILL', 9) or ('exited with 1', None)."""
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        return f"killed by {signal_name(number)}", number
    return f"exited with {os.WEXITSTATUS(status)}", None


def tree_segments(segments: Iterable[dict[str, int]]) -> dict[str, int]:
    """The distinct shared-memory files a tree holds (workers and main share the same ones)."""
    merged: dict[str, int] = {}
    for held in segments:
        merged.update(held)
    return merged
