"""The CPUs this process may really use: its affinity mask and its cgroup's CPU quota.

The scan engine sizes its default worker pool with `effective_cpu_count()`; `datalint doctor`
reports and judges the same numbers through `usable_cpu_count`.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

from datalint.host.cgroup import read_cgroup


def read_affinity() -> int | None:
    """CPUs in this process's affinity mask (taskset, a scheduler's cpuset); None where unknown."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # macOS has no sched_getaffinity
        return None


def usable_cpu_count(cpu_count: int | None, affinity: int | None, cpu_quota: float | None) -> int | None:
    """The CPUs a process may really use: the smallest of the CPU count, its affinity mask and its
    cgroup quota, rounded up (a fraction of a CPU still runs one worker); None when nothing is known."""
    candidates = [c for c in (cpu_count, affinity) if c]
    if cpu_quota:
        candidates.append(max(1, math.ceil(cpu_quota)))
    return min(candidates) if candidates else None


def effective_cpu_count(root: Path = Path("/")) -> int:
    """CPUs this process may really use: affinity mask and cgroup CPU quota, not os.cpu_count().

    The scan's default worker count; at least 1.
    """
    cgroup = read_cgroup(root)
    quota = cgroup.cpu_quota if cgroup is not None else None
    return usable_cpu_count(os.cpu_count(), read_affinity(), quota) or 1
