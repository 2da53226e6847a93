"""Reading the limits: fake /proc + /sys trees for cgroup v2, v1 and none, and the real machine."""

from __future__ import annotations

import os
import resource
from pathlib import Path

from doctor_support import MEMINFO, write_tree

from datalint.diagnosis.doctor import check_shm, read_host, usable_cpus
from datalint.host.cgroup import read_cgroup
from datalint.host.container import read_container
from datalint.host.cpus import effective_cpu_count
from datalint.host.memory import read_meminfo
from datalint.scan.api import ScanOptions
from datalint.units import GiB, KiB, MiB


def test_cgroup_v2_takes_the_tightest_limit_of_the_cgroup_and_its_parents(tmp_path: Path) -> None:
    root = write_tree(
        tmp_path,
        {
            "proc/self/cgroup": "0::/jobs.slice/job42\n",
            "sys/fs/cgroup/cgroup.controllers": "cpu memory pids\n",
            "sys/fs/cgroup/jobs.slice/memory.max": "max\n",
            "sys/fs/cgroup/jobs.slice/cpu.max": "150000 100000\n",
            "sys/fs/cgroup/jobs.slice/job42/memory.max": f"{2 * GiB}\n",
            "sys/fs/cgroup/jobs.slice/job42/memory.current": f"{GiB}\n",
            "sys/fs/cgroup/jobs.slice/job42/cpu.max": "max 100000\n",
            "sys/fs/cgroup/jobs.slice/job42/pids.max": "max\n",
        },
    )
    cg = read_cgroup(root)
    assert cg is not None
    assert (cg.version, cg.path) == (2, "/jobs.slice/job42")
    assert cg.memory_limit == 2 * GiB
    assert cg.memory_usage == GiB
    assert cg.cpu_quota == 1.5  # the parent's quota binds although the job's own says max
    assert cg.pids_limit is None


def test_cgroup_v2_inside_a_namespace_reads_the_limit_at_the_mount_root(tmp_path: Path) -> None:
    # In a container with its own cgroup namespace, /proc/self/cgroup says "/" and the container's
    # limits sit at the root of the mount.
    root = write_tree(
        tmp_path,
        {
            "proc/self/cgroup": "0::/\n",
            "sys/fs/cgroup/cgroup.controllers": "cpu memory pids\n",
            "sys/fs/cgroup/memory.max": f"{4 * GiB}\n",
            "sys/fs/cgroup/memory.current": f"{512 * MiB}\n",
            "sys/fs/cgroup/cpu.max": "200000 100000\n",
            "sys/fs/cgroup/pids.max": "128\n",
        },
    )
    cg = read_cgroup(root)
    assert cg is not None
    assert (cg.memory_limit, cg.memory_usage, cg.cpu_quota, cg.pids_limit) == (4 * GiB, 512 * MiB, 2.0, 128)


def test_cgroup_v1_reads_each_controller_where_it_is_mounted(tmp_path: Path) -> None:
    root = write_tree(
        tmp_path,
        {
            "proc/self/cgroup": (
                "12:pids:/docker/abc\n4:memory:/docker/abc\n3:cpu,cpuacct:/docker/abc\n1:name=systemd:/\n"
            ),
            "sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n",
            "sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes": f"{512 * MiB}\n",
            "sys/fs/cgroup/memory/docker/abc/memory.usage_in_bytes": f"{100 * MiB}\n",
            "sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_quota_us": "200000\n",
            "sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_period_us": "100000\n",
            "sys/fs/cgroup/pids/docker/abc/pids.max": "64\n",
        },
    )
    cg = read_cgroup(root)
    assert cg is not None
    assert (cg.version, cg.path) == (1, "/docker/abc")
    assert (cg.memory_limit, cg.memory_usage, cg.cpu_quota, cg.pids_limit) == (512 * MiB, 100 * MiB, 2.0, 64)


def test_cgroup_v1_without_limits_reports_none_rather_than_a_huge_number(tmp_path: Path) -> None:
    root = write_tree(
        tmp_path,
        {
            "proc/self/cgroup": "4:memory:/process_api/xyz\n3:cpu:/\n",
            "sys/fs/cgroup/memory/process_api/xyz/memory.limit_in_bytes": "9223372036854771712\n",
            "sys/fs/cgroup/memory/process_api/xyz/memory.usage_in_bytes": "979000000\n",
            "sys/fs/cgroup/cpu/cpu.cfs_quota_us": "-1\n",
            "sys/fs/cgroup/cpu/cpu.cfs_period_us": "100000\n",
        },
    )
    cg = read_cgroup(root)
    assert cg is not None
    assert (cg.memory_limit, cg.memory_usage, cg.cpu_quota, cg.pids_limit) == (None, 979000000, None, None)


def test_the_scan_sizes_its_pool_by_the_cpus_doctor_reports(tmp_path: Path) -> None:
    # A one-CPU quota on the parent of a v1 cgroup mounted as cpu,cpuacct binds the scan as it
    # binds doctor's verdict: one rule, read one way, for both.
    root = write_tree(
        tmp_path,
        {
            "proc/self/cgroup": "3:cpu,cpuacct:/batch/job7\n",
            "sys/fs/cgroup/cpu,cpuacct/batch/cpu.cfs_quota_us": "100000\n",
            "sys/fs/cgroup/cpu,cpuacct/batch/cpu.cfs_period_us": "100000\n",
            "sys/fs/cgroup/cpu,cpuacct/batch/job7/cpu.cfs_quota_us": "-1\n",
            "sys/fs/cgroup/cpu,cpuacct/batch/job7/cpu.cfs_period_us": "100000\n",
        },
    )
    facts = read_host(root=root, shm_path=tmp_path / "shm", env={}, cv2_threads=lambda: None)
    assert usable_cpus(facts) == effective_cpu_count(root) == 1
    on_this_machine = read_host(cv2_threads=lambda: None)
    assert usable_cpus(on_this_machine) == effective_cpu_count() == ScanOptions().worker_count()


def test_no_cgroup_filesystem_means_no_cgroup(tmp_path: Path) -> None:
    root = write_tree(tmp_path, {"proc/self/cgroup": "0::/\n"})
    assert read_cgroup(root) is None
    assert read_cgroup(tmp_path / "nothing-here") is None


def test_meminfo_is_read_in_bytes(tmp_path: Path) -> None:
    info = read_meminfo(write_tree(tmp_path, {"proc/meminfo": MEMINFO}))
    assert info["MemTotal"] == 65536000 * KiB
    assert info["MemAvailable"] == 60000000 * KiB
    assert info["SwapTotal"] == 2 * GiB


def test_container_is_recognised_from_the_marks_runtimes_leave(tmp_path: Path) -> None:
    assert read_container(write_tree(tmp_path / "d", {".dockerenv": ""}), {}) == "docker"
    assert read_container(write_tree(tmp_path / "p", {"run/.containerenv": ""}), {}) == "podman"
    assert read_container(
        write_tree(tmp_path / "k", {"proc/1/cgroup": "0::/kubepods/burstable/pod1\n"}), {}
    ) == ("kubepods")
    assert read_container(tmp_path / "none", {"KUBERNETES_SERVICE_HOST": "10.0.0.1"}) == "kubernetes"
    assert read_container(write_tree(tmp_path / "host", {"proc/1/cgroup": "0::/init.scope\n"}), {}) is None


def test_a_whole_fake_host_is_read_from_its_root(tmp_path: Path) -> None:
    root = write_tree(
        tmp_path / "root",
        {
            "proc/meminfo": MEMINFO,
            "proc/self/cgroup": "0::/\n",
            "proc/mounts": f"tmpfs {tmp_path / 'shm'} tmpfs rw,size=65536k 0 0\n",
            "sys/fs/cgroup/cgroup.controllers": "memory\n",
            "sys/fs/cgroup/memory.max": f"{GiB}\n",
            ".dockerenv": "",
        },
    )
    (tmp_path / "shm").mkdir()
    facts = read_host(
        root=root, shm_path=tmp_path / "shm", env={"OMP_NUM_THREADS": "1"}, cv2_threads=lambda: 4
    )
    assert facts.meminfo["MemTotal"] == 65536000 * KiB
    assert facts.cgroup is not None and facts.cgroup.memory_limit == GiB
    assert facts.container == "docker"
    assert facts.shm.mount.startswith("tmpfs ")
    assert facts.env == {"OMP_NUM_THREADS": "1"}
    assert facts.cv2_threads == 4


def test_a_missing_shared_memory_mount_fails_the_shm_check(tmp_path: Path) -> None:
    facts = read_host(root=tmp_path, shm_path=tmp_path / "no-shm", env={}, cv2_threads=lambda: None)
    assert facts.shm.total is None
    assert check_shm(facts).status == "fail"


def test_the_real_machine_reads_consistently() -> None:
    facts = read_host()
    assert facts.meminfo["MemTotal"] > 0
    assert facts.cpu_count == os.cpu_count()
    usable = usable_cpus(facts)
    assert usable is not None and 1 <= usable <= (os.cpu_count() or 1)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    assert facts.rlimits["NOFILE"] == (
        -1 if soft == resource.RLIM_INFINITY else soft,
        -1 if hard == resource.RLIM_INFINITY else hard,
    )
    if os.path.isdir("/dev/shm"):
        assert facts.shm.total and facts.shm.total > 0
        assert facts.shm.free is not None and 0 <= facts.shm.free <= facts.shm.total
    assert facts.start_method in ("fork", "spawn", "forkserver")
