"""The recorder's once-a-second cgroup reads (files found once) say what the full walk says, on
cgroup v1 and v2 trees laid out as the kernel lays them out."""

from __future__ import annotations

from pathlib import Path

import pytest

from datalint.host.cgroup import memory_files, read_cgroup, read_memory_events, read_memory_files


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


V2 = {
    "proc/self/cgroup": "0::/user.slice/train.scope\n",
    "sys/fs/cgroup/cgroup.controllers": "cpu memory pids\n",
    "sys/fs/cgroup/user.slice/memory.max": "8589934592\n",
    "sys/fs/cgroup/user.slice/train.scope/memory.max": "max\n",
    "sys/fs/cgroup/user.slice/train.scope/memory.current": "123456789\n",
    "sys/fs/cgroup/user.slice/train.scope/memory.events": "low 0\nhigh 0\nmax 7\noom 2\noom_kill 1\n",
}
V1 = {
    "proc/self/cgroup": "12:memory:/docker/abc\n11:cpu,cpuacct:/docker/abc\n",
    "sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes": "4294967296\n",
    "sys/fs/cgroup/memory/docker/abc/memory.usage_in_bytes": "987654321\n",
    "sys/fs/cgroup/memory/docker/abc/memory.oom_control": "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n",
    "sys/fs/cgroup/memory/docker/abc/memory.failcnt": "12\n",
}


@pytest.mark.parametrize("tree", [V2, V1], ids=["v2", "v1"])
def test_the_files_found_once_read_as_the_full_walk(tmp_path: Path, tree: dict[str, str]) -> None:
    _write(tmp_path, tree)
    files = memory_files(tmp_path)
    usage, events = read_memory_files(files)
    cgroup = read_cgroup(tmp_path)
    assert cgroup is not None
    assert usage == cgroup.memory_usage and usage is not None
    assert events == read_memory_events(tmp_path) and events["oom_kill"] in (1, 3)

    # the counters move: the same files, read again, follow them
    events_file = files.events
    assert events_file is not None
    before = events["oom_kill"]
    events_file.write_text(events_file.read_text().replace(f"oom_kill {before}", f"oom_kill {before + 1}"))
    assert read_memory_files(files)[1]["oom_kill"] == before + 1


def test_no_cgroup_file_system_reads_nothing(tmp_path: Path) -> None:
    assert read_memory_files(memory_files(tmp_path)) == (None, {})
