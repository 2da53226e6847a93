"""`datalint watch` as a real process on real folders: settle, a lost folder, SIGKILL and resume."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

import pytest
from incremental_support import damage, quarantined_keys, scan_in_child, write_image
from scan_support import start_cli

from datalint.index import read

pytestmark = pytest.mark.slow


def wait_for(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def count_rows(db: Path, where: str = "1") -> int:
    if not db.exists():
        return 0
    try:
        with closing(sqlite3.connect(db, timeout=5)) as connection:
            return int(connection.execute(f"SELECT COUNT(*) FROM samples WHERE {where}").fetchone()[0])
    except sqlite3.OperationalError:  # no table yet
        return 0


def listed(quarantine: Path) -> dict[str, int]:
    try:
        return quarantined_keys(quarantine)
    except (OSError, ValueError):
        return {}


@contextmanager
def watching(folder: Path, db: Path, *extra: str) -> Iterator[subprocess.Popen[str]]:
    process = start_cli("watch", "--images", str(folder), "--db", str(db), "--workers", "1", *extra)
    try:
        yield process
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)


def read_lines(
    process: subprocess.Popen[str], stderr: bool = False
) -> tuple[list[str], threading.Thread]:
    """The watch's stdout (or stderr) lines as they come, read on a thread (a test can wait for a
    logged update)."""
    lines: list[str] = []
    stream = process.stderr if stderr else process.stdout
    assert stream is not None
    reader = threading.Thread(target=lambda: lines.extend(iter(stream.readline, "")), daemon=True)
    reader.start()
    return lines, reader


def logged(lines: list[str], text: str) -> bool:
    return text in "".join(list(lines))


def stop_reading(process: subprocess.Popen[str], *readers: threading.Thread) -> None:
    """Stop a watch whose output threads read, once they have read all of it."""
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=20) == 0
    for reader in readers:
        reader.join(timeout=10)


def stop(process: subprocess.Popen[str]) -> tuple[str, str]:
    process.send_signal(signal.SIGTERM)
    out, err = process.communicate(timeout=20)
    assert process.returncode == 0, err
    return out, err


def test_a_file_written_in_chunks_is_judged_once_complete_and_never_listed_as_truncated(
    tmp_path: Path,
) -> None:
    folder, db = tmp_path / "images", tmp_path / "w.db"
    write_image(folder / "a" / "000.png")
    quarantine = tmp_path / "w.quarantine.json"
    whole = write_image(tmp_path / "source.png", side=120).read_bytes()
    with watching(folder, db, "--settle", "1.5s") as process:
        lines, reader = read_lines(process)
        wait_for(lambda: count_rows(db) == 1, 30, "the first scan")
        target = folder / "a" / "001.png"
        with open(target, "wb") as out:
            for start in range(0, len(whole), len(whole) // 4 + 1):
                out.write(whole[start : start + len(whole) // 4 + 1])
                out.flush()
                assert "a/001.png" not in listed(quarantine)
                time.sleep(0.6)  # pauses shorter than --settle: the writer is still at work
        wait_for(lambda: count_rows(db, "key = 'a/001.png' AND status = 'ok'") == 1, 15, "the new file")
        assert "a/001.png" not in listed(quarantine)
        damage(folder / "a" / "002.png")
        wait_for(lambda: "a/002.png" in listed(quarantine), 15, "the damaged file in the list")
        # The list is rewritten before the update's line is logged: wait for the line, then stop.
        wait_for(lambda: logged(lines, "+1: a/002.png"), 30, "the damaged file's update to be logged")
        stop_reading(process, reader)
    assert logged(lines, "1 added")


def test_a_watched_folder_renamed_away_pauses_and_keeps_the_list(tmp_path: Path) -> None:
    folder, db = tmp_path / "images", tmp_path / "w.db"
    for n in range(4):
        write_image(folder / f"{n:03d}.png")
    damage(folder / "003.png")
    quarantine = tmp_path / "w.quarantine.json"
    with watching(folder, db, "--settle", "0.5s") as process:
        errors, reader = read_lines(process, stderr=True)
        wait_for(lambda: listed(quarantine) == {"003.png": 3}, 30, "the first list")
        before = quarantine.read_bytes()
        folder.rename(tmp_path / "elsewhere")  # the mount went away
        wait_for(lambda: logged(errors, "paused"), 30, "the watch to say it paused")
        assert quarantine.read_bytes() == before and count_rows(db) == 4
        (tmp_path / "elsewhere").rename(folder)
        write_image(folder / "004.png")
        # The rows are written before "resumed" is said: wait for both, then stop.
        wait_for(lambda: count_rows(db) == 5 and logged(errors, "resumed"), 20, "the watch to resume")
        stop_reading(process, reader)
    assert listed(quarantine) == {"003.png": 3}


def test_a_watch_killed_with_sigkill_leaves_a_valid_index_that_the_next_start_resumes(tmp_path: Path) -> None:
    folder, db = tmp_path / "images", tmp_path / "w.db"
    write_image(folder / "first.png")
    with watching(folder, db, "--settle", "0.3s") as process:
        wait_for(lambda: count_rows(db) == 1, 30, "the first scan")
        image = write_image(tmp_path / "large.png", side=256).read_bytes()  # copies: `duplicate` is no damage
        (folder / "many").mkdir()
        for n in range(600):
            (folder / "many" / f"{n:04d}.png").write_bytes(image)
        damage(folder / "many" / "0150.png")
        wait_for(lambda: count_rows(db) > 1, 30, "the update to start writing rows")
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)
    with closing(sqlite3.connect(db)) as connection:
        assert connection.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert count_rows(db) < 601  # killed halfway

    with watching(folder, db, "--settle", "0.3s") as process:
        wait_for(lambda: count_rows(db) == 601, 90, "the restarted watch to finish")
        wait_for(lambda: "many/0150.png" in listed(tmp_path / "w.quarantine.json"), 60, "the list")
        stop(process)
    with closing(read.connect(db)) as connection:
        keys = [row[0] for row in connection.execute("SELECT key FROM samples ORDER BY position_of(idx)")]
    assert keys == sorted(["first.png", *(f"many/{n:04d}.png" for n in range(600))])
    document = json.loads((tmp_path / "w.quarantine.json").read_text())
    assert [(e["index"], e["key"]) for e in document["samples"]] == [(151, "many/0150.png")]


def test_a_watched_dataset_is_polled_and_its_new_keys_measured(tmp_path: Path) -> None:
    from incremental_support import KEYED_DATASET

    (tmp_path / "keyed_ds.py").write_text(KEYED_DATASET)
    ids, db = tmp_path / "ids.json", tmp_path / "k.db"
    ids.write_text(json.dumps([f"r{n:03d}" for n in range(6)]))
    spec = f"{tmp_path / 'keyed_ds.py'}:Keyed({str(ids)!r})"
    process = start_cli("watch", "--dataset", spec, "--db", str(db), "--workers", "1", "--poll", "1s")
    lines, reader = read_lines(process)
    try:
        wait_for(lambda: count_rows(db) == 6, 60, "the first poll")
        ids.write_text(json.dumps(["bad-0", *(f"r{n:03d}" for n in range(6))]))
        wait_for(lambda: listed(tmp_path / "k.quarantine.json") == {"bad-0": 0}, 60, "the next poll")
        # The list is written before the poll's child hands its summary back to be logged.
        wait_for(lambda: logged(lines, "1 added, 6 moved; 1 measured"), 30, "the poll's update to be logged")
        stop_reading(process, reader)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    assert count_rows(db) == 7


def index_content(db: Path) -> list[tuple[Any, ...]]:
    """Per sample its position, key, status and findings, as a full rescan must give them."""
    with closing(read.connect(db)) as connection:
        return connection.execute(
            "SELECT position_of(s.idx) AS position, s.key, s.status, (SELECT group_concat(kind) FROM "
            "(SELECT kind FROM findings f WHERE f.idx = s.idx ORDER BY kind)) FROM samples s "
            "ORDER BY position"
        ).fetchall()


def added(lines: list[str]) -> int:
    """Samples added over the updates a watch logged as JSON lines (the first, resuming one, left out)."""
    updates = [json.loads(line) for line in list(lines) if line.startswith("{")]
    return sum((update.get("changes") or {}).get("added", 0) for update in updates[1:])


def test_updates_follow_the_event_paths_and_a_folder_event_walks_the_folder(tmp_path: Path) -> None:
    folder, db = tmp_path / "images", tmp_path / "w.db"
    quarantine = tmp_path / "w.quarantine.json"
    for n in range(6):
        write_image(folder / "a" / f"{n:03d}.png")
    with watching(folder, db, "--settle", "0.3s", "--rescan-every", "1h", "--format", "json") as process:
        lines, reader = read_lines(process)
        wait_for(lambda: count_rows(db) == 6, 30, "the first scan")
        write_image(folder / "a" / "001b.png")  # sorts between two indexed files: positions move
        damage(folder / "a" / "004.png")
        (folder / "a" / "002.png").unlink()
        (folder / "a" / "notes.txt").write_text("not an image")
        wait_for(lambda: set(listed(quarantine)) == {"a/004.png"} and count_rows(db) == 6, 30, "the update")
        moved_in = tmp_path / "b"
        write_image(moved_in / "x.png")
        damage(moved_in / "y.png")
        moved_in.rename(folder / "b")  # one event for the folder, none for its files
        wait_for(lambda: count_rows(db) == 8 and "b/y.png" in listed(quarantine), 30, "the folder's files")
        # The list is written before its update is logged: wait for the line, then stop.
        wait_for(lambda: added(lines) == 3, 30, "the folder's update to be logged")
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=20) == 0
        reader.join(timeout=10)
    updates = [json.loads(line) for line in lines if line.startswith("{")]
    assert updates[0]["listing"] == "walk"  # the first update resumes from a walk
    changed = [u for u in updates[1:] if u["changes"]["measured"] or u["changes"]["removed"]]
    # The file events of the first change are listed from their paths, without a walk. The moved-in
    # folder's two files come in by the walk its folder event asks for; inotify may also report
    # them as files of their own (the watch on the new folder races its creation), and then their
    # paths list them. Either way each file is added once.
    assert changed[0]["listing"] == "events"
    assert sum(u["changes"]["added"] for u in changed) == 3
    assert sum(u["changes"]["removed"] for u in changed) == 1

    full_db = tmp_path / "full.db"
    scan_in_child("--images", str(folder), "--db", str(full_db))
    assert index_content(db) == index_content(full_db)
    assert listed(quarantine) == listed(tmp_path / "full.quarantine.json")


def test_a_file_dated_in_the_future_is_not_held_back_for_ever_by_settle(tmp_path: Path) -> None:
    folder, db = tmp_path / "images", tmp_path / "w.db"
    write_image(folder / "000.png")
    with watching(folder, db, "--settle", "0.3s") as process:
        wait_for(lambda: count_rows(db) == 1, 30, "the first scan")
        added = write_image(tmp_path / "001.png")
        year_2200 = 7_258_118_400 * 10**9  # an archive's date or a skewed clock: always "just written"
        os.utime(added, ns=(year_2200, year_2200))
        added.rename(folder / "001.png")
        wait_for(lambda: count_rows(db) == 2, 30, "the future-dated file, once settled")
        stop(process)
