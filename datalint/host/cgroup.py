"""This process's cgroup (v1, v2 or none): its memory and CPU limits, usage and OOM counters.

Every reader takes a `root`, so tests point it at fake /proc + /sys trees for cgroup v1, v2 and none.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from datalint.host.procfs import read_int, read_text

# cgroup v1 writes "no limit" as LONG_MAX rounded down to a page (9223372036854771712); anything
# this large is no limit in practice.
UNLIMITED_THRESHOLD = 1 << 60


# --- cgroups ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Cgroup:
    """The limits of the cgroup this process runs in: the tightest of its own and its parents'."""

    version: int  # 1 or 2
    path: str  # this process's cgroup, as /proc/self/cgroup names it
    memory_limit: int | None  # None: no limit
    memory_usage: int | None
    cpu_quota: float | None  # CPUs; None: no quota
    pids_limit: int | None


def _own_cgroups(root: Path) -> dict[str, str]:
    """controller -> path from /proc/self/cgroup; the v2 entry is under the key ''."""
    paths: dict[str, str] = {}
    for line in (read_text(root / "proc/self/cgroup") or "").splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3:
            for controller in parts[1].split(","):
                paths[controller.removeprefix("name=")] = parts[2]
    return paths


def _ancestors(base: Path, cgroup_path: str) -> list[Path]:
    """The cgroup directory and each parent up to the mount root, deepest first.

    A limit anywhere above us is enforced too, and inside a cgroup namespace our own path reads "/"
    while the container's limit sits at the mount root, so walking up covers both.
    """
    parts = [p for p in cgroup_path.split("/") if p and p != ".."]
    return [base.joinpath(*parts[:n]) for n in range(len(parts), -1, -1)]


def _tightest(values: Sequence[int | None]) -> int | None:
    limits = [v for v in values if v is not None and v < UNLIMITED_THRESHOLD]
    return min(limits) if limits else None


def _read_limit_v2(path: Path) -> int | None:
    text = (read_text(path) or "").strip()
    return int(text) if text.isdigit() else None  # "max" or absent: no limit


def _first_existing(paths: Sequence[Path]) -> Path | None:
    return next((p for p in paths if p.is_dir()), None)


def _cpu_quota_v2(dirs: Sequence[Path]) -> float | None:
    quotas: list[float] = []
    for d in dirs:
        parts = (read_text(d / "cpu.max") or "").split()
        if len(parts) == 2 and parts[0].isdigit() and parts[1].isdigit() and int(parts[1]) > 0:
            quotas.append(int(parts[0]) / int(parts[1]))
    return min(quotas) if quotas else None


def _read_cgroup_v2(base: Path, path: str) -> Cgroup:
    dirs = [d for d in _ancestors(base, path) if d.is_dir()]
    usage_dir = dirs[0] if dirs else base
    return Cgroup(
        version=2,
        path=path,
        memory_limit=_tightest([_read_limit_v2(d / "memory.max") for d in dirs]),
        memory_usage=read_int(usage_dir / "memory.current"),
        cpu_quota=_cpu_quota_v2(dirs),
        pids_limit=_tightest([_read_limit_v2(d / "pids.max") for d in dirs]),
    )


def _v1_dirs(base: Path, own: Mapping[str, str], controller: str) -> list[Path]:
    """Directories of one v1 controller, deepest first; the mount may be named `cpu,cpuacct`."""
    path = own.get(controller)
    if path is None:
        return []
    mounts = [base / controller, *sorted(base.glob(f"*{controller}*"))]
    mount = _first_existing(mounts)
    return [d for d in _ancestors(mount, path) if d.is_dir()] if mount else []


def _cpu_quota_v1(dirs: Sequence[Path]) -> float | None:
    quotas: list[float] = []
    for d in dirs:
        quota, period = read_int(d / "cpu.cfs_quota_us"), read_int(d / "cpu.cfs_period_us")
        if quota is not None and period and quota > 0:
            quotas.append(quota / period)
    return min(quotas) if quotas else None


def _read_cgroup_v1(base: Path, own: Mapping[str, str]) -> Cgroup:
    memory_dirs = _v1_dirs(base, own, "memory")
    return Cgroup(
        version=1,
        path=own.get("memory", own.get("cpu", "/")),
        memory_limit=_tightest([read_int(d / "memory.limit_in_bytes") for d in memory_dirs]),
        memory_usage=read_int(memory_dirs[0] / "memory.usage_in_bytes") if memory_dirs else None,
        cpu_quota=_cpu_quota_v1(_v1_dirs(base, own, "cpu")),
        pids_limit=_tightest([_read_limit_v2(d / "pids.max") for d in _v1_dirs(base, own, "pids")]),
    )


def read_cgroup(root: Path) -> Cgroup | None:
    """This process's cgroup limits (v2 unified or v1/hybrid), or None when there is no cgroupfs."""
    base = root / "sys/fs/cgroup"
    own = _own_cgroups(root)
    if not own or not base.is_dir():
        return None
    if (base / "cgroup.controllers").exists():
        return _read_cgroup_v2(base, own.get("", "/"))
    return _read_cgroup_v1(base, own)


# --- memory events ----------------------------------------------------------------------------


def parse_flat_keyed(text: str) -> dict[str, int]:
    """`key value` lines (memory.events, memory.oom_control) as a dict of the numeric ones."""
    values: dict[str, int] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].isdigit():
            values[parts[0]] = int(parts[1])
    return values


def read_memory_events(root: Path = Path("/")) -> dict[str, int]:
    """The memory cgroup's OOM counters: v2 `memory.events` (`oom`, `oom_kill`, `max`, ...) of the
    nearest cgroup on the path up that has one, or v1 `memory.oom_control`'s `oom_kill` and
    `memory.failcnt` (as `max`: times usage hit the limit). Empty when there is no memory cgroup."""
    base = root / "sys/fs/cgroup"
    own = _own_cgroups(root)
    if not own or not base.is_dir():
        return {}
    if (base / "cgroup.controllers").exists():
        for directory in _ancestors(base, own.get("", "/")):
            text = read_text(directory / "memory.events")
            if text is not None:
                return parse_flat_keyed(text)
        return {}
    for directory in _v1_dirs(base, own, "memory"):
        text = read_text(directory / "memory.oom_control")
        if text is not None:
            events = {k: v for k, v in parse_flat_keyed(text).items() if k == "oom_kill"}
            failcnt = read_int(directory / "memory.failcnt")
            if failcnt is not None:
                events["max"] = failcnt
            return events
    return {}


# --- the memory files that change, found once ---------------------------------------------------


@dataclass(frozen=True)
class MemoryFiles:
    """The memory cgroup's files that change while a process runs, found once: `read_cgroup` and
    `read_memory_events` walk the hierarchy (tens of files on v1) at each call, which a recorder
    reading them every second should not repeat."""

    usage: Path | None  # v2 memory.current, v1 memory.usage_in_bytes
    events: Path | None  # v2 memory.events, v1 memory.oom_control
    failcnt: Path | None  # v1 memory.failcnt (reported as `max`, as read_memory_events does)


def memory_files(root: Path = Path("/")) -> MemoryFiles:
    base = root / "sys/fs/cgroup"
    own = _own_cgroups(root)
    if not own or not base.is_dir():
        return MemoryFiles(None, None, None)
    if (base / "cgroup.controllers").exists():
        dirs = [d for d in _ancestors(base, own.get("", "/")) if d.is_dir()]
        events = next((d / "memory.events" for d in dirs if (d / "memory.events").exists()), None)
        return MemoryFiles(dirs[0] / "memory.current" if dirs else None, events, None)
    dirs = _v1_dirs(base, own, "memory")
    with_events = next((d for d in dirs if (d / "memory.oom_control").exists()), None)
    return MemoryFiles(
        dirs[0] / "memory.usage_in_bytes" if dirs else None,
        with_events / "memory.oom_control" if with_events else None,
        with_events / "memory.failcnt" if with_events else None,
    )


def read_memory_files(files: MemoryFiles) -> tuple[int | None, dict[str, int]]:
    """(usage in bytes, the OOM counters as `read_memory_events` gives them) from the files found."""
    usage = read_int(files.usage) if files.usage is not None else None
    text = read_text(files.events) if files.events is not None else None
    events = parse_flat_keyed(text) if text is not None else {}
    if files.failcnt is not None:  # v1: oom_control holds more than counters
        events = {k: v for k, v in events.items() if k == "oom_kill"}
        failcnt = read_int(files.failcnt)
        if failcnt is not None:
            events["max"] = failcnt
    return usage, events
