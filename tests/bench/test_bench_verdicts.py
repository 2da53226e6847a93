"""The judgements bench makes from figures: dead-worker diagnoses, diminishing returns, the pick, leaks."""

from __future__ import annotations

from datalint.diagnosis.bench import (
    BenchConfig,
    Run,
    bench_indices,
    diagnose,
    mark_returns,
    memory_trend,
    recommend,
    soak_plan,
)
from datalint.diagnosis.doctor import GiB, Limits, MiB

KILLED = (
    "RuntimeError: DataLoader worker (pid(s) 4242) exited unexpectedly\n"
    "RuntimeError: DataLoader worker (pid 4242) is killed by signal: Killed. "
)
BUS = (
    "RuntimeError: DataLoader worker (pid(s) 77) exited unexpectedly\n"
    "RuntimeError: DataLoader worker (pid 77) is killed by signal: Bus error. "
    "It is possible that dataloader's workers are out of shared memory. "
    "Please try to raise your shared memory limit."
)
ENOSPC = (
    "RuntimeError: Caught RuntimeError in DataLoader worker process 0.\n"
    "Original Traceback (most recent call last):\n"
    "RuntimeError: unable to allocate shared memory(shm) for file </torch_26245_4020102634_0>: "
    "No space left on device (28)"
)
SEGV = "RuntimeError: DataLoader worker (pid 9) is killed by signal: Segmentation fault. "
LIMITS = Limits(shm_bytes=GiB, memory_bytes=10 * GiB, shm_source="test", memory_source="test")
CONFIG = BenchConfig(batch_size=16, batches=10)


def test_sigkill_reads_as_out_of_memory_and_names_the_worker() -> None:
    verdict = diagnose(KILLED)
    assert verdict.signal == "SIGKILL"
    assert "out of memory" in verdict.cause.lower() or "oom" in verdict.cause.lower()
    assert verdict.pids == (4242,)
    assert verdict.message == "RuntimeError: DataLoader worker (pid(s) 4242) exited unexpectedly"


def test_sigbus_and_an_allocation_failure_both_read_as_shared_memory() -> None:
    bus, enospc = diagnose(BUS), diagnose(ENOSPC)
    assert bus.signal == "SIGBUS"
    assert "shared memory" in bus.cause and "shared memory" in enospc.cause
    assert "--shm-size" in bus.fix and "--shm-size" in enospc.fix


TIMED_OUT = "RuntimeError: DataLoader timed out after 60.0 seconds"
# What a worker's queue feeder thread prints when the batch it sends needs /dev/shm that is full:
# multiprocessing drops the batch, and the loader only times out.
FEEDER_TRACEBACK = (
    "Traceback (most recent call last):\n"
    '  File "/usr/lib/python3.11/multiprocessing/queues.py", line 244, in _feed\n'
    "    obj = _ForkingPickler.dumps(obj)\n"
    '  File "torch/multiprocessing/reductions.py", line 613, in reduce_storage\n'
    "    fd, size = storage._share_fd_cpu_()\n"
    "RuntimeError: unable to allocate shared memory(shm) for file </torch_10129_2438757846_1>: "
    "No space left on device (28)\n"
)


def test_a_timeout_after_a_batch_dropped_for_want_of_shared_memory_reads_as_shared_memory() -> None:
    verdict = diagnose(TIMED_OUT, printed=FEEDER_TRACEBACK)
    assert "shared memory" in verdict.cause and "--shm-size" in verdict.fix
    assert verdict.message == TIMED_OUT


def test_a_timeout_with_nothing_printed_about_shared_memory_is_a_hang() -> None:
    assert "hung" in diagnose(TIMED_OUT).cause
    assert "hung" in diagnose(TIMED_OUT, printed="Traceback ...\nValueError: bad sample\n").cause


def test_shared_memory_words_printed_beside_a_signal_do_not_hide_the_signal() -> None:
    assert diagnose(KILLED, printed=FEEDER_TRACEBACK).signal == "SIGKILL"


def test_sigsegv_reads_as_a_native_library() -> None:
    verdict = diagnose(SEGV)
    assert verdict.signal == "SIGSEGV"
    assert "native" in verdict.cause


def test_a_sample_that_raised_is_not_mistaken_for_a_dead_worker() -> None:
    verdict = diagnose(
        "ValueError: Caught ValueError in DataLoader worker process 1.\nValueError: corrupt sample 5"
    )
    assert verdict.signal is None
    assert "raised ValueError" in verdict.cause and "GuardedDataset" in verdict.fix


def run(
    workers: int, speed: float | None, memory: int = GiB, shm: int = 10 * MiB, error: str | None = None
) -> Run:
    return Run(workers, speed, 0.1, 1.0, memory * 2, memory, shm, 10, 20, 100.0, error=error)


def test_slower_and_diminishing_runs_are_marked() -> None:
    marked = mark_returns([run(0, 100), run(1, 190), run(2, 200), run(4, 150)], usable_cpus=2)
    notes = {r.num_workers: r.note for r in marked}
    assert notes[0] == "" and notes[1] == ""
    assert notes[2] == "diminishing returns"  # +5% for another worker
    assert notes[4] == "slower, more workers than 2 CPUs"


def test_the_fastest_fitting_run_is_recommended_with_its_reason() -> None:
    rec = recommend([run(0, 100), run(2, 300), run(4, 200)], LIMITS, CONFIG)
    assert rec.num_workers == 2
    assert "the fastest run" in rec.reason
    assert rec.config["num_workers"] == 2 and rec.config["prefetch_factor"] == 2


def test_fewer_workers_within_5_percent_of_the_fastest_win() -> None:
    rec = recommend([run(2, 296, memory=GiB), run(4, 300, memory=2 * GiB)], LIMITS, CONFIG)
    assert rec.num_workers == 2
    assert "within 5% of the fastest (4 workers" in rec.reason and "1.0 GiB less memory" in rec.reason


def test_a_run_past_the_headroom_or_failed_is_not_recommended() -> None:
    runs = [run(0, 100), run(2, 300, memory=9 * GiB), run(4, None, error="boom")]
    rec = recommend(runs, LIMITS, CONFIG)
    assert rec.num_workers == 0
    assert "2 workers 9.0 GiB of memory is over 80%" in rec.reason
    assert recommend([run(4, None, error="boom")], LIMITS, CONFIG).num_workers is None


def test_a_steady_climb_is_a_leak_and_noise_is_not() -> None:
    climb = memory_trend([500 * MiB + i * 40 * MiB for i in range(6)])
    assert climb.leak and climb.slope_bytes > 0 and "leak" in climb.detail
    flat = memory_trend([500 * MiB, 530 * MiB, 520 * MiB, 525 * MiB, 522 * MiB, 524 * MiB])
    assert not flat.leak
    assert not memory_trend([1, 2]).leak  # too few readings to judge


def test_soak_plans_epochs_as_passes_and_steps_as_about_ten_readings() -> None:
    epochs = soak_plan(length=100, batch_size=32, epochs=3, steps=None)
    assert [(leg.steps, leg.samples, leg.new_epoch) for leg in epochs] == [(4, 100, True)] * 3
    steps = soak_plan(length=100, batch_size=4, epochs=None, steps=25)
    assert [leg.steps for leg in steps] == [3] * 8 + [1]
    assert [leg.new_epoch for leg in steps] == [True] + [False] * 8


def test_every_run_loads_the_same_indices_wrapping_a_short_dataset() -> None:
    assert bench_indices(length=5, batch_size=2, batches=4) == [0, 1, 2, 3, 4, 0, 1, 2]
