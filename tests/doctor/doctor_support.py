"""Helpers for the doctor tests: fake /proc + /sys trees and hand-built facts."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from datalint.diagnosis.doctor import GiB, HostFacts, MiB
from datalint.host.cgroup import Cgroup
from datalint.host.shm import Shm

# Every host check, in the order doctor reports them.
HOST_CHECK_NAMES = [
    "shared memory",
    "memory",
    "cpu",
    "open files",
    "process limits",
    "start method",
    "libraries",
    "container",
    "threads",
]

MEMINFO = """\
MemTotal:       65536000 kB
MemFree:        30000000 kB
MemAvailable:   60000000 kB
SwapTotal:       2097152 kB
SwapFree:        2097152 kB
"""


def write_tree(root: Path, files: dict[str, str]) -> Path:
    """Create `files` (path relative to root -> content) under root, the way /proc and /sys look."""
    for relative, content in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)
    return root


def facts(**changes: Any) -> HostFacts:
    """A plain, healthy 8-CPU host with no cgroup limit; tests change what they judge."""
    base = HostFacts(
        shm=Shm("/dev/shm", 8 * GiB, 8 * GiB),
        meminfo={"MemTotal": 64 * GiB, "MemAvailable": 60 * GiB, "SwapTotal": 0, "SwapFree": 0},
        cgroup=None,
        cpu_count=8,
        affinity=8,
        rlimits={
            "NOFILE": (65536, 65536),
            "NPROC": (100000, 100000),
            "AS": (-1, -1),
            "MEMLOCK": (8 * MiB, 8 * MiB),
        },
        container=None,
        python="3.11.7",
        start_method="fork",
        sharing_strategy="file_descriptor",
        libraries={
            "torch": "2.13.0",
            "numpy": "2.4.6",
            "pillow": "13.0.0",
            "opencv-python-headless": "5.0.0",
            "tokenizers": None,
        },
        env={},
        cv2_threads=8,
    )
    return replace(base, **changes)


def cgroup(**changes: Any) -> Cgroup:
    base = Cgroup(
        version=2, path="/job", memory_limit=None, memory_usage=None, cpu_quota=None, pids_limit=None
    )
    return replace(base, **changes)
