"""`datalint doctor --after` on real processes: a segment left by a SIGKILLed process is found and
cleaned, a live process's segment is left alone. A private directory stands in for /dev/shm
(--shm-dir), so the machine's own segments are never touched."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# Writes a torch-style segment named after its own pid, like libshm's /torch_<pid>_<random>_<n>,
# then waits (killed) or holds it open (live).
WRITER = """
import os, sys, time
path = os.path.join(sys.argv[1], f"torch_{os.getpid()}_1234_0")
fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o600)
os.write(fd, b"x" * (1 << 20))
print(path, flush=True)
time.sleep(60)
"""


def _start_writer(shm_dir: Path) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(shm_dir)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    return proc, proc.stdout.readline().strip()


def _doctor_after(shm_dir: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "datalint", "doctor", "--after", "--shm-dir", str(shm_dir), *flags],
        capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)}, check=False,
    )


def test_a_killed_process_segment_is_found_and_cleaned_and_a_live_one_is_left(tmp_path: Path) -> None:
    killed, leaked_path = _start_writer(tmp_path)
    live, live_path = _start_writer(tmp_path)
    try:
        killed.send_signal(signal.SIGKILL)  # what the OOM killer does to a worker
        killed.wait(timeout=10)
        time.sleep(0.1)

        report = _doctor_after(tmp_path, "--format", "json")
        segments = {s["path"]: s for s in json.loads(report.stdout)["segments"]}
        assert segments[leaked_path]["leaked"] is True
        assert segments[leaked_path]["creator"] == killed.pid
        assert segments[leaked_path]["size"] >= 1 << 20
        assert segments[live_path]["leaked"] is False
        assert live.pid in segments[live_path]["held_by"]

        text = _doctor_after(tmp_path)
        assert "leaked shared memory  1 segment(s), 1.0 MiB" in text.stdout
        assert f"(creator pid {killed.pid} gone)" in text.stdout
        assert "datalint doctor --after --clean-shm" in text.stdout

        cleaned = _doctor_after(tmp_path, "--clean-shm")
        assert f"clean {leaked_path}: removed" in cleaned.stdout
        assert not Path(leaked_path).exists()
        assert Path(live_path).exists()
    finally:
        live.kill()
        live.wait()


def test_clean_shm_without_after_is_a_usage_error(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "datalint", "doctor", "--clean-shm"], capture_output=True, text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=60, check=False,
    )
    assert done.returncode == 2
    assert "--clean-shm goes with --after" in done.stderr


def test_a_zombie_worker_is_named_with_a_command_for_its_parent(tmp_path: Path) -> None:
    # a parent that forks a child and never reaps it: the child stays a zombie
    parent = subprocess.Popen(
        [sys.executable, "-c", "import os, time\nif os.fork() == 0:\n    os._exit(0)\ntime.sleep(60)\n"],
    )
    try:
        time.sleep(0.5)
        report = json.loads(_doctor_after(tmp_path, "--format", "json").stdout)
        zombies = [p for p in report["leftovers"] if p["ppid"] == parent.pid]
        assert len(zombies) == 1 and zombies[0]["state"] == "zombie"
        assert zombies[0]["fix"].startswith(f"kill -TERM {parent.pid}")
    finally:
        parent.kill()
        parent.wait()
