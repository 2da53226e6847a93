"""Host memory from /proc/meminfo, and what this process can still take under its cgroup's limit."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from datalint.host.cgroup import Cgroup, read_cgroup
from datalint.host.procfs import read_text
from datalint.units import KiB

MEMINFO_KEYS = ("MemTotal", "MemAvailable", "SwapTotal", "SwapFree", "Shmem")


def parse_meminfo(text: str) -> dict[str, int]:
    """`/proc/meminfo`'s MEMINFO_KEYS in bytes (the file says kB and means KiB)."""
    info: dict[str, int] = {}
    for line in text.splitlines():
        name, _, rest = line.partition(":")
        parts = rest.split()
        if name in MEMINFO_KEYS and parts and parts[0].isdigit():
            info[name] = int(parts[0]) * (KiB if parts[1:] == ["kB"] else 1)
    return info


def read_meminfo(root: Path) -> dict[str, int]:
    """`/proc/meminfo` under `root`, in bytes; empty where it cannot be read."""
    return parse_meminfo(read_text(root / "proc/meminfo") or "")


def memory_left(meminfo: Mapping[str, int], cg: Cgroup | None) -> int | None:
    """MemAvailable, or less where a cgroup's memory limit is nearer; None when neither is known."""
    budgets: list[int] = []
    if "MemAvailable" in meminfo:
        budgets.append(meminfo["MemAvailable"])
    if cg and cg.memory_limit is not None:
        budgets.append(max(0, cg.memory_limit - (cg.memory_usage or 0)))
    return min(budgets) if budgets else None


def memory_left_now(root: Path = Path("/")) -> int | None:
    """Bytes this process can still take now: `memory_left` of the host's meminfo and cgroup."""
    return memory_left(read_meminfo(root), read_cgroup(root))
