"""Dask workers that die mid-scan, on a real 2-process LocalCluster passed as an existing cluster
(`scheduler=`): a worker process SIGKILLed from outside, and a sample that kills its dask worker."""

from __future__ import annotations

import os
import signal
import threading
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from dask_support import local_cluster, row_count, samples, spec, wait_until

from datalint.scan import api
from datalint.scan.policy import PolicyOptions
from datalint.scan.sources import ScanWarning, SourceDescription


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    with local_cluster(workers=2) as running:
        yield running


def scan_on(cluster: Any, dataset: str, db: Path, chunk_size: int) -> tuple[api.ScanSummary, list[str]]:
    """Scan through the API on `cluster`, small shards; (summary, the ScanWarnings it raised)."""
    options = api.ScanOptions(
        workers=2,
        timeout=10.0,
        policy=PolicyOptions(timeout=10.0),
        chunk_size=chunk_size,
        backend="dask",
        scheduler=cluster.scheduler_address,
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ScanWarning)
        summary = api.scan_source(SourceDescription.make("dataset", dataset), options, db=db)
    return summary, [str(w.message) for w in caught if issubclass(w.category, ScanWarning)]


def worker_pids(cluster: Any) -> dict[str, int]:
    from distributed import Client

    with Client(cluster) as client:
        return dict(client.run(os.getpid))


@pytest.mark.slow
def test_a_worker_process_killed_mid_scan_loses_and_doubles_nothing(cluster: Any, tmp_path: Path) -> None:
    db = tmp_path / "killed.db"
    pids = worker_pids(cluster)
    address, victim = sorted(pids.items())[0]
    outcome: dict[str, Any] = {}

    def scan() -> None:
        try:
            outcome["result"] = scan_on(cluster, spec("make(length=300, delay=0.02)"), db, chunk_size=10)
        except BaseException as exc:  # handed to the test thread, which fails with it
            outcome["error"] = exc

    thread = threading.Thread(target=scan)
    thread.start()
    wait_until(lambda: row_count(db) >= 40, 120, "the first shards to be written")
    os.kill(victim, signal.SIGKILL)  # not a sample's doing: the process is killed from outside
    thread.join(180)
    assert not thread.is_alive()
    assert "error" not in outcome, outcome.get("error")
    summary, notes = outcome["result"]
    rows = samples(db)
    assert sorted(rows) == list(range(300))  # exactly one row per sample
    assert {row["status"] for row in rows.values()} == {"ok"}
    assert summary.statuses == {"ok": 300, "error": 0, "crash": 0, "timeout": 0}
    assert summary.quarantined == 0
    # The shards in flight on the dead worker were run again, and the user is told so.
    assert any(address in note and "died while measuring" in note for note in notes), notes


@pytest.mark.slow
def test_a_sample_that_kills_its_dask_worker_is_named(cluster: Any, tmp_path: Path) -> None:
    db = tmp_path / "poison.db"
    summary, notes = scan_on(cluster, spec("make(length=40, kill_worker=[13])"), db, chunk_size=2)
    rows = samples(db)
    assert sorted(rows) == list(range(40))
    assert (rows[13]["status"], rows[13]["error_type"]) == ("crash", "KilledWorker")
    assert "died while measuring this sample alone" in rows[13]["error_message"]
    assert all(row["status"] == "ok" for index, row in rows.items() if index != 13)
    assert summary.quarantined == 1
    # Its shard died, ran again alone, died again and was halved; the sample alone died a third time.
    assert any("died while measuring 2 samples (12..13)" in note for note in notes), notes
    assert any("halving them" in note and "2 samples (12..13)" in note for note in notes), notes
    # Suspects ran alone: once they did, no other shard was in flight to die with them.
    first_halving = next(n for n, note in enumerate(notes) if "halving them" in note)
    assert not [note for note in notes[first_halving:] if "died while measuring" in note], notes
