"""The real torch DataLoader, measured: the sweep, the monitor, and the soak's failure reports."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

from datalint.diagnosis.bench import BenchConfig, Monitor, soak, sweep
from datalint.diagnosis.doctor import GiB, Limits
from datalint.host.processes import child_pids, read_process
from datalint.scan.specs import resolve_spec

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "datasets"
TENSORS = FIXTURES / "bench_tensors.py"
FAULTY = FIXTURES / "bench_faulty.py"
ROOMY = Limits(shm_bytes=4 * GiB, memory_bytes=16 * GiB, shm_source="test", memory_source="test")


def test_the_monitor_counts_this_process_and_its_children() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(5)"])
    try:
        assert child.pid in child_pids(os.getpid())
        me = read_process(os.getpid())
        assert me is not None and me.rss > 0 and me.fds > 0
        with Monitor() as monitor:
            monitor.sample()
        peaks = monitor.peaks()
        assert peaks.processes >= 2
        assert peaks.rss >= me.rss
    finally:
        child.kill()
        child.wait()


@pytest.mark.slow
def test_a_sweep_measures_each_worker_count_on_the_real_dataloader() -> None:
    dataset = resolve_spec(f"{TENSORS}:make(64, [3, 32, 32], 0.002)")
    config = BenchConfig(batch_size=8, batches=4, workers=(0, 2), timeout=30)
    result = sweep(dataset, config, ROOMY, usable_cpus=2)
    runs = {run.num_workers: run for run in result.runs}
    for run in runs.values():
        assert run.error is None
        assert run.samples_per_s and run.samples_per_s > 0
        assert run.first_batch_s and run.first_batch_s > 0
        assert run.rss_bytes > 0 and run.fds > 0
    # Without workers nothing crosses /dev/shm; with two, every prefetch slot holds a batch there
    # (2 workers x 2 slots x 8 samples x 12 KiB).
    batch = 8 * 3 * 32 * 32 * 4
    assert runs[0].shm_peak_bytes < batch
    assert runs[2].shm_peak_bytes >= 0.9 * 2 * 2 * batch
    # Two workers are two more processes: the summed RSS grows.
    assert runs[2].rss_bytes > runs[0].rss_bytes
    assert result.recommended.num_workers in runs


def test_a_worker_that_is_sigkilled_is_diagnosed_as_out_of_memory_with_its_sample() -> None:
    dataset = resolve_spec(f"{FAULTY}:make(64, kill_at=41)")
    result = soak(dataset, BenchConfig(batch_size=4, batches=1, timeout=30), workers=2, epochs=2)
    assert result.death is not None
    assert result.death.diagnosis.signal == "SIGKILL"
    assert (
        "out of memory" in result.death.diagnosis.cause.lower()
        or "oom" in result.death.diagnosis.cause.lower()
    )
    assert result.death.indices == (41,)  # from the journal: the sample the dead worker was loading
    assert result.death.segment == 1


def test_samples_that_raise_are_recorded_through_the_guard_and_the_soak_goes_on(tmp_path: Path) -> None:
    dataset = resolve_spec(f"{FAULTY}:make(32, raise_at=[3, 17])")
    record = tmp_path / "guard.db"
    result = soak(dataset, BenchConfig(batch_size=4, batches=1), workers=0, epochs=2, record=str(record))
    assert result.guarded and result.death is None
    assert [(f.index, f.error) for f in result.failures] == [
        (3, "ValueError: corrupt sample 3"),
        (17, "ValueError: corrupt sample 17"),
    ]
    assert len(result.segments) == 2 and all(s.samples == 32 for s in result.segments)
    assert record.exists()  # the index `datalint quarantine` and the next scan read


def test_a_dataset_that_keeps_every_sample_alive_shows_as_a_leak() -> None:
    leaking = resolve_spec(f"{FAULTY}:make(32, leak_bytes=1048576)")  # 32 MiB more each epoch
    result = soak(leaking, BenchConfig(batch_size=4, batches=1), workers=0, epochs=5)
    assert result.memory.leak
    assert result.memory.growth_bytes > 64 << 20
    steady = soak(
        resolve_spec(f"{FAULTY}:make(32)"), BenchConfig(batch_size=4, batches=1), workers=0, epochs=5
    )
    assert not steady.memory.leak
