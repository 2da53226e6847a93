"""When the recorder pays for PSS (smaps_rollup walks the page tables): at the start, on a new
peak, while memory moves, and rarely while it holds still."""

from __future__ import annotations

from datalint.flight.supervise import PSS_SECONDS, PSS_STALE_SECONDS, PssSchedule

GIB = 1 << 30


def _rows(rss: int) -> list[dict[str, int]]:
    return [{"rss": rss // 2}, {"rss": rss - rss // 2}]


def _read(schedule: PssSchedule, now: float, rss: int, usage: int | None) -> bool:
    """One second of the recorder: is PSS due, and the second seen."""
    schedule.seen(now, _rows(rss), usage, False)
    due = schedule.due(now)
    if due:
        schedule.seen(now, _rows(rss), usage, True)
    return due


def test_memory_that_holds_still_is_read_once_in_five_minutes() -> None:
    schedule = PssSchedule()
    reads = [t for t in range(0, 601) if _read(schedule, float(t), 4 * GIB, 5 * GIB)]
    assert reads == [0, int(PSS_STALE_SECONDS), 2 * int(PSS_STALE_SECONDS)]


def test_copy_on_write_growth_seen_by_the_cgroup_is_read_every_half_minute() -> None:
    schedule = PssSchedule()
    # RSS stays put while the workers' shared pages turn private: only the cgroup's usage grows
    reads = [t for t in range(0, 121) if _read(schedule, float(t), 4 * GIB, 5 * GIB + (t << 23))]
    assert reads == [0, 30, 60, 90, 120] and PSS_SECONDS == 30


def test_a_new_peak_is_read_at_once_and_a_pool_coming_back_is_not() -> None:
    schedule = PssSchedule()
    assert _read(schedule, 0.0, 4 * GIB, None)
    assert not _read(schedule, 1.0, 2 * GIB, None)  # an epoch's end: the old pool gone
    assert not _read(schedule, 2.0, 4 * GIB, None)  # the new pool back at the old level
    assert _read(schedule, 3.0, 5 * GIB, None)  # the staircase before an OOM kill
    assert _read(schedule, 33.0, 5 * GIB, None)  # no cgroup to watch: the timer alone
