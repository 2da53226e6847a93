"""One reading of the list from an index: the training path and the service give the same entries,
kinds in severity order, details joined as the scan writes them."""

from __future__ import annotations

import json
from pathlib import Path

from datalint.index import store
from datalint.service.lists import build_list
from datalint.training.quarantine import load_quarantine


def _index_with_two_kinds(path: Path) -> Path:
    db = store.open_index(path)
    try:
        run = store.start_run(
            db, kind="dataset", spec="m:ds", length=10, fingerprint=None, options={}, environment={}
        )
        store.write_samples(db, [store.sample_values({"idx": 3, "key": "k3", "status": "ok", "run_id": run})])
        with store.transaction(db):
            db.conn.executemany(
                "INSERT INTO findings (idx, kind, detail, quarantine) VALUES (?, ?, ?, 1)",
                [(3, "slow", "12 s"), (3, "crash", "SIGSEGV")],  # written in the other order
            )
    finally:
        db.close()
    return path


def test_the_training_path_and_the_service_read_the_same_entry(tmp_path: Path) -> None:
    index = _index_with_two_kinds(tmp_path / "index.db")
    loaded = load_quarantine(index)
    served = json.loads(build_list(index).served.body)["samples"]
    assert (
        [list(kinds) for kinds in loaded.kinds] == [entry["kinds"] for entry in served] == [["crash", "slow"]]
    )
    assert list(loaded.details) == [entry["detail"] for entry in served] == ["SIGSEGV; 12 s"]
    assert list(loaded.keys) == [entry["key"] for entry in served] == ["k3"]
