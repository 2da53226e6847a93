"""A real 64 MiB /dev/shm (Docker's default), in a private mount namespace: doctor predicts, bench sees.

Needs root (or CAP_SYS_ADMIN) for `unshare -m` and a tmpfs mount; the host's /dev/shm is never
touched, since the mount exists only inside the namespace. Skipped, with the reason, elsewhere.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "datasets"
IMAGENET_LIKE = f"{FIXTURES / 'bench_tensors.py'}:imagenet_like"
MOUNT_SMALL_SHM = "mount -t tmpfs -o size=64m tmpfs /dev/shm"


def in_small_shm(command: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    """Run a shell command where /dev/shm is a fresh 64 MiB tmpfs."""
    return subprocess.run(
        ["unshare", "-m", "--propagation", "private", "sh", "-c", f"{MOUNT_SMALL_SHM} && {command}"],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture(scope="module")
def small_shm_allowed() -> None:
    if shutil.which("unshare") is None:
        pytest.skip("no `unshare` on this machine: cannot make a private /dev/shm")
    probe = in_small_shm("df -k /dev/shm", timeout=30)
    if probe.returncode != 0:
        pytest.skip(f"cannot mount a private 64 MiB /dev/shm here (needs root): {probe.stderr.strip()}")


# One interpreter runs the three commands through the real CLI entry point: torch is imported once.
DRIVER = """
import contextlib, json, sys
from datalint.cli import main

out_dir, spec = sys.argv[1], sys.argv[2]
bench = ["bench", "--format", "json", "--dataset", spec, "--workers", "2", "--batches", "2", "--warmup", "1"]
commands = {
    "doctor": ["doctor", "--format", "json", "--dataset", spec, "--batch-size", "64", "--num-workers", "2",
               "--samples", "8"],
    "big": [*bench, "--batch-size", "64"],
    "small": [*bench, "--batch-size", "8"],
}
for name, args in commands.items():
    with open(f"{out_dir}/{name}.json", "w") as out, contextlib.redirect_stdout(out):
        code = main(args)
    with open(f"{out_dir}/{name}.rc", "w") as rc:
        rc.write(str(code))
"""


@pytest.mark.slow
def test_doctor_and_bench_agree_on_a_64_mib_shm(small_shm_allowed: None, tmp_path: Path) -> None:
    driver = tmp_path / "driver.py"
    driver.write_text(DRIVER)
    result = in_small_shm(f"{sys.executable} {driver} {tmp_path} {IMAGENET_LIKE}")
    assert result.returncode == 0, result.stderr[-3000:]

    doctor_report = json.loads((tmp_path / "doctor.json").read_text())
    checks = {c["name"]: c for c in doctor_report["checks"]}
    assert checks["shared memory"]["status"] == "warn"
    assert "64.0 MiB total" in checks["shared memory"]["value"]
    assert checks["loader shared memory"]["status"] == "fail"  # 147 MiB in flight
    assert (tmp_path / "doctor.rc").read_text() == "1"

    # What doctor predicted happens: 2 workers with 36.8 MiB batches run out of shared memory.
    big = json.loads((tmp_path / "big.json").read_text())
    (run,) = big["runs"]
    assert run["error"] is not None
    assert "shared memory" in run["diagnosis"]["cause"]
    assert big["recommended"]["num_workers"] is None
    assert (tmp_path / "big.rc").read_text() == "1"

    # And 4.6 MiB batches fit: 4 in flight are 18 MiB.
    small = json.loads((tmp_path / "small.json").read_text())
    (run,) = small["runs"]
    assert run["error"] is None
    assert 2 * 8 * 3 * 224 * 224 * 4 < run["shm_peak_bytes"] < 64 << 20  # batches in flight, in 64 MiB
    assert small["limits"]["shm_bytes"] <= 64 << 20
    assert small["recommended"]["num_workers"] == 2
