"""`--backend dask` gives the index and quarantine list the local engine gives, on a real LocalCluster
that the scan starts and stops itself."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from dask_support import samples, spec, stray_children

import datalint
from datalint.scan import api

FAULTS = "segfault=[3], nan=[9], sigkill=[30], error=[47], hang_c=[60], short=[75], bad_label=[88]"
LENGTH = 120
COMPARED = ("key", "status", "error_type", "nbytes", "signature", "non_finite", "labels", "requires_grad")


@pytest.fixture(scope="module")
def both(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    folder = tmp_path_factory.mktemp("same")
    dataset = spec(f"make(length={LENGTH}, {FAULTS})")
    common: dict[str, Any] = {"workers": 2, "timeout": 1.0, "label": ["label"], "num_classes": 10}
    local = datalint.scan(dataset, db=folder / "local.db", **common)
    children_before = stray_children(os.getpid())
    remote = datalint.scan(dataset, db=folder / "dask.db", backend="dask", **common)
    return {
        "local": (local, folder / "local.db"),
        "dask": (remote, folder / "dask.db"),
        "children_before": children_before,
        "children_after": stray_children(os.getpid()),
    }


def quarantine(summary: api.ScanSummary) -> dict[str, Any]:
    return json.loads(Path(summary.quarantine_path).read_text())


@pytest.mark.slow
def test_every_sample_has_the_row_the_local_engine_gives(both: dict[str, Any]) -> None:
    (_, local_db), (_, dask_db) = both["local"], both["dask"]
    local, remote = samples(local_db), samples(dask_db)
    assert sorted(remote) == list(range(LENGTH))  # one row per sample: none lost, none doubled
    for index in range(LENGTH):
        expected = {column: local[index][column] for column in COMPARED}
        assert {column: remote[index][column] for column in COMPARED} == expected, f"sample {index}"
    assert (remote[3]["status"], remote[3]["error_type"]) == ("crash", "SIGSEGV")
    assert "Fatal Python error: Segmentation fault" in remote[3]["traceback"]
    assert (remote[60]["status"], remote[60]["error_type"]) == ("timeout", "Timeout")
    assert "_hang_c" in remote[60]["error_message"]  # the in-worker watchdog dumped the hung stack


@pytest.mark.slow
def test_the_quarantine_list_is_the_local_engines(both: dict[str, Any]) -> None:
    (local, _), (remote, _) = both["local"], both["dask"]
    assert remote.statuses == local.statuses == {"ok": 116, "error": 1, "crash": 2, "timeout": 1}
    assert remote.findings == local.findings
    local_list, dask_list = quarantine(local), quarantine(remote)
    for field in ("dataset", "length", "fingerprint", "policy"):
        assert dask_list[field] == local_list[field]

    def entries(document: dict[str, Any]) -> list[tuple[Any, ...]]:
        # A timeout's detail carries the measured seconds; everything else must match word for word.
        return [
            (e["index"], e["key"], e["kinds"], None if "timeout" in e["kinds"] else e["detail"])
            for e in document["samples"]
        ]

    assert entries(dask_list) == entries(local_list)
    assert [e["index"] for e in dask_list["samples"]] == [3, 9, 30, 47, 60, 75, 88]


@pytest.mark.slow
def test_the_scan_stops_the_cluster_it_started(both: dict[str, Any]) -> None:
    # The scheduler ran in this process, the workers and their nanny-spawned processes as children.
    assert both["children_after"].keys() <= both["children_before"].keys(), both["children_after"]
