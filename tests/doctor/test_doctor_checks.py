"""Each check judged on hand-built facts: what a user sees for a small shm, a quota, low limits."""

from __future__ import annotations

from doctor_support import HOST_CHECK_NAMES, cgroup, facts

import datalint
from datalint.diagnosis.doctor import (
    GiB,
    MiB,
    check_cpu,
    check_memory,
    check_open_files,
    check_processes,
    check_shm,
    check_start_method,
    check_threads,
    host_checks,
    memory_budget,
    usable_cpus,
    worst_status,
)
from datalint.host.shm import Shm


def test_docker_default_shm_is_called_out_with_the_fixes() -> None:
    check = check_shm(facts(shm=Shm("/dev/shm", 64 * MiB, 64 * MiB), container="docker"))
    assert check.status == "warn"
    assert "64.0 MiB total" in check.value
    assert "Docker's default --shm-size" in check.detail and "docker" in check.detail
    assert "--shm-size" in check.fix and "emptyDir" in check.fix and "--ipc=host" in check.fix


def test_a_roomy_shm_is_ok_and_a_nearly_full_one_warns() -> None:
    assert check_shm(facts()).status == "ok"
    full = check_shm(facts(shm=Shm("/dev/shm", 8 * GiB, GiB)))
    assert full.status == "warn"
    assert "torch_*" in full.detail


def test_the_cgroup_limit_not_the_host_is_named_as_what_the_oom_killer_enforces() -> None:
    check = check_memory(facts(cgroup=cgroup(memory_limit=2 * GiB, memory_usage=GiB // 2)))
    assert check.status == "ok"
    assert "cgroup v2 limit 2.0 GiB" in check.value
    assert "2.0 GiB" in check.detail and "64.0 GiB" in check.detail and "OOM killer" in check.detail


def test_a_cgroup_nearly_at_its_limit_warns() -> None:
    check = check_memory(facts(cgroup=cgroup(version=1, memory_limit=2 * GiB, memory_usage=1950 * MiB)))
    assert check.status == "warn"
    assert "page cache" in check.detail  # v1 usage includes it; the user should know


def test_memory_budget_is_the_smaller_of_host_available_and_cgroup_room() -> None:
    assert memory_budget(facts()) == 60 * GiB
    assert memory_budget(facts(cgroup=cgroup(memory_limit=4 * GiB, memory_usage=GiB))) == 3 * GiB


def test_cpu_count_above_the_quota_warns_and_names_the_usable_number() -> None:
    host = facts(cpu_count=64, affinity=64, cgroup=cgroup(cpu_quota=2.0))
    assert usable_cpus(host) == 2
    check = check_cpu(host)
    assert check.status == "warn"
    assert "os.cpu_count() reports 64" in check.detail
    assert "base num_workers on 2" in check.fix


def test_affinity_narrower_than_the_count_is_what_counts() -> None:
    assert usable_cpus(facts(cpu_count=8, affinity=4)) == 4
    assert usable_cpus(facts(cgroup=cgroup(cpu_quota=0.5))) == 1  # a fraction of a CPU is still one worker's
    assert check_cpu(facts()).status == "ok"


def test_few_open_files_warn_only_under_the_file_descriptor_strategy() -> None:
    low = {"NOFILE": (1024, 4096), "NPROC": (100000, 100000), "AS": (-1, -1), "MEMLOCK": (0, 0)}
    check = check_open_files(facts(rlimits=low))
    assert check.status == "warn"
    assert "ulimit -n" in check.fix and "file_system" in check.fix
    assert check_open_files(facts(rlimits=low, sharing_strategy="file_system")).status == "ok"


def test_a_virtual_memory_cap_and_a_low_pids_limit_warn() -> None:
    capped = {
        "NOFILE": (65536, 65536),
        "NPROC": (100000, 100000),
        "AS": (4 * GiB, 4 * GiB),
        "MEMLOCK": (0, 0),
    }
    assert check_processes(facts(rlimits=capped)).status == "warn"
    assert check_processes(facts(cgroup=cgroup(pids_limit=64))).status == "warn"
    assert check_processes(facts()).status == "ok"


def test_start_method_explains_what_must_pickle() -> None:
    assert "forkserver" in check_start_method(facts()).detail  # the 3.14 change is named under fork
    assert "pickled" in check_start_method(facts(start_method="spawn")).detail


def test_opencv_threads_warn_only_when_workers_would_oversubscribe_the_cpus() -> None:
    host = facts(cpu_count=4, affinity=4, cv2_threads=4)
    assert check_threads(host).status == "ok"
    check = check_threads(host, num_workers=4)
    assert check.status == "warn"
    assert "cv2.setNumThreads(0)" in check.fix


def test_tokenizers_without_its_parallelism_setting_warns() -> None:
    libs = {"torch": "2.13.0", "tokenizers": "0.20.0"}
    assert check_threads(facts(libraries=libs)).status == "warn"
    assert check_threads(facts(libraries=libs, env={"TOKENIZERS_PARALLELISM": "false"})).status == "ok"


def test_every_host_check_reports_a_status_value_and_detail() -> None:
    checks = host_checks(facts())
    assert [c.name for c in checks] == HOST_CHECK_NAMES
    assert all(c.status in ("ok", "warn", "fail") and c.value and c.detail for c in checks)
    assert worst_status(checks) == "ok"
    assert worst_status([*checks, check_shm(facts(shm=Shm("/dev/shm", None, None)))]) == "fail"


def test_without_facts_the_host_checks_judge_this_machine() -> None:
    checks = datalint.host_checks()
    assert [c.name for c in checks] == HOST_CHECK_NAMES
    assert all(c.status in ("ok", "warn", "fail") and c.value for c in checks)
