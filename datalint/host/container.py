"""Which container runtime this process runs in, from the marks each one leaves."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from datalint.host.procfs import read_text

CGROUP_MARKS = ("kubepods", "docker", "containerd", "lxc")


def read_container(root: Path, env: Mapping[str, str]) -> str | None:
    """The container runtime (kubernetes, docker, podman, or a mark in init's cgroup); None when none
    is seen. `env` is the environment to judge (read once by the caller)."""
    if env.get("KUBERNETES_SERVICE_HOST"):
        return "kubernetes"
    if (root / ".dockerenv").exists():
        return "docker"
    if (root / "run/.containerenv").exists():
        return "podman"
    return container_mark(read_text(root / "proc/1/cgroup") or "")


def container_mark(init_cgroup: str) -> str | None:
    """The runtime named in /proc/1/cgroup's text, if any."""
    return next((mark for mark in CGROUP_MARKS if mark in init_cgroup), None)
