"""Acknowledged means kept: a guard failure the service committed stays on every list it serves until
the changed sample measures ok or an admin clears it (docs/service.md, "Acknowledged means kept")."""

from __future__ import annotations

import signal
import sqlite3
import time
from pathlib import Path

import pytest
from service_data import bad_indices
from service_server import Server, dataset_table

pytestmark = pytest.mark.slow


def _failure(index: int, message: str = "flaky mount") -> dict[str, object]:
    return {"index": index, "key": None, "error_type": "OSError", "message": message}


def _listed(server: Server) -> list[int]:
    answer = server.request("GET", "/v1/datasets/train/quarantine", token="reader")
    assert answer.status_code == 200, answer.text
    return sorted(entry["index"] for entry in answer.json()["samples"])


def _scan(server: Server, mode: str) -> dict[str, object]:
    job = server.request("POST", "/v1/datasets/train/scans", json={"mode": mode}).json()
    done = server.wait_job(job["id"])
    assert done["state"] == "succeeded", done
    return done


@pytest.fixture
def acknowledged(tmp_path: Path) -> Server:
    server = Server(tmp_path, dataset_table("train", n=30)).start()
    _scan(server, "resume")
    answer = server.request(
        "POST", "/v1/datasets/train/failures", token="writer", json={"failures": [_failure(5), _failure(6)]}
    )
    assert answer.json()["committed"] is True
    assert _listed(server) == sorted([*bad_indices(30), 5, 6])
    return server


@pytest.mark.parametrize("mode", ["resume", "incremental", "full"])
def test_a_scan_job_of_any_mode_keeps_acknowledged_failures_listed(acknowledged: Server, mode: str) -> None:
    try:
        _scan(acknowledged, mode)
        assert _listed(acknowledged) == sorted([*bad_indices(30), 5, 6])
        entries = acknowledged.request("GET", "/v1/datasets/train/quarantine", token="reader").json()
        detail = next(entry["detail"] for entry in entries["samples"] if entry["index"] == 5)
        assert "failed in training once" in detail and "OSError: flaky mount" in detail
        assert "ok when scanned" in detail  # both facts: the scan measured it ok
    finally:
        acknowledged.stop()


def test_acknowledged_failures_survive_a_sigkilled_scan_job_and_a_restart(tmp_path: Path) -> None:
    server = Server(tmp_path, dataset_table("train", n=40, delay=0.05)).start()
    try:
        _scan(server, "resume")
        server.request(
            "POST", "/v1/datasets/train/failures", token="writer", json={"failures": [_failure(7)]}
        )
        job = server.request("POST", "/v1/datasets/train/scans", json={"mode": "full"}).json()
        running = server.wait_job(job["id"], states=("running",))
        deadline = time.monotonic() + 60
        while (running.get("progress") or {}).get("done", 0) < 5 and time.monotonic() < deadline:
            running = server.request("GET", f"/v1/scans/{job['id']}", token="reader").json()
            time.sleep(0.1)
        import os

        os.kill(int(running["pid"]), signal.SIGKILL)
        server.wait_job(job["id"], states=("failed", "interrupted", "succeeded", "cancelled"))
        server.kill()
        server.start()
        assert 7 in _listed(server)
        _scan(server, "resume")
        assert 7 in _listed(server)
    finally:
        server.stop()


def test_a_retry_of_the_same_failure_is_counted_once_and_another_failure_again(acknowledged: Server) -> None:
    try:
        again = {**_failure(5), "id": "a1"}
        for _ in range(2):  # a replayed spool sends the same failure twice
            acknowledged.request(
                "POST", "/v1/datasets/train/failures", token="writer", json={"failures": [again]}
            )
        acknowledged.request(
            "POST",
            "/v1/datasets/train/failures",
            token="writer",
            json={"failures": [{**_failure(5), "id": "a2"}]},
        )
        _scan(acknowledged, "resume")
        entries = acknowledged.request("GET", "/v1/datasets/train/quarantine", token="reader").json()
        detail = next(entry["detail"] for entry in entries["samples"] if entry["index"] == 5)
        assert "failed in training 3 times" in detail  # the first post, a1 (once), a2
    finally:
        acknowledged.stop()


def test_an_admin_clears_a_failure_and_the_index_records_who_and_when(acknowledged: Server) -> None:
    try:
        path = "/v1/datasets/train/failures/clear"
        body = {"indexes": [5], "reason": "the mount was fixed"}
        assert acknowledged.request("POST", path, token="writer", json=body).status_code == 403
        answer = acknowledged.request("POST", path, json=body)
        assert answer.status_code == 200, answer.text
        assert answer.json()["cleared"] == [5]
        assert _listed(acknowledged) == sorted([*bad_indices(30), 6])
        _scan(acknowledged, "resume")
        assert _listed(acknowledged) == sorted([*bad_indices(30), 6])
        index = acknowledged.folder / "state" / "datasets" / "train" / "index.db"
        with sqlite3.connect(index) as connection:
            by, reason = connection.execute(
                "SELECT by, reason FROM failure_events WHERE idx = 5 AND event = 'cleared'"
            ).fetchone()
        assert by == "admin token 'admin'" and "the mount was fixed" in reason
    finally:
        acknowledged.stop()


def test_an_index_written_before_failures_were_kept_apart_keeps_its_guard_failures(tmp_path: Path) -> None:
    from datalint.index import failures, store

    server = Server(tmp_path, dataset_table("train", n=30)).start()
    try:
        _scan(server, "resume")
        server.request(
            "POST", "/v1/datasets/train/failures", token="writer", json={"failures": [_failure(4)]}
        )
    finally:
        server.stop()
    index = tmp_path / "state" / "datasets" / "train" / "index.db"
    with sqlite3.connect(index) as connection:  # as the previous version left it: no failures table
        connection.executescript("DROP TABLE failures; DROP TABLE failure_events; PRAGMA user_version = 2;")
    db = store.open_index(index)
    try:
        assert [failure.index for failure in failures.active(db)] == [4]
    finally:
        db.close()
