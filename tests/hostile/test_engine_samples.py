"""A sample cannot stop the scan or get another sample blamed: real scans of attacking samples."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from engine_support import Outcome, alive, dataset, reported_kinds, samples, scan

LENGTH = 36
ATTACKS = {
    4: "closerange",
    9: "fork_return",
    14: "killpg",
    19: "kill_group",
    24: "child_process",
    29: "stdin",
    31: "term_parent",
    33: "kill_parent",
}
CRASHES = {4: "ClosedChannels", 14: "SIGTERM", 19: "SIGKILL", 33: "SIGKILL"}


@pytest.fixture(scope="module")
def attacked(tmp_path_factory: pytest.TempPathFactory) -> tuple[Outcome, dict[int, dict], Path]:
    folder = tmp_path_factory.mktemp("attacked")
    plan: dict[str, list[int]] = {}
    for index, attack in ATTACKS.items():
        plan.setdefault(attack, []).append(index)
    arguments = ", ".join(f"{attack}={indices}" for attack, indices in plan.items())
    spec = dataset(f"make({LENGTH}, {str(folder)!r}, pause=0.01, {arguments})")
    outcome = scan("--dataset", spec, "--db", str(folder / "a.db"), "--workers", "2", "--format", "json")
    return outcome, samples(folder / "a.db"), folder


@pytest.mark.slow
def test_the_scan_ends_with_its_summary_and_one_row_per_sample(attacked) -> None:
    outcome, rows, _ = attacked
    assert outcome.code == 1  # something quarantined: the crashes below
    assert outcome.summary["length"] == LENGTH
    assert sorted(rows) == list(range(LENGTH))  # a forked copy answering too would count past 100%
    for index, row in rows.items():
        expected = ("crash", CRASHES[index]) if index in CRASHES else ("ok", None)
        assert (row["status"], row["error_type"]) == expected, (index, row["error_message"])
        assert row["key"] == f"sample-{index:03d}"


@pytest.mark.slow
def test_closing_the_workers_descriptors_is_that_samples_crash(attacked) -> None:
    _, rows, _ = attacked
    assert "os.closerange" in rows[4]["error_message"]
    assert [entry["index"] for entry in attacked[0].summary["worst"]] == sorted(CRASHES)


@pytest.mark.slow
def test_signalling_its_own_process_group_or_its_parent_stops_only_its_worker(attacked) -> None:
    _, rows, _ = attacked
    assert rows[14]["status"] == "crash" and rows[19]["status"] == "crash"
    assert rows[15]["status"] == rows[20]["status"] == "ok"  # their chunk-mates were measured again
    # The parent a sample sees is its worker's keeper: SIGTERM is ignored there, SIGKILL ends only
    # that worker (the keeper's death takes it along), never the scanner.
    assert rows[31]["status"] == "ok" and rows[33]["status"] == "crash"


@pytest.mark.slow
def test_processes_a_sample_leaves_behind_are_named_and_ended(attacked) -> None:
    _, rows, folder = attacked
    assert "side_effect" in reported_kinds(rows[24]) and "side_effect" in reported_kinds(rows[9])
    assert not any("side_effect" in reported_kinds(row) for i, row in rows.items() if i not in (9, 24))
    children = [int(path.name.split("-")[1]) for path in folder.glob("child-*")]
    assert children
    deadline = time.monotonic() + 60  # returns as soon as they are gone; only a leak waits it out
    while any(alive(pid) for pid in children) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(alive(pid) for pid in children)  # ended with its worker's process group


@pytest.mark.slow
def test_a_thread_that_kills_its_worker_later_is_pinned_on_the_sample_that_started_it(tmp_path) -> None:
    # Sample 3 starts a thread that segfaults 0.4 s later, in the middle of a later sample.
    spec = dataset(f"make(24, {str(tmp_path)!r}, pause=0.05, thread_segfault=[3])")
    outcome = scan("--dataset", spec, "--db", str(tmp_path / "t.db"), "--workers", "1", "--format", "json")
    rows = samples(tmp_path / "t.db")
    assert outcome.code == 1 and sorted(rows) == list(range(24))
    assert (rows[3]["status"], rows[3]["error_type"]) == ("crash", "SIGSEGV")
    assert "uncertain" in rows[3]["error_message"] and "thread" in rows[3]["error_message"]
    assert all(row["status"] == "ok" for index, row in rows.items() if index != 3)


@pytest.mark.slow
def test_what_a_sample_changes_in_its_worker_is_put_back_before_the_next(tmp_path) -> None:
    # One worker, so every later sample runs where the damage was done: in a fresh process each of
    # them would pass (they print, open a relative path, take about 0.1 s).
    attacks = {2: "chdir", 5: "close_stdout", 8: "alarm", 11: "patch_clock"}
    arguments = ", ".join(f"{attack}=[{index}]" for index, attack in attacks.items())
    spec = dataset(f"make(20, {str(tmp_path)!r}, pause=0.1, fussy=True, {arguments})")
    outcome = scan(
        "--dataset",
        spec,
        "--db",
        str(tmp_path / "w.db"),
        "--workers",
        "1",
        "--timeout",
        "2",
        "--format",
        "json",
    )
    rows = samples(tmp_path / "w.db")
    # Samples 2 and 5 trip over their own change (a relative path, a print): that is theirs.
    assert {index for index, row in rows.items() if row["status"] != "ok"} == {2, 5}
    assert outcome.summary["statuses"]["ok"] == 18 and sorted(rows) == list(range(20))
    flagged = {index for index, row in rows.items() if "side_effect" in reported_kinds(row)}
    assert flagged == set(attacks)
