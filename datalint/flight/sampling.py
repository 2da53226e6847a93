"""The GPU and a process's end, for the flight recorder: NVML or nvidia-smi readings, exit statuses
in words, and the shared-memory files a tree holds.

The /proc, cgroup and /dev/shm readers the recorder samples with are `datalint.host`'s.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass

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
