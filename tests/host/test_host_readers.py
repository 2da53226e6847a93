"""The host readers on fake /proc + /sys trees (each file as the kernel writes it) and on the real /proc."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from datalint.host import cgroup, container, cpus, memory, processes, procfs, shm
from datalint.units import KiB, MiB

MEMINFO = "MemTotal: 1000 kB\nMemFree: 10 kB\nMemAvailable: 600 kB\nSwapTotal: 0 kB\nHugePages_Total: 4\n"
# pid 42, a command name with a space and a parenthesis, state S, ppid 7, utime 5 + stime 6, start 99
STAT = "42 (py thon) x) S 7 42 42 0 -1 0 0 0 0 0 5 6 0 0 20 0 1 0 99 0 0" + " 0" * 27 + " 256\n"
V2_SELF = "0::/job\n"


def tree(root: Path, files: dict[str, str]) -> Path:
    for relative, content in files.items():
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text(content)
    return root


def test_procfs_gives_none_for_what_is_missing_or_not_a_number(tmp_path: Path) -> None:
    root = tree(tmp_path, {"a": "12 34\n", "b": "max\n"})
    assert procfs.read_text(root / "nothing") is None and procfs.proc_text(str(root / "nothing")) is None
    assert procfs.read_int(root / "a") == 12 and procfs.read_int(root / "b") is None
    assert procfs.parse_int("") is None and procfs.parse_int(None) is None


def test_meminfo_is_in_bytes_and_keeps_only_the_keys_it_knows(tmp_path: Path) -> None:
    expected = {"MemTotal": 1000 * KiB, "MemAvailable": 600 * KiB, "SwapTotal": 0}
    assert memory.parse_meminfo(MEMINFO) == expected
    assert memory.read_meminfo(tree(tmp_path, {"proc/meminfo": MEMINFO}))["MemAvailable"] == 600 * KiB
    assert memory.read_meminfo(tmp_path / "nowhere") == {}


def test_memory_left_is_the_nearer_of_meminfo_and_the_cgroup_limit(tmp_path: Path) -> None:
    limited = cgroup.Cgroup(2, "/job", memory_limit=MiB, memory_usage=MiB // 4, cpu_quota=None,
                            pids_limit=None)
    assert memory.memory_left({"MemAvailable": 10 * MiB}, limited) == MiB - MiB // 4
    assert memory.memory_left({"MemAvailable": MiB // 8}, limited) == MiB // 8
    assert memory.memory_left({}, None) is None
    root = tree(tmp_path, {
        "proc/meminfo": MEMINFO, "proc/self/cgroup": V2_SELF, "sys/fs/cgroup/cgroup.controllers": "memory",
        "sys/fs/cgroup/job/memory.max": "409600\n", "sys/fs/cgroup/job/memory.current": "102400\n",
    })
    assert memory.memory_left_now(root) == 409600 - 102400


def test_a_v2_cgroup_with_its_limits_events_and_quota(tmp_path: Path) -> None:
    root = tree(tmp_path, {
        "proc/self/cgroup": V2_SELF, "sys/fs/cgroup/cgroup.controllers": "cpu memory pids",
        "sys/fs/cgroup/job/memory.max": "max\n", "sys/fs/cgroup/memory.max": str(2 * MiB),
        "sys/fs/cgroup/job/memory.current": str(MiB), "sys/fs/cgroup/job/cpu.max": "150000 100000\n",
        "sys/fs/cgroup/job/pids.max": "64\n", "sys/fs/cgroup/job/memory.events": "low 0\noom 2\noom_kill 1\n",
    })
    found = cgroup.read_cgroup(root)
    assert found == cgroup.Cgroup(2, "/job", 2 * MiB, MiB, 1.5, 64)
    assert cgroup.read_memory_events(root) == {"low": 0, "oom": 2, "oom_kill": 1}
    assert cgroup.read_memory_files(cgroup.memory_files(root)) == (MiB, {"low": 0, "oom": 2, "oom_kill": 1})
    assert cpus.effective_cpu_count(root) >= 1
    assert cpus.usable_cpu_count(8, 4, found.cpu_quota) == 2


def test_no_cgroupfs_is_none_and_no_events(tmp_path: Path) -> None:
    assert cgroup.read_cgroup(tmp_path) is None
    assert cgroup.read_memory_events(tmp_path) == {}
    assert cgroup.memory_files(tmp_path) == cgroup.MemoryFiles(None, None, None)
    assert cpus.usable_cpu_count(None, None, None) is None


def test_a_process_stat_and_its_memory_io_and_children(tmp_path: Path) -> None:
    proc = tree(tmp_path, {
        "42/stat": STAT, "42/statm": "100 3 0 0 0 0 0\n",
        "42/smaps_rollup": "Rss: 12 kB\nPss: 8 kB\nPrivate_Clean: 1 kB\nPrivate_Dirty: 2 kB\n",
        "42/io": "rchar: 1\nread_bytes: 4096\nwrite_bytes: 0\n", "42/task/42/children": "43 44\n",
        "42/fd/.keep": "",
    })
    stat = processes.read_stat(42, proc)
    assert stat == processes.ProcStat(42, "py thon) x", "S", 7, 11, 99, 256)
    assert processes.read_rss(42, proc) == 3 * processes.PAGE_SIZE
    assert processes.read_memory(42, proc) == (12 * KiB, 8 * KiB)
    assert processes.private_bytes(42, proc) == 3 * KiB
    assert processes.read_io(42, proc) == (4096, 0)
    assert processes.children_of(42, proc) == processes.child_pids(42, proc) == [43, 44]
    reading = processes.read_process(42, proc=proc)
    assert reading == processes.ProcessReading(42, 3 * processes.PAGE_SIZE, 8 * KiB, 1, 11)
    assert processes.read_stat(41, proc) is None and processes.read_process(41, proc=proc) is None
    assert processes.parse_stat("garbage") is None


def test_without_children_files_the_children_come_from_a_scan_of_every_process(tmp_path: Path) -> None:
    child = STAT.replace("42 (py", "43 (py").replace(" S 7 ", " S 42 ")
    proc = tree(tmp_path, {"42/stat": STAT, "43/stat": child, "42/task/42/stat": STAT})
    assert processes.children_of(42, proc) is None
    assert processes.child_pids(42, proc) == [43]
    assert list(processes.tree_of(42, proc)) == [42, 43]


def test_a_container_is_known_by_its_marks(tmp_path: Path) -> None:
    assert container.read_container(tmp_path, {"KUBERNETES_SERVICE_HOST": "10.0.0.1"}) == "kubernetes"
    assert container.read_container(tree(tmp_path / "d", {".dockerenv": ""}), {}) == "docker"
    assert container.read_container(tree(tmp_path / "c", {"proc/1/cgroup": "0::/lxc/payload\n"}), {}) == "lxc"
    assert container.container_mark("0::/init.scope\n") is None


def test_a_process_owner_and_its_mapped_libraries(tmp_path: Path) -> None:
    proc = tree(tmp_path, {"42/maps": "7f00-7f01 r-xp 0 08:1 9 /site-packages/torch/lib/libtorch_cpu.so\n"})
    assert processes.maps_library(42, "libtorch", proc) and not processes.maps_library(42, "libcuda", proc)
    assert processes.owner(42, proc) == os.getuid() and processes.owner(41, proc) is None


def test_the_shm_mount_line_is_the_last_one_at_that_path() -> None:
    mounts = "tmpfs /dev/shm tmpfs rw 0 0\nshm /dev/shm tmpfs rw,size=65536k 0 0\nproc /proc proc rw 0 0\n"
    assert shm.mount_line(mounts, "/dev/shm").startswith("shm /dev/shm")
    assert shm.mount_line(mounts, "/nowhere") == ""


def test_shm_of_a_folder_that_is_not_there(tmp_path: Path) -> None:
    assert shm.read_shm(tmp_path / "none", tmp_path) == shm.Shm(str(tmp_path / "none"), None, None, "")
    assert shm.shm_usage(str(tmp_path / "none")) == (None, None)


def test_segments_say_their_creator_size_and_holders(tmp_path: Path) -> None:
    folder, proc = tmp_path / "shm", tmp_path / "proc"
    tree(folder, {"torch_999999999_1": "x" * 10, "other": ""})
    tree(proc, {"7/maps": f"7f00-7f01 rw-s 0 00:1 5 {folder}/torch_999999999_1 (deleted)\n"})
    found = shm.read_segments(str(folder), proc, now=0.0)
    assert [(s.path, s.creator, s.held_by) for s in found] == [
        (f"{folder}/other", None, ()), (f"{folder}/torch_999999999_1", 999999999, (7,)),
    ]
    assert not any(s.leaked for s in found)  # one is held, the other names no creator
    assert shm.pid_alive(os.getpid()) and not shm.pid_alive(999999999)


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")
def test_the_real_proc_reads_this_process_and_its_child() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(5)"])
    try:
        me = processes.read_process(os.getpid())
        assert me is not None and me.rss > 0 and me.fds > 0 and me.pss is not None
        assert child.pid in processes.child_pids(os.getpid())
        assert child.pid in processes.tree_of(os.getpid())
        assert os.getpid() in processes.all_processes()
        assert processes.read_exe(os.getpid()) == os.path.realpath(sys.executable)
    finally:
        child.kill()
        child.wait()
    info = memory.read_meminfo(Path("/"))
    assert info["MemTotal"] >= info["MemAvailable"] > 0
    left = memory.memory_left_now()
    assert left is not None and 0 < left <= info["MemAvailable"]
    assert 1 <= cpus.effective_cpu_count() <= (os.cpu_count() or 1)
    if Path("/dev/shm").is_dir():
        used, total = shm.shm_usage()
        assert total is not None and used is not None and 0 <= used <= total
        assert shm.read_shm(Path("/dev/shm")).total == total
