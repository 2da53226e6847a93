"""The served list: appended for ingested failures, rebuilt off the request path, saved and restored.

A real index written through the scan's store, the service's registry and its real ingest writer, wired
as `datalint serve` wires them; the appended list must be the list a rebuild gives (as entries). The
last test runs the real service (uvicorn) and SIGKILLs it."""

from __future__ import annotations

import gzip
import hashlib
import json
import logging
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from service_data import bad_indices
from service_server import Server, dataset_table

from datalint.cli import main
from datalint.index import store
from datalint.index.failures import FailureRecord
from datalint.service.config import parse_config
from datalint.service.ingest import IngestWriter
from datalint.service.lists import build_list, index_state, scan_list
from datalint.service.registry import Registry
from datalint.training.quarantine import load_quarantine


def _scanned_index(
    path: Path, bad: list[int], kind: str = "truncated", policy: list[str] | None = None
) -> None:
    db = store.open_index(path)
    try:
        options = {"policy": {"kinds": policy}} if policy else {}
        store.start_run(
            db, kind="dataset", spec="t:ds", length=100, fingerprint=None, options=options, environment={}
        )
        with store.transaction(db):
            db.conn.executemany(
                "INSERT INTO samples (idx, key, status, run_id) VALUES (?, ?, 'error', 1)",
                ((i, f"img/{i}.jpg") for i in bad),
            )
            db.conn.executemany(
                "INSERT INTO findings (idx, kind, detail, quarantine) VALUES (?, ?, 'cut', 1)",
                ((i, kind) for i in bad),
            )
    finally:
        db.close()


_WRITERS: dict[int, IngestWriter] = {}


def _ingest(registry: Registry, failures: list[FailureRecord]) -> None:
    """Through the registry's one writer, kept open as the service keeps it (closing it checkpoints the
    WAL, which the service does only at shutdown)."""
    writer = _WRITERS.get(id(registry))
    if writer is None:
        writer = _WRITERS[id(registry)] = IngestWriter(
            "ds",
            registry.index_path("ds"),
            lambda name, indexes, before: registry.lists.appended(name, indexes, before),
            before_commit=lambda: index_state(registry.index_path("ds")),
        )
    writer.submit(failures).result(timeout=30)


@pytest.fixture(autouse=True)
def _close_writers() -> Iterator[None]:
    yield
    while _WRITERS:
        _WRITERS.popitem()[1].close()


def _entries(document: bytes) -> dict[int, dict[str, object]]:
    samples = json.loads(document)["samples"]
    assert len(samples) == len({s["index"] for s in samples})  # no sample listed twice
    return {s["index"]: s for s in samples}


@pytest.fixture
def registry(tmp_path: Path) -> Registry:
    config = parse_config(
        {"service": {"data-dir": str(tmp_path)}, "datasets": [{"name": "ds", "images": "/none"}]},
        tmp_path / "datalint-service.toml",
    )
    registry = Registry(config)
    _scanned_index(registry.index_path("ds"), [3, 10, 50])
    return registry


def test_new_failures_are_appended_to_the_built_list(
    registry: Registry, caplog: pytest.LogCaptureFixture
) -> None:
    first = registry.lists.served_list("ds")
    assert first is not None and first.entries == 3
    caplog.set_level(logging.INFO, logger="datalint.service")
    _ingest(
        registry, [FailureRecord(7, "img/7.jpg", "OSError", "flaky"), FailureRecord(99, None, "E", "m")]
    )
    served = registry.lists.served_list("ds")
    assert served is not None
    assert not [r for r in caplog.records if "built" in r.getMessage()]  # appended, never rebuilt
    assert served.etag != first.etag and served.entries == 5
    rebuilt = build_list(registry.index_path("ds"))
    assert _entries(served.body) == _entries(rebuilt.served.body) and rebuilt.entries == 5
    assert gzip.decompress(served.gzipped) == served.body
    # the append added its entries beside the built body, never a copy of it: what it costs is what
    # it adds, however long the list
    assert served.parts[0] is first.parts[0] and served.gzip_parts[0] is first.gzip_parts[0]
    assert sum(map(len, served.parts[1:])) < 200
    assert _entries(served.body)[7] == {
        "index": 7,
        "key": "img/7.jpg",
        "kinds": ["error"],
        "detail": "OSError: flaky",
    }
    registry.quarantine_path("ds").write_bytes(served.body)
    assert sorted(load_quarantine(registry.quarantine_path("ds"))) == [3, 7, 10, 50, 99]


def test_a_failure_for_a_listed_sample_or_sent_twice_is_never_listed_twice(registry: Registry) -> None:
    registry.lists.served_list("ds")
    _ingest(registry, [FailureRecord(60, "img/60.jpg", "OSError", "flaky")])
    _ingest(
        registry, [FailureRecord(60, "img/60.jpg", "OSError", "flaky"), FailureRecord(10, None, "E", "m")]
    )
    served = registry.lists.served_list("ds")
    assert served is not None
    entries = _entries(served.body)
    assert sorted(entries) == [3, 10, 50, 60]
    assert entries[10]["kinds"] == ["error", "truncated"]  # the scan's finding and the guard's, one entry
    assert gzip.decompress(served.gzipped) == served.body


def test_an_unchanged_list_keeps_its_etag_and_an_empty_list_takes_appends(tmp_path: Path) -> None:
    config = parse_config(
        {"service": {"data-dir": str(tmp_path)}, "datasets": [{"name": "ds", "images": "/none"}]},
        tmp_path / "datalint-service.toml",
    )
    registry = Registry(config)
    _scanned_index(registry.index_path("ds"), [])
    empty = registry.lists.served_list("ds")
    assert empty is not None and empty.entries == 0
    assert registry.lists.served_list("ds") is empty
    _ingest(registry, [FailureRecord(5, "k", "E", "m")])
    served = registry.lists.served_list("ds")
    assert served is not None and sorted(_entries(served.body)) == [5]
    assert gzip.decompress(served.gzipped) == served.body


def test_the_etag_is_the_contents_hash_whether_appended_or_rebuilt(registry: Registry) -> None:
    first = registry.lists.served_list("ds")
    assert first is not None
    # entries past the last listed index: the appended bytes are the bytes a rebuild writes
    _ingest(
        registry, [FailureRecord(70, "img/70.jpg", "OSError", "a"), FailureRecord(90, None, "E", "b")]
    )
    appended = registry.lists.current("ds")
    rebuilt = build_list(registry.index_path("ds")).served
    assert appended is not None and appended.etag != first.etag
    assert appended.etag == rebuilt.etag  # the same content, the same ETag, however it was made
    assert json.loads(appended.body)["created"] == json.loads(first.body)["created"]


def _foreign_finding(registry: Registry, index: int) -> None:
    """Another program (a CLI, a watcher) marks one more sample for quarantine."""
    db = store.open_index(registry.index_path("ds"))
    try:
        with store.transaction(db):
            db.conn.execute(
                "INSERT INTO findings (idx, kind, detail, quarantine) VALUES (?, 'truncated', 'cut', 1)",
                (index,),
            )
    finally:
        db.close()


def _until(check: object, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, "not within the timeout"
        time.sleep(0.02)


def test_a_change_by_another_program_is_published_by_the_keeper_and_the_old_list_served_meanwhile(
    registry: Registry,
) -> None:
    keeper = registry.lists
    keeper.poll = 0.05
    keeper.start()
    try:
        _until(lambda: keeper.current("ds") is not None)
        old = keeper.current("ds")
        assert old is not None
        with keeper._building.setdefault("ds", threading.Lock()):  # a build that takes its time
            _foreign_finding(registry, 20)
            time.sleep(0.3)
            assert keeper.current("ds") is old  # served at once, as it was, with its own ETag
        _until(lambda: keeper.current("ds") is not old)
        new = keeper.current("ds")
        assert new is not None and new.etag != old.etag
        assert (
            sorted(_entries(new.body)) == [3, 10, 20, 50] == list(load_quarantine(registry.index_path("ds")))
        )
        saved = registry.folder("ds") / "served"
        meta = saved / "list.meta.json"
        _until(lambda: meta.is_file() and json.loads(meta.read_text())["etag"] == new.etag)
        assert (saved / "list.json").read_bytes() == new.body  # what a restart will serve first
        time.sleep(0.3)
        assert keeper.current("ds") is new  # nothing changed since: no rebuild, the same ETag
    finally:
        keeper.stop()


def test_a_restarted_service_serves_its_saved_list_and_the_failures_acknowledged_after_it(
    registry: Registry, tmp_path: Path
) -> None:
    registry.lists.served_list("ds")
    registry.lists._save("ds")
    _ingest(registry, [FailureRecord(99, "img/99.jpg", "OSError", "late")])  # after the save
    acknowledged = registry.lists.current("ds")
    assert acknowledged is not None

    restarted = Registry(registry.config)  # a new process's registry, on the same files
    restarted.lists.poll = 3600.0  # no rebuild: what is served comes from the saved files
    restarted.lists.start()
    try:
        _until(lambda: restarted.lists._restored.is_set())
        served = restarted.lists.current("ds")
        assert served is not None
        assert sorted(_entries(served.body)) == [3, 10, 50, 99]
        assert served.etag == acknowledged.etag and served.body == acknowledged.body
        assert gzip.decompress(served.gzipped) == served.body
    finally:
        restarted.lists.stop()


def test_a_sigkilled_service_restarts_on_its_saved_list_with_every_acknowledged_failure(
    tmp_path: Path,
) -> None:
    server = Server(tmp_path, dataset_table("train")).start()
    quarantine = "/v1/datasets/train/quarantine"
    try:
        job = server.request("POST", "/v1/datasets/train/scans").json()
        assert server.wait_job(job["id"])["state"] == "succeeded"
        # the job ends once its list is published: the first GET after it is the scan's list
        first = server.request("GET", quarantine, token="reader")
        assert [s["index"] for s in first.json()["samples"]] == bad_indices()
        failure = {"index": 7, "key": "k7", "error_type": "OSError", "message": "flaky"}
        sent = server.request(
            "POST", "/v1/datasets/train/failures", token="writer", json={"failures": [failure]}
        )
        assert sent.status_code == 200
        server.kill()  # the saved list predates the failure; the index has it
        first_run = len(server.log.read_text())
        server.start()
        again = server.request("GET", quarantine, token="reader")
        assert 7 in {s["index"] for s in again.json()["samples"]}
        assert "list of train restored" in server.log.read_text()[first_run:]
        index = tmp_path / "state" / "datasets" / "train" / "index.db"
        assert sorted(s["index"] for s in again.json()["samples"]) == list(load_quarantine(index))
        etag = again.headers["etag"]
        for match in (etag, f'"x", W/{etag}'):  # 304 unless a rebuild published another list meanwhile
            answer = server.request("GET", quarantine, token="reader", headers={"If-None-Match": match})
            assert answer.status_code == 304 or answer.headers["etag"] != etag
        star = server.request("GET", quarantine, token="reader", headers={"If-None-Match": "*"})
        assert star.status_code == 304
    finally:
        server.stop()


def _scans_list(index: Path, kinds: str) -> Path:
    """The list beside the index as a scan writes it (`datalint quarantine -o` writes it the same way)."""
    written = index.parent / "quarantine.json"
    # 1: the list holds samples, 0: it is empty
    assert main(["quarantine", str(index), "--kinds", kinds, "-o", str(written)]) in (0, 1)
    return written


def test_a_never_listed_index_is_served_the_scans_list_until_its_first_build_is_published(
    tmp_path: Path,
) -> None:
    config = parse_config(
        {"service": {"data-dir": str(tmp_path)}, "datasets": [{"name": "ds", "images": "/none"}]},
        tmp_path / "datalint-service.toml",
    )
    registry = Registry(config)
    index = registry.index_path("ds")
    _scanned_index(index, [3, 10, 50], "error", ["error"])
    scans = _scans_list(index, "error").read_bytes()
    keeper = registry.lists
    building = keeper._building.setdefault("ds", threading.Lock())
    with building:  # a first build that takes its time (seconds for a million entries)
        keeper.start()
        _until(lambda: keeper.current("ds") is not None)
        served = keeper.current("ds")
        assert served is not None and served.body == scans and served.entries == 3
        assert served.etag == f'"{hashlib.sha256(scans).hexdigest()[:32]}"'
        # an acknowledged failure cannot be added to the scan's file: that list is withdrawn, and a
        # GET waits for the build, which has it
        _ingest(registry, [FailureRecord(70, "img/70.jpg", "OSError", "flaky")])
        assert keeper.current("ds") is None
    try:
        built = keeper.served_list("ds")
        assert built is not None and sorted(_entries(built.body)) == [3, 10, 50, 70]
        assert built.gzipped and gzip.decompress(built.gzipped) == built.body
    finally:
        keeper.stop()


def test_the_scans_list_is_not_served_where_it_may_not_be_the_indexs(tmp_path: Path) -> None:
    index = tmp_path / "ds" / "index.db"
    _scanned_index(index, [3, 10], "error", ["error"])
    assert scan_list(index) is None  # no list beside it
    _scans_list(index, "error")
    assert scan_list(index) is not None
    _scans_list(index, "all")  # written for another policy than the scan's
    assert scan_list(index) is None
    _scans_list(index, "error")
    db = store.open_index(index)
    try:  # a later run of another dataset into the same index
        store.start_run(
            db, kind="dataset", spec="t:other", length=100, fingerprint=None, options={}, environment={}
        )
    finally:
        db.close()
    assert scan_list(index) is None


def test_a_list_appended_to_many_times_is_served_whole_over_http(tmp_path: Path) -> None:
    # the parts a list is kept in go out one after the other: the client gets one valid body, gzipped
    # or not, with the right Content-Length
    server = Server(tmp_path, dataset_table("train", n=30, bad_every=10)).start()
    try:
        job = server.request("POST", "/v1/datasets/train/scans").json()
        assert server.wait_job(job["id"])["state"] == "succeeded"
        path = "/v1/datasets/train/quarantine"
        for n in range(5):
            batch = {"failures": [{"index": 21 + n, "error_type": "OSError", "message": "flaky"}]}
            posted = server.request("POST", "/v1/datasets/train/failures", token="writer", json=batch)
            assert posted.status_code == 200
        for encoding in ("gzip", "identity"):
            answer = server.request("GET", path, token="reader", headers={"Accept-Encoding": encoding})
            assert answer.headers.get("content-encoding", "identity") == encoding
            samples = [s["index"] for s in answer.json()["samples"]]
            assert samples == [*bad_indices(30, 10), 21, 22, 23, 24, 25]
    finally:
        server.stop()


def test_stopping_while_the_list_is_saved_finishes_the_save(
    registry: Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    from datalint.service import lists

    registry.lists.served_list("ds")  # built and saved
    _ingest(registry, [FailureRecord(99, "img/99.jpg", "OSError", "late")])  # appended, not saved
    published = registry.lists.current("ds")
    assert published is not None
    writing, real_write = threading.Event(), lists.write_atomically

    def slow_write(path: Path, parts: tuple[bytes, ...]) -> None:  # a large list on a slow disk
        writing.set()
        time.sleep(0.3)
        real_write(path, parts)

    monkeypatch.setattr(lists, "write_atomically", slow_write)
    saver = threading.Thread(target=registry.lists._save, args=("ds",))
    saver.start()
    assert writing.wait(timeout=10)
    registry.lists.stop()  # as SIGTERM's shutdown does, mid-save
    meta = registry.index_path("ds").parent / lists.SNAPSHOT_DIR / "list.meta.json"
    assert json.loads(meta.read_text())["etag"] == published.etag  # the snapshot is whole at stop
    saver.join(timeout=10)
