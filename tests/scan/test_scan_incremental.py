"""Incremental scans on real folders: only what changed is measured, keys follow moved samples."""

from __future__ import annotations

import json
import os
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from incremental_support import (
    FOLDER_DATASET,
    KEYED_DATASET,
    damage,
    quarantined_keys,
    scan_in_child,
    write_image,
)
from scan_support import rows, run_cli


def scan_images(folder: Path, db: Path, *extra: str) -> dict[str, Any]:
    code, out, err = run_cli(
        "scan", "--images", str(folder), "--db", str(db), "--workers", "2", "--format", "json", *extra
    )
    assert code in (0, 1), err
    summary: dict[str, Any] = json.loads(out)
    return summary


def index_content(db: Path) -> list[tuple[Any, ...]]:
    """Everything a full rescan must reproduce: per sample its position, key, status and findings."""
    return rows(
        db,
        "SELECT position_of(s.idx) AS position, s.key, s.status, group_concat(f.kind) FROM samples s "
        "LEFT JOIN findings f ON f.idx = s.idx GROUP BY s.idx ORDER BY position",
    )


def list_content(quarantine: Path) -> list[Any]:
    return json.loads(quarantine.read_text())["samples"]


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    root = tmp_path / "images"
    for cls in ("cat", "dog"):
        for n in range(0, 12, 2):
            write_image(root / cls / f"{n:03d}.png")
    return root


def test_a_damaged_replacement_is_found_and_a_repair_clears_it(folder: Path, tmp_path: Path) -> None:
    db = tmp_path / "i.db"
    first = scan_images(folder, db)
    assert first["scanned"] == 12 and first["changes"] is None and first["quarantined"] == 0

    damage(folder / "dog" / "004.png")
    damaged = scan_images(folder, db)
    assert damaged["scanned"] == 1 and damaged["resumed"] == 11
    assert damaged["changes"]["changed"] == 1 and damaged["changes"]["added"] == 0
    assert quarantined_keys(tmp_path / "i.quarantine.json") == {"dog/004.png": 8}

    write_image(folder / "dog" / "004.png")
    repaired = scan_images(folder, db)
    assert repaired["scanned"] == 1 and repaired["quarantined"] == 0
    assert scan_images(folder, db)["scanned"] == 0  # nothing changed: nothing measured


def test_inserted_deleted_and_renamed_files_match_a_full_rescan(folder: Path, tmp_path: Path) -> None:
    db = tmp_path / "i.db"
    scan_images(folder, db)
    write_image(folder / "cat" / "001.png")  # inserted in the middle: every later position shifts
    damage(folder / "cat" / "003.png")
    (folder / "dog" / "006.png").unlink()
    (folder / "dog").rename(folder / "wolf")  # a renamed folder: its files leave, new keys arrive

    summary = scan_images(folder, db)
    changes = summary["changes"]
    assert (changes["added"], changes["removed"], changes["changed"]) == (2 + 5, 6, 0)
    assert summary["scanned"] == 7 and changes["moved"] == 5  # cat/002..010 moved on by one or two
    assert quarantined_keys(tmp_path / "i.quarantine.json") == {"cat/003.png": 3}

    full = tmp_path / "full.db"
    scan_images(folder, full, "--rescan")
    assert index_content(db) == index_content(full)
    assert list_content(tmp_path / "i.quarantine.json") == list_content(tmp_path / "full.quarantine.json")
    history = rows(db, "SELECT key, idx, reason, left_at IS NOT NULL FROM sample_history ORDER BY key")
    assert [row[0] for row in history] == [f"dog/{n:03d}.png" for n in range(0, 12, 2)]
    assert all(reason == "removed" and left for _, _, reason, left in history)


def test_a_changed_max_pixels_measures_only_the_images_it_can_judge(folder: Path, tmp_path: Path) -> None:
    db = tmp_path / "i.db"
    write_image(folder / "dog" / "big.png", side=200)  # 40,000 pixels; the others 1,600
    scan_images(folder, db)
    strict = scan_images(folder, db, "--max-pixels", "10000")
    assert strict["scanned"] == 1 and strict["changes"]["remeasured"] == 1
    assert strict["findings"].get("decompression_bomb") == 1
    relaxed = scan_images(folder, db)  # back to Pillow's limit: the bomb verdict is taken back
    assert relaxed["scanned"] == 1 and "decompression_bomb" not in relaxed["findings"]


def damage_in_place(target: Path) -> None:
    """Zero 40 bytes inside the file and set its times back: same inode, size and mtime."""
    before = os.stat(target)
    data = bytearray(target.read_bytes())
    data[100:140] = bytes(40)
    with open(target, "r+b") as handle:
        handle.write(data)
    os.utime(target, ns=(before.st_atime_ns, before.st_mtime_ns))  # a filesystem whose mtime lies


def test_a_rewrite_that_kept_size_inode_and_mtime_is_seen_by_its_ctime(folder: Path, tmp_path: Path) -> None:
    db = tmp_path / "i.db"
    future = folder / "dog" / "002.png"
    year_3000 = 32_503_680_000 * 10**9
    os.utime(future, ns=(year_3000, year_3000))  # an mtime in the future, from an archive or a bad clock
    scan_images(folder, db)
    damage_in_place(folder / "cat" / "002.png")
    damage_in_place(future)

    found = scan_images(folder, db)
    assert found["changes"]["changed"] == 2 and found["scanned"] == 2
    assert set(quarantined_keys(Path(found["quarantine"]))) == {"cat/002.png", "dog/002.png"}
    assert scan_images(folder, db)["scanned"] == 0  # and measured once, not at every scan


def test_verify_content_catches_a_rewrite_stat_cannot_see(folder: Path, tmp_path: Path) -> None:
    db = tmp_path / "i.db"
    scan_images(folder, db)
    target = folder / "cat" / "002.png"
    damage_in_place(target)
    # What a file system that keeps no ctime (or rot under an unchanged inode) shows: the recorded
    # state, ctime included, is the file's state now.
    with closing(sqlite3.connect(db)) as connection, connection:
        connection.execute(
            "UPDATE sample_files SET ctime_ns = ? WHERE key = 'cat/002.png'", [os.stat(target).st_ctime_ns]
        )

    assert scan_images(folder, db)["scanned"] == 0
    verified = scan_images(folder, db, "--verify-content")
    assert verified["changes"]["changed"] == 1 and verified["quarantined"] == 1


def test_an_index_of_schema_3_keeps_working_and_learns_the_ctimes(folder: Path, tmp_path: Path) -> None:
    from datalint.index import store

    db = tmp_path / "i.db"
    scan_images(folder, db)
    with closing(sqlite3.connect(db)) as connection, connection:  # as datalint before ctimes wrote it
        connection.executescript("ALTER TABLE sample_files DROP COLUMN ctime_ns; PRAGMA user_version = 3;")
    damage_in_place(folder / "cat" / "002.png")

    unknown = scan_images(folder, db)  # no ctime on record: compared as before, so this one is missed
    assert unknown["changes"]["changed"] == 0
    assert rows(db, "PRAGMA user_version") == [(store.SCHEMA_VERSION,)]
    assert rows(db, "SELECT count(*) FROM sample_files WHERE ctime_ns IS NULL") == [(12,)]

    write_image(folder / "cat" / "100.png")  # a scan that measures something records the ctimes
    assert scan_images(folder, db)["changes"]["added"] == 1
    assert rows(db, "SELECT count(*) FROM sample_files WHERE ctime_ns IS NULL") == [(0,)]
    damage_in_place(folder / "dog" / "004.png")
    assert scan_images(folder, db)["changes"]["changed"] == 1


@pytest.mark.slow
def test_an_imagefolder_dataset_keeps_keys_and_indices_right_and_a_sampler_applies_the_new_list(
    tmp_path: Path,
) -> None:
    import torch  # noqa: F401  (the sampler is the real one)

    from datalint.torch import QuarantineSampler

    root = tmp_path / "tree"
    for cls in ("cat", "dog"):
        for n in range(0, 10, 2):
            write_image(root / cls / f"{n:03d}.png")
    damage(root / "dog" / "004.png")
    (tmp_path / "folder_ds.py").write_text(FOLDER_DATASET)
    dataset_spec = f"{tmp_path / 'folder_ds.py'}:Folder({str(root)!r})"
    args = ("--dataset", dataset_spec, "--db", str(tmp_path / "ds.db"))
    first = scan_in_child(*args)
    assert first["quarantined"] == 1

    write_image(root / "cat" / "001.png")
    damage(root / "cat" / "003.png")
    second = scan_in_child(*args)
    assert second["scanned"] == 2 and second["changes"]["added"] == 2 and second["changes"]["moved"] > 0

    namespace: dict[str, Any] = {}
    exec(FOLDER_DATASET, namespace)
    dataset = namespace["Folder"](str(root))
    positions = {path: i for i, (path, _) in enumerate(dataset.samples)}
    listed = quarantined_keys(tmp_path / "ds.quarantine.json")
    assert listed == {str(root / "cat" / "003.png"): positions[str(root / "cat" / "003.png")],
                      str(root / "dog" / "004.png"): positions[str(root / "dog" / "004.png")]}  # fmt: skip
    sampler = QuarantineSampler(dataset, tmp_path / "ds.quarantine.json")
    assert set(sampler) == set(range(len(dataset))) - set(listed.values())


@pytest.mark.slow
def test_a_keyed_dataset_whose_keys_grow_measures_only_the_new_keys(tmp_path: Path) -> None:
    (tmp_path / "keyed_ds.py").write_text(KEYED_DATASET)
    ids = tmp_path / "ids.json"
    ids.write_text(json.dumps([f"r{n:03d}" for n in range(20)]))
    args = ("--dataset", f"{tmp_path / 'keyed_ds.py'}:Keyed({str(ids)!r})", "--db", str(tmp_path / "k.db"))
    assert scan_in_child(*args)["scanned"] == 20

    grown = [f"r{n:03d}" for n in range(20)]
    grown[5:5] = ["bad-new", "r-new"]  # two records arrive in the middle
    del grown[-1]
    ids.write_text(json.dumps(grown))
    summary = scan_in_child(*args)
    assert summary["scanned"] == 2 and summary["resumed"] == 19
    assert summary["changes"] | {"reasons": []} == {
        "added": 2, "changed": 0, "removed": 1, "moved": 14, "remeasured": 0, "measured": 2, "deferred": 0,
        "reasons": [],
    }  # fmt: skip
    assert quarantined_keys(tmp_path / "k.quarantine.json") == {"bad-new": 5}


def test_a_dataset_without_keys_is_measured_again_with_one_line_saying_why(tmp_path: Path) -> None:
    from scan_support import spec

    db = str(tmp_path / "u.db")
    assert run_cli("scan", "--dataset", spec("faults.py:make(length=4)"), "--db", db)[0] == 0
    faults = spec("faults.py:make(length=4)")
    code, out, _ = run_cli("scan", "--dataset", faults, "--db", db, "--timeout", "30", "--format", "json")
    summary = json.loads(out)
    assert code == 0 and summary["scanned"] == 4
    assert any(
        "names no samples" in note and "measuring every sample again" in note for note in summary["notes"]
    )


def test_an_index_of_the_previous_schema_is_migrated(tmp_path: Path) -> None:
    from datalint.index import store

    path = tmp_path / "v1.db"
    with closing(sqlite3.connect(path)) as connection:
        connection.executescript(store._SCHEMA + "PRAGMA user_version = 1;")
    store.open_index(path).close()
    with closing(sqlite3.connect(path)) as connection:
        assert connection.execute("PRAGMA user_version").fetchone()[0] == store.SCHEMA_VERSION
        tables = {row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"sample_files", "sample_history"} <= tables


@pytest.mark.slow
def test_a_reordered_keyed_dataset_is_followed_without_measuring(tmp_path: Path) -> None:
    (tmp_path / "keyed_ds.py").write_text(KEYED_DATASET)
    ids = tmp_path / "ids.json"
    order = [f"r{n:03d}" for n in range(12)] + ["bad-1"]
    ids.write_text(json.dumps(order))
    args = ("--dataset", f"{tmp_path / 'keyed_ds.py'}:Keyed({str(ids)!r})", "--db", str(tmp_path / "k.db"))
    scan_in_child(*args)
    ids.write_text(json.dumps(order[::-1]))  # the export came out in the opposite order
    summary = scan_in_child(*args)
    assert summary["scanned"] == 0 and summary["changes"]["moved"] == 12  # r006 stays in the middle
    assert quarantined_keys(tmp_path / "k.quarantine.json") == {"bad-1": 0}
    keys = [row[0] for row in rows(tmp_path / "k.db", "SELECT key FROM samples ORDER BY position_of(idx)")]
    assert keys == order[::-1]


def test_a_folder_that_empties_is_refused_as_vanished_and_keeps_its_index(
    folder: Path, tmp_path: Path
) -> None:
    from datalint.scan import api, images

    db, quarantine = tmp_path / "i.db", tmp_path / "i.quarantine.json"
    damage(folder / "cat" / "000.png")
    scan_images(folder, db)
    before = quarantine.read_bytes()
    for path in folder.rglob("*.png"):
        path.unlink()  # the mount is empty
    options = api.ScanOptions(workers=1, vanished_fraction=0.5)
    with pytest.raises(api.SourceVanishedError, match="12 indexed samples are gone and none were added"):
        api.scan_source(images.images_description(folder=str(folder)), options, db=db, quarantine=quarantine)
    assert quarantine.read_bytes() == before
    assert rows(db, "SELECT COUNT(*) FROM samples") == [(12,)]
    assert rows(db, "SELECT * FROM sample_history") == []


RACING_DATASET = FOLDER_DATASET + """

class Racing(Folder):
    '''Rewrites one file while that file is being measured, as a writer racing the scan would.'''

    def __getitem__(self, index):
        path, target = self.samples[index]
        marker = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(path))), "raced")
        if path.endswith("002.png") and not os.path.exists(marker):
            open(marker, "w").close()
            with open(path, "ab") as f:
                f.write(b"appended while measured")
        return super().__getitem__(index)
"""


@pytest.mark.slow
def test_a_file_that_changes_while_it_is_measured_is_measured_again(tmp_path: Path) -> None:
    root = tmp_path / "tree"
    for n in range(4):
        write_image(root / "cat" / f"{n:03d}.png")
    (tmp_path / "racing_ds.py").write_text(RACING_DATASET)
    args = ("--dataset", f"{tmp_path / 'racing_ds.py'}:Racing({str(root)!r})", "--db", str(tmp_path / "r.db"))
    assert scan_in_child(*args)["scanned"] == 4
    again = scan_in_child(*args)  # the state on record is the one from before the rewrite
    assert again["scanned"] == 1 and again["changes"]["changed"] == 1
    assert scan_in_child(*args)["scanned"] == 0


SLOW_NEW_FILES = FOLDER_DATASET + '''

class SlowOnNew(Folder):
    """The files named new-* take a quarter of a second each to load."""

    def __getitem__(self, index):
        if "new-" in self.samples[index][0]:
            import time
            time.sleep(0.25)
        return super().__getitem__(index)
'''


@pytest.mark.slow
def test_an_incremental_scan_killed_while_measuring_resumes_without_measuring_a_file_twice(
    tmp_path: Path,
) -> None:
    import signal
    import subprocess
    import time

    from scan_support import PYTHON, ROOT

    root = tmp_path / "tree"
    for n in range(6):
        write_image(root / "cat" / f"{n:03d}.png")
    (tmp_path / "slow_ds.py").write_text(SLOW_NEW_FILES)
    db = tmp_path / "s.db"
    args = ("--dataset", f"{tmp_path / 'slow_ds.py'}:SlowOnNew({str(root)!r})", "--db", str(db))
    assert scan_in_child(*args)["scanned"] == 6
    added = [write_image(root / "cat" / f"new-{n:02d}.png") for n in range(16)]
    child = subprocess.Popen(
        [PYTHON, "-m", "datalint", "scan", *args, "--workers", "1", "--progress", "none"],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while _new_rows(db) < 3 and time.monotonic() < deadline and child.poll() is None:
            time.sleep(0.05)
        child.send_signal(signal.SIGKILL)
    finally:
        child.wait(timeout=30)
    measured = _new_rows(db)
    assert 3 <= measured < len(added), "the scan was to be killed in the middle of the added files"

    resumed = scan_in_child(*args)
    assert resumed["scanned"] == len(added) - measured  # each file measured once in all
    assert resumed["changes"]["added"] == len(added) - measured and resumed["changes"]["changed"] == 0
    assert _new_rows(db) == len(added)


def _new_rows(db: Path) -> int:
    """Rows of the new-* files the index holds, read as another process would."""
    try:
        with closing(sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True, timeout=5)) as connection:
            query = "SELECT count(*) FROM samples WHERE key LIKE '%new-%'"
            return int(connection.execute(query).fetchone()[0])
    except sqlite3.OperationalError:  # the table being written for the first time
        return 0
