"""What the LAION-scale benchmarks share: a step run in a fresh process, and that process's peak RSS."""

from __future__ import annotations

import multiprocessing
import resource
from collections.abc import Callable
from pathlib import Path
from typing import Any


def peak_rss_mib() -> float:
    # VmHWM belongs to this process image; ru_maxrss would keep the parent's peak across fork + exec.
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def in_fresh_process(step: Callable[..., None], *args: Any) -> dict[str, Any]:
    """`step(*args, results)` in a spawned process (its peak RSS its own), and the figures it put."""
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    process = context.Process(target=step, args=(*args, results))
    process.start()
    figures: dict[str, Any] = results.get()
    process.join()
    return figures
