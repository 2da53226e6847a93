"""`datalint run` on real processes: a real DataLoader whose worker is SIGKILLed mid-epoch, exit
status and signal pass-through, and the GPU columns through a fake nvidia-smi on PATH."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

TRAIN = textwrap.dedent(
    """
    import os, signal, sys, time
    import torch
    from torch.utils.data import DataLoader, Dataset

    class Slow(Dataset):
        def __len__(self):
            return 2000
        def __getitem__(self, i):
            time.sleep(0.005)
            return torch.zeros(256, 256)

    if __name__ == "__main__":
        loader = DataLoader(Slow(), batch_size=4, num_workers=2)
        iterator = iter(loader)
        started = time.monotonic()
        for step, batch in enumerate(iterator):
            if time.monotonic() - started > 2.5:
                # what the OOM killer does to a worker
                os.kill(iterator._workers[1].pid, signal.SIGKILL)
                time.sleep(0.5)
            time.sleep(0.01)
    """
)


def datalint_run(tmp_path: Path, *command: str, env: dict[str, str] | None = None,
                 **kwargs: object) -> subprocess.CompletedProcess[str]:
    record = tmp_path / "run.db"
    return subprocess.run(
        [sys.executable, "-m", "datalint", "run", "--record", str(record), "--", *command],
        capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env or _env(), **kwargs,  # type: ignore[call-overload]
    )


def _env(**extra: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), **extra}


def _rows(db: Path, sql: str) -> list[tuple[object, ...]]:
    with sqlite3.connect(db) as conn:
        return conn.execute(sql).fetchall()


@pytest.mark.slow
def test_a_worker_killed_mid_epoch_is_named_with_its_signal_and_the_curve_is_recorded(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(TRAIN)
    done = datalint_run(tmp_path, sys.executable, "train.py")

    assert done.returncode == 1, done.stderr  # torch raises in the main process: Python exits 1
    assert "DataLoader worker" in done.stderr  # the training's own output is passed through
    started = "SELECT pid FROM events WHERE role = 'worker 1' AND kind = 'start'"
    worker_pids = [pid for (pid,) in _rows(tmp_path / "run.db", started)]
    assert len(worker_pids) == 1
    assert f"worker 1 (pid {worker_pids[0]}) killed by SIGKILL" in done.stderr
    assert "memory peak: tree" in done.stderr and "/dev/shm peak" in done.stderr
    curve = _rows(tmp_path / "run.db", "SELECT role, count(*), min(rss), max(rss) FROM processes GROUP BY 1")
    by_role = {role: (count, low, high) for role, count, low, high in curve}
    assert by_role["main"][0] >= 2 and by_role["worker 1"][0] >= 1
    assert all(high is not None and high > 0 for _, _, high in by_role.values())
    # PSS (smaps_rollup) is read every few seconds: the first sample of the run has it
    assert _rows(tmp_path / "run.db", "SELECT count(*) FROM processes WHERE pss > 0")[0][0] >= 1
    # what the record cost is in the record: the recorder's own CPU, a share of one core a second
    own = [share for (share,) in _rows(tmp_path / "run.db", "SELECT recorder_cpu FROM system ORDER BY t")]
    assert own[0] is None and len(own) >= 2 and all(0 <= share < 1 for share in own[1:])


def test_the_exit_status_and_output_pass_through_untouched(tmp_path: Path) -> None:
    done = datalint_run(tmp_path, sys.executable, "-c", "import sys; print('out\\tline'); sys.exit(3)")
    assert done.returncode == 3
    assert done.stdout == "out\tline\n"
    assert "main (pid" in done.stderr and "exited with 3" in done.stderr


def test_a_signal_sent_to_datalint_reaches_the_child(tmp_path: Path) -> None:
    record = tmp_path / "run.db"
    proc = subprocess.Popen(
        [sys.executable, "-m", "datalint", "run", "--record", str(record), "--",
         sys.executable, "-c", "import time; print('ready', flush=True); time.sleep(60)"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(),
    )
    assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 128 + signal.SIGTERM, stderr
    assert "killed by SIGTERM" in stderr


def test_gpu_columns_come_from_nvidia_smi_on_path(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "nvidia-smi"
    fake.write_text("#!/bin/sh\necho '0, 1234, 81559, 37'\n")
    fake.chmod(0o755)
    env = _env(PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    done = datalint_run(tmp_path, sys.executable, "-c", "import time; time.sleep(1.5)", env=env)
    assert done.returncode == 0, done.stderr
    assert "no GPU readable" not in done.stderr
    rows = _rows(tmp_path / "run.db", "SELECT gpu_memory_used, gpu_memory_total, gpu_utilization FROM system")
    assert rows and rows[0] == (1234 * 2**20, 81559 * 2**20, 37)
    assert _rows(tmp_path / "run.db", "SELECT gpu_source FROM run") == [("nvidia-smi",)]


def test_no_gpu_is_said_once_not_an_error(tmp_path: Path) -> None:
    env = _env(PATH=str(Path(sys.executable).parent))
    done = datalint_run(tmp_path, sys.executable, "-c", "pass", env=env)
    assert done.returncode == 0
    assert done.stderr.count("no GPU readable") == 1


def test_a_command_that_cannot_start_is_a_usage_error(tmp_path: Path) -> None:
    done = datalint_run(tmp_path, str(tmp_path / "missing-binary"))
    assert done.returncode == 2
    assert "cannot start" in done.stderr and "internal error" not in done.stderr


def _memory_bound_to_v1() -> bool:
    """Whether the memory controller belongs to a v1 hierarchy (/proc/cgroups: a non-zero hierarchy
    id): then no cgroup2 mount, even one made by root, can enable it."""
    try:
        rows = [line.split() for line in Path("/proc/cgroups").read_text().splitlines()[1:]]
    except OSError:
        return False
    return any(row[0] == "memory" and row[1] != "0" for row in rows if len(row) >= 2)


def _cgroup_v2_scope_available() -> str | None:
    if _memory_bound_to_v1():
        return ("the memory controller is bound to a cgroup v1 hierarchy here (/proc/cgroups): a cgroup2 "
                "mount offers no memory.max, so no v2 memory limit can be set")
    if not Path("/sys/fs/cgroup/cgroup.controllers").exists():
        return "no cgroup2 file system at /sys/fs/cgroup: no v2 memory limit to set"
    probe = subprocess.run(["systemd-run", "--user", "--scope", "-q", "-p", "MemoryMax=64M", "true"],
                           capture_output=True, text=True, timeout=30, check=False)
    if probe.returncode != 0:
        return f"systemd-run --user --scope cannot set MemoryMax here: {probe.stderr.strip()[:200]}"
    return None


def test_a_real_cgroup_memory_limit_is_diagnosed_as_out_of_memory(tmp_path: Path) -> None:
    reason = _cgroup_v2_scope_available()
    if reason:
        pytest.skip(reason)
    allocate = "import time\nkept = []\nwhile True:\n    kept.append(bytearray(8 << 20)); time.sleep(0.02)\n"
    (tmp_path / "grow.py").write_text(allocate)
    started = time.monotonic()
    done = subprocess.run(
        ["systemd-run", "--user", "--scope", "-q", "-p", "MemoryMax=200M", "-p", "MemorySwapMax=0",
         sys.executable, "-m", "datalint", "run", "--record", str(tmp_path / "run.db"), "--",
         sys.executable, "grow.py"],
        capture_output=True, text=True, timeout=120, cwd=tmp_path, env=_env(), check=False,
    )
    assert time.monotonic() - started < 120
    assert done.returncode == 128 + signal.SIGKILL, done.stderr
    assert "out of memory: the cgroup's memory.events counted an OOM kill" in done.stderr
