"""Scans as jobs: queued per dataset, progress as JSON and SSE, cancel, crashes, and resuming."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import httpx
import pytest
from service_server import Server, dataset_table

pytestmark = pytest.mark.slow

SLOW = dataset_table("slow", n=200, bad_every=50, delay=0.02)


def wait_progress(server: Server, job_id: str, at_least: int) -> dict[str, object]:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        job = server.request("GET", f"/v1/scans/{job_id}", token="reader").json()
        if job["state"] == "running" and job["progress"]["done"] >= at_least:
            return job  # type: ignore[no-any-return]
        time.sleep(0.1)
    raise AssertionError(f"no progress: {job}")


def test_one_scan_per_dataset_at_a_time_progress_over_sse_and_cancel(tmp_path: Path) -> None:
    server = Server(tmp_path, SLOW).start()
    try:
        first = server.request("POST", "/v1/datasets/slow/scans").json()
        second = server.request("POST", "/v1/datasets/slow/scans", json={"mode": "full"}).json()
        assert server.request("GET", f"/v1/scans/{second['id']}", token="reader").json()["state"] == "queued"
        job = wait_progress(server, first["id"], 20)
        progress = job["progress"]
        assert progress["total"] == 200 and progress["findings"] >= 0  # type: ignore[index]
        assert server.request("GET", f"/v1/scans/{second['id']}", token="reader").json()["state"] == "queued"

        events = []
        with httpx.stream(
            "GET",
            f"{server.base}/v1/scans/{first['id']}/events",
            timeout=30,
            headers={"Authorization": f"Bearer {server.tokens['reader']}"},
        ) as stream:
            assert stream.headers["content-type"].startswith("text/event-stream")
            for line in stream.iter_lines():
                if line.startswith("data: "):
                    events.append(json.loads(line[6:]))
                if len(events) == 3:
                    break
        done = [e["progress"]["done"] for e in events]
        assert done == sorted(done) and done[-1] > done[0], "live progress moves forward"

        cancelled = server.request("POST", f"/v1/scans/{first['id']}/cancel").json()
        assert cancelled["id"] == first["id"]
        assert server.wait_job(first["id"])["state"] == "cancelled"
        # the queued full rescan starts once the dataset is free, and finishes
        finished = server.wait_job(second["id"])
        assert finished["state"] == "succeeded", finished
        assert finished["summary"]["length"] == 200 and finished["summary"]["quarantined"] == 4
    finally:
        server.stop()


def test_a_sigkilled_scan_leaves_the_service_answering_and_the_next_scan_resumes(tmp_path: Path) -> None:
    server = Server(tmp_path, SLOW).start()
    try:
        job = server.request("POST", "/v1/datasets/slow/scans").json()
        running = wait_progress(server, job["id"], 30)
        os.killpg(int(running["pid"]), signal.SIGKILL)  # type: ignore[call-overload]
        failed = server.wait_job(job["id"])
        assert failed["state"] == "failed" and "killed by signal 9" in failed["error"]
        assert server.request("GET", "/healthz", token=None).json()["status"] == "ok"
        again = server.request("POST", "/v1/datasets/slow/scans").json()
        finished = server.wait_job(again["id"])
        assert finished["state"] == "succeeded"
        assert finished["summary"]["resumed"] >= 30, "what the killed scan measured was kept"
    finally:
        server.stop()


def test_a_scan_that_cannot_even_start_fails_as_a_job_with_its_message(tmp_path: Path) -> None:
    server = Server(tmp_path, '\n[[datasets]]\nname = "broken"\ndataset = "no_such_module_here:ds"\n').start()
    try:
        job = server.request("POST", "/v1/datasets/broken/scans").json()
        failed = server.wait_job(job["id"])
        assert failed["state"] == "failed" and "no_such_module_here" in failed["error"]
        assert server.request("GET", "/healthz", token=None).status_code == 200
    finally:
        server.stop()


def test_sigterm_drains_and_a_restart_resumes_the_interrupted_scan(tmp_path: Path) -> None:
    server = Server(tmp_path, SLOW).start()
    job = server.request("POST", "/v1/datasets/slow/scans").json()
    wait_progress(server, job["id"], 30)
    # uvicorn drains on SIGTERM, then re-raises it so the exit says why (systemd counts that as clean)
    assert server.stop() in (0, -signal.SIGTERM)
    assert "draining: checkpointing running scans" in server.log.read_text()
    assert "datalint.service: stopped" in server.log.read_text()
    saved = json.loads((tmp_path / "state" / "jobs" / f"{job['id']}.json").read_text())
    assert saved["state"] == "interrupted"
    assert "checkpointed for resume" in server.log.read_text()

    server.start()
    try:
        resumed = server.wait_job(job["id"])
        assert resumed["state"] == "succeeded" and resumed["resumed"] is True
        assert resumed["summary"]["resumed"] >= 30 and resumed["summary"]["length"] == 200
    finally:
        server.stop()


def test_a_dataset_with_an_interval_is_scanned_on_its_schedule(tmp_path: Path) -> None:
    server = Server(tmp_path, dataset_table("timed", n=20) + 'interval = "1s"\n').start()
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            jobs = server.request("GET", "/v1/datasets/timed/scans", token="reader").json()["scans"]
            if any(j["state"] == "succeeded" for j in jobs):
                break
            time.sleep(0.2)
        assert jobs and all(j["reason"] == "schedule" for j in jobs), jobs
        assert any(j["state"] == "succeeded" for j in jobs)
        listed = server.request("GET", "/v1/datasets/timed/quarantine", token="reader").json()
        assert [s["index"] for s in listed["samples"]] == [0, 10]
    finally:
        server.stop()


def test_a_full_rescan_counts_its_progress_forward_and_an_unwatched_dataset_logs_no_watcher(
    tmp_path: Path,
) -> None:
    server = Server(tmp_path, dataset_table("slow", n=150, bad_every=50, delay=0.01)).start()
    try:
        first = server.request("POST", "/v1/datasets/slow/scans").json()
        assert server.wait_job(first["id"])["state"] == "succeeded"
        job = server.request("POST", "/v1/datasets/slow/scans", json={"mode": "full"}).json()
        seen: list[int] = []
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            state = server.request("GET", f"/v1/scans/{job['id']}", token="reader").json()
            seen.append(state["progress"]["done"])
            if state["state"] not in ("queued", "running"):
                break
            time.sleep(0.02)
        assert state["state"] == "succeeded", state
        assert seen == sorted(seen), f"progress went backwards: {seen}"
        log = server.log.read_text()
        assert "watcher" not in log, "the dataset has no watcher: nothing to pause or resume"
    finally:
        server.stop()
