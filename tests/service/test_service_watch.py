"""`watch = true`: the service runs a `datalint watch` child per watched dataset and keeps it alive."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from PIL import Image
from service_server import Server, dataset_table

pytestmark = pytest.mark.slow


def _wait(what: str, check: Any, server: Server, timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"{what} not seen within {timeout} s:\n{server.log.read_text()}")


def _watcher(server: Server, name: str = "photos") -> dict[str, Any] | None:
    return server.request("GET", f"/v1/datasets/{name}", token=None).json().get("watcher")  # type: ignore[no-any-return]


def _alive(pid: int) -> bool:
    """Running, not a zombie waiting for a parent that no longer exists to reap it."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _listed(server: Server) -> set[str]:
    body = server.request("GET", "/v1/datasets/photos/quarantine", token=None)
    if body.status_code != 200:
        return set()
    return {Path(sample["key"]).name for sample in body.json()["samples"] if sample["key"]}


def test_a_watched_folder_is_kept_listed_and_its_watcher_restarted(tmp_path: Path) -> None:
    images = tmp_path / "photos"
    images.mkdir()
    for n in range(3):
        Image.new("RGB", (16, 16), (n * 40, 0, 0)).save(images / f"ok{n}.png")
    table = f'\n[[datasets]]\nname = "photos"\nimages = "{images}"\nworkers = 1\nwatch = true\n'
    server = Server(tmp_path, table, tokens=False).start()  # open, on loopback only
    try:
        before = _wait("a running watcher", lambda: (w := _watcher(server)) and w["running"] and w, server)

        # one writer per index: a scan job of the watched dataset pauses its watcher, which comes
        # back (a new process) once the scan is over
        asked = server.request("POST", "/v1/datasets/photos/scans", token=None, json={"mode": "full"})
        assert asked.status_code == 202, asked.text
        done = server.wait_job(asked.json()["id"])
        assert done["state"] == "succeeded", done
        assert not _alive(before["pid"])
        first = _wait(
            "the watcher back after the scan",
            lambda: (w := _watcher(server)) and w["running"] and w["pid"] != before["pid"] and w,
            server,
        )
        assert first["restarts"] == 0 and not first["paused"]  # a pause is not a death
        log = server.log.read_text()
        assert "watcher paused for a scan" in log and "watcher resumed after the scan" in log

        # a damaged image dropped into the folder reaches the served list on its own
        whole = (images / "ok0.png").read_bytes()
        (images / "cut.png").write_bytes(whole[: len(whole) // 2])
        dropped = time.monotonic()
        _wait("cut.png on the served list", lambda: "cut.png" in _listed(server), server)
        print(f"listed {time.monotonic() - dropped:.1f} s after the drop")
        assert not {"ok0.png", "ok1.png", "ok2.png"} & _listed(server)

        metrics = server.request("GET", "/metrics", token=None).text
        assert "datalint_watchers_running 1" in metrics
        assert f"watched (pid {first['pid']}" in server.request("GET", "/", token=None).text

        # a SIGKILLed watcher is restarted, and the restart is counted
        os.kill(first["pid"], signal.SIGKILL)
        again = _wait(
            "a restarted watcher",
            lambda: (w := _watcher(server)) and w["running"] and w["pid"] != first["pid"] and w,
            server,
        )
        assert again["restarts"] == 1
        assert "killed by signal 9" in again["last_exit"]

        # a SIGKILLed service leaves its watcher running; the next start stops it before its own
        server.kill()
        assert _alive(again["pid"])
        server.start()
        pid = _wait(
            "the new service's watcher", lambda: (w := _watcher(server)) and w["running"] and w, server
        )["pid"]
        _wait("the orphan watcher gone", lambda: not _alive(again["pid"]), server, 20)
        assert pid != again["pid"]
    finally:
        assert server.stop() in (0, -signal.SIGTERM)
    assert not _alive(pid)  # stopping the service stopped its watcher
    log = server.log.read_text()
    assert "watcher started" in log and "watcher stopped" in log


def test_a_scan_resumed_at_start_pauses_the_watcher_instead_of_meeting_the_index_lock(tmp_path: Path) -> None:
    server = Server(tmp_path, dataset_table("slow", n=120, bad_every=40, delay=0.02), tokens=False).start()
    job = server.request("POST", "/v1/datasets/slow/scans", token=None).json()
    deadline = time.monotonic() + 60
    while server.request("GET", f"/v1/scans/{job['id']}", token=None).json()["progress"]["done"] < 20:
        assert time.monotonic() < deadline, server.log.read_text()
        time.sleep(0.1)
    assert server.stop() in (0, -signal.SIGTERM)  # the scan is checkpointed, to be resumed
    # the dataset is watched from now on: at start its watcher and the resumed scan both want the index
    server.config.write_text(server.config.read_text() + 'watch = true\npoll = "1s"\n')
    server.start()
    try:
        while True:  # never two writers: while the resumed scan runs, its dataset's watcher does not
            state = server.request("GET", f"/v1/scans/{job['id']}", token=None).json()
            watcher = _watcher(server, "slow")
            if state["state"] not in ("queued", "running"):
                break
            if state["state"] == "running":
                assert not (watcher and watcher["running"]), (state, watcher, server.log.read_text())
            time.sleep(0.05)
        resumed = server.wait_job(job["id"])
        assert resumed["state"] == "succeeded" and resumed["resumed"] is True, resumed
        assert resumed["summary"]["resumed"] >= 20 and resumed["summary"]["length"] == 120
        watcher = _wait(
            "the watcher after the scan",
            lambda: (w := _watcher(server, "slow")) and w["running"] and w,
            server,
        )
        assert watcher["restarts"] == 0, watcher  # it never died on the lock
        command = Path(f"/proc/{watcher['pid']}/cmdline").read_bytes().split(b"\0")
        assert command[command.index(b"--poll") + 1] == b"1.0"  # the dataset's poll, from the config
        listed = server.request("GET", "/v1/datasets/slow/quarantine", token=None).json()
        assert [s["index"] for s in listed["samples"]] == [0, 40, 80]
        watch_log = (tmp_path / "state" / "watchers" / "slow.log").read_text()
        assert "lock" not in watch_log.lower(), watch_log
    finally:
        server.stop()


def _command_line(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")


def test_a_watcher_starts_again_with_its_projects_settings_once_they_are_edited(tmp_path: Path) -> None:
    images = tmp_path / "photos"
    images.mkdir()
    Image.new("RGB", (16, 16), (90, 0, 0)).save(images / "ok.png")
    project = tmp_path / "pyproject.toml"
    project.write_text("[tool.datalint.scan.thresholds]\ndark = 0.3\n")
    table = (
        f'\n[[datasets]]\nname = "photos"\nimages = "{images}"\nworkers = 1\nwatch = true\n'
        f'config = "{project}"\n'
    )
    server = Server(tmp_path, table, tokens=False).start()
    try:
        first = _wait("a running watcher", lambda: (w := _watcher(server)) and w["running"] and w, server)
        assert "dark=0.3" in _command_line(first["pid"])
        project.write_text("[tool.datalint.scan.thresholds]\ndark = 0.2\n")  # edited while the service runs
        second = _wait(
            "the watcher with the new limit",
            lambda: (w := _watcher(server)) and w["running"] and w["pid"] != first["pid"] and w,
            server,
        )
        assert "dark=0.2" in _command_line(second["pid"])
        assert second["restarts"] == 0, "a restart for new settings is not a death"
        # A project file broken since: the scans will say why; the watcher keeps what it has.
        project.write_text("[tool.datalint.scan.thresholds]\ndark = 2\n")
        _wait("the broken file noticed", lambda: "cannot be read" in server.log.read_text(), server)
        time.sleep(1.5)
        assert _watcher(server) == second
    finally:
        server.stop()
