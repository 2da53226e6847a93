"""The served list follows ingested guard failures by appending to the built list, not rebuilding it.

A real index written through the scan's store, the service's registry and its real ingest writer, wired
as `datalint serve` wires them; the appended list must be the list a rebuild gives (as entries)."""

from __future__ import annotations

import gzip
import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from datalint.scan import store
from datalint.service.config import parse_config
from datalint.service.ingest import IncomingFailure, IngestWriter
from datalint.service.lists import build_list, index_state
from datalint.service.registry import Registry
from datalint.training.quarantine import load_quarantine


def _scanned_index(path: Path, bad: list[int]) -> None:
    db = store.open_index(path)
    try:
        store.start_run(
            db, kind="dataset", spec="t:ds", length=100, fingerprint=None, options={}, environment={}
        )
        with store.transaction(db):
            db.conn.executemany(
                "INSERT INTO samples (idx, key, status, run_id) VALUES (?, ?, 'error', 1)",
                ((i, f"img/{i}.jpg") for i in bad),
            )
            db.conn.executemany(
                "INSERT INTO findings (idx, kind, detail, quarantine) VALUES (?, 'truncated', 'cut', 1)",
                ((i,) for i in bad),
            )
    finally:
        db.close()


_WRITERS: dict[int, IngestWriter] = {}


def _ingest(registry: Registry, failures: list[IncomingFailure]) -> None:
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
        registry, [IncomingFailure(7, "img/7.jpg", "OSError", "flaky"), IncomingFailure(99, None, "E", "m")]
    )
    served = registry.lists.served_list("ds")
    assert served is not None
    assert not [r for r in caplog.records if "built" in r.getMessage()]  # appended, never rebuilt
    assert served.etag != first.etag and served.entries == 5
    rebuilt = build_list(registry.index_path("ds"))
    assert _entries(served.body) == _entries(rebuilt.served.body) and rebuilt.entries == 5
    assert gzip.decompress(served.gzipped) == served.body
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
    _ingest(registry, [IncomingFailure(60, "img/60.jpg", "OSError", "flaky")])
    _ingest(
        registry, [IncomingFailure(60, "img/60.jpg", "OSError", "flaky"), IncomingFailure(10, None, "E", "m")]
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
    _ingest(registry, [IncomingFailure(5, "k", "E", "m")])
    served = registry.lists.served_list("ds")
    assert served is not None and sorted(_entries(served.body)) == [5]
    assert gzip.decompress(served.gzipped) == served.body
