"""The loader estimate: batch bytes, shm in flight, host peak, and what fits, against the limits."""

from __future__ import annotations

from doctor_support import facts

from datalint.diagnosis.doctor import (
    GiB,
    Limits,
    LoaderConfig,
    MiB,
    estimate_checks,
    estimate_loader,
    limits_from,
    percentile,
    sample_sizes,
)

IMAGE = 3 * 224 * 224 * 4  # one float32 3x224x224 sample: 588 KiB
SHM_64M = Limits(shm_bytes=64 * MiB, memory_bytes=16 * GiB, shm_source="--shm-bytes", memory_source="test")


def judge(batch_size: int, workers: int, limits: Limits = SHM_64M, **config: object) -> dict[str, str]:
    estimate = estimate_loader(LoaderConfig(batch_size, workers, **config), sample_sizes([IMAGE]), limits)  # type: ignore[arg-type]
    return {c.name: c.status for c in estimate_checks(estimate)}


def test_a_config_that_cannot_fit_in_64_mib_of_shm_fails() -> None:
    # 2 workers x 2 prefetched batches x 64 x 588 KiB = 147 MiB: the research reproduction's failure.
    estimate = estimate_loader(LoaderConfig(64, 2), sample_sizes([IMAGE]), SHM_64M)
    assert estimate.shm_in_flight == 4 * 64 * IMAGE
    shm = estimate_checks(estimate)[0]
    assert (shm.name, shm.status) == ("loader shared memory", "fail")
    assert "147.0 MiB in flight of 64.0 MiB" in shm.value
    assert "2 x 2 x 36.8 MiB = 147.0 MiB" in shm.detail  # the formula, with the numbers
    assert "batch_size <= 22" in shm.fix and "--shm-size=1g" in shm.fix


def test_a_config_that_fits_in_64_mib_passes() -> None:
    assert judge(8, 2) == {"loader shared memory": "ok", "loader host memory": "ok"}  # 18.4 MiB in flight


def test_between_the_headroom_and_the_limit_warns() -> None:
    assert judge(24, 2)["loader shared memory"] == "warn"  # 55 MiB: fits, but within 20% of 64 MiB


def test_no_workers_put_nothing_in_shared_memory() -> None:
    estimate = estimate_loader(LoaderConfig(64, 0), sample_sizes([IMAGE]), SHM_64M)
    assert estimate.shm_in_flight == 0
    assert estimate_checks(estimate)[0].status == "ok"


def test_largest_worker_count_and_batch_size_that_fit_are_reported() -> None:
    estimate = estimate_loader(LoaderConfig(64, 2), sample_sizes([IMAGE]), SHM_64M)
    assert estimate.max_workers == 0  # even one worker's 2 batches (73.5 MiB) overflow
    assert estimate.max_batch_size == 22  # 22 x 4 x 588 KiB = 50.5 MiB <= 80% of 64 MiB; 23 is over
    small = estimate_loader(LoaderConfig(8, 2), sample_sizes([IMAGE]), SHM_64M)
    assert small.max_workers == 5  # 5 x 2 x 4.6 MiB = 46 MiB <= 51.2 MiB


def test_host_memory_counts_every_buffer_and_each_workers_footprint() -> None:
    sizes = sample_sizes([IMAGE], worker_footprint=200 * MiB)
    limits = Limits(shm_bytes=None, memory_bytes=GiB, shm_source="-", memory_source="--memory-bytes")
    estimate = estimate_loader(LoaderConfig(64, 4), sizes, limits)
    batch = 64 * IMAGE
    assert estimate.peak_host == (4 * 2 + 1) * batch + 4 * 200 * MiB
    host = estimate_checks(estimate)[1]
    assert host.status == "fail"
    assert "(num_workers x prefetch_factor + 1) x batch bytes + num_workers x worker footprint" in host.detail
    pinned = estimate_loader(LoaderConfig(64, 4, pin_memory=True), sizes, limits)
    assert pinned.peak_host == estimate.peak_host + batch


def test_the_batch_is_sized_from_the_p99_sample_not_the_median() -> None:
    sizes = sample_sizes([1000] * 95 + [4000] * 5)
    assert (sizes.p50, sizes.p99, sizes.largest) == (1000, 4000, 4000)
    estimate = estimate_loader(LoaderConfig(10, 1), sizes, SHM_64M)
    assert (estimate.batch_bytes_p50, estimate.batch_bytes_p99) == (10_000, 40_000)


def test_percentile_is_a_measured_value() -> None:
    values = list(range(1, 101))
    assert (percentile(values, 50), percentile(values, 99), percentile(values, 100)) == (50, 99, 100)
    assert percentile([7], 99) == 7
    assert percentile([], 50) == 0


def test_overrides_replace_the_limits_read_here() -> None:
    host = facts()
    read = limits_from(host)
    assert (read.shm_bytes, read.memory_bytes) == (8 * GiB, 60 * GiB)
    cluster = limits_from(host, shm_bytes=64 * MiB, memory_bytes=16 * GiB)
    assert (cluster.shm_bytes, cluster.memory_bytes) == (64 * MiB, 16 * GiB)
    assert (cluster.shm_source, cluster.memory_source) == ("--shm-bytes", "--memory-bytes")


def test_more_workers_than_usable_cpus_warn_and_the_suggestion_is_capped_by_them() -> None:
    # 8 workers on 2 CPUs: memory alone would allow 256 workers of 1 KB samples; the CPUs allow 2.
    limits = Limits(shm_bytes=8 * GiB, memory_bytes=16 * GiB, shm_source="test", memory_source="test")
    estimate = estimate_loader(LoaderConfig(8, 8), sample_sizes([1000]), limits, usable_cpus=2)
    assert (estimate.max_workers, estimate.memory_max_workers) == (2, 256)
    workers = {c.name: c for c in estimate_checks(estimate)}["loader workers"]
    assert workers.status == "warn"
    assert "8 workers on 2 usable CPUs" in workers.detail
    assert workers.fix.startswith("num_workers=2 or fewer") and "--workers 0,1,2" in workers.fix


def test_workers_within_the_cpus_are_ok_and_memory_still_caps_below_them() -> None:
    fine = estimate_loader(LoaderConfig(8, 2), sample_sizes([IMAGE]), SHM_64M, usable_cpus=16)
    assert {c.name: c.status for c in estimate_checks(fine)}["loader workers"] == "ok"
    assert fine.max_workers == fine.memory_max_workers == 5  # shared memory, not the 16 CPUs, binds
