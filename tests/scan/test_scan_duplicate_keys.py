"""A key that names several samples is a `duplicate_key` finding on each of them, quarantined by default."""

from __future__ import annotations

import contextlib
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

import datalint
from datalint.index import store
from datalint.scan import policy, summaries, summary_findings

DATASET = '''
from torch.utils.data import Dataset


class SharedKeys(Dataset):
    """Every odd sample is named "same"; the even ones have keys of their own."""

    def __len__(self):
        return 12

    def __getitem__(self, index):
        return [float(index)]

    def datalint_key(self, index):
        return "same" if index % 2 else f"sample-{index}"


class RepeatedPaths(SharedKeys):
    """The ImageFolder convention: a path listed twice (oversampling by repeating an entry)."""

    def __init__(self):
        self.samples = [(f"img/{i}.png", 0) for i in range(10)] + [("img/3.png", 0)]

    def __len__(self):
        return len(self.samples)

    datalint_key = None
'''


def scanned(tmp_path: Path, target: str) -> tuple[Any, dict[str, Any]]:
    (tmp_path / "keys.py").write_text(DATASET, encoding="utf-8")
    summary = datalint.scan(f"{tmp_path / 'keys.py'}:{target}", db=tmp_path / "keys.db", workers=1)
    return summary, json.loads(Path(summary.quarantine_path).read_text(encoding="utf-8"))


def test_every_sample_of_a_shared_key_is_a_quarantined_duplicate_key(tmp_path: Path) -> None:
    summary, document = scanned(tmp_path, "SharedKeys()")
    assert summary.findings == {"duplicate_key": 6}
    entries = document["samples"]
    assert [entry["index"] for entry in entries] == [1, 3, 5, 7, 9, 11]
    assert {entry["key"] for entry in entries} == {"same"}
    assert all(entry["kinds"] == ["duplicate_key"] for entry in entries)
    assert entries[0]["detail"] == "key 'same' names 6 samples (also #3, #5, #7 and 2 more)"
    assert entries[2]["detail"] == "key 'same' names 6 samples (also #1, #3, #7 and 2 more)"


def test_a_path_listed_twice_names_both_samples(tmp_path: Path) -> None:
    _summary, document = scanned(tmp_path, "RepeatedPaths()")
    assert [(entry["index"], entry["key"], entry["detail"]) for entry in document["samples"]] == [
        (3, "img/3.png", "key 'img/3.png' names 2 samples (also #10)"),
        (10, "img/3.png", "key 'img/3.png' names 2 samples (also #3)"),
    ]


def test_the_summary_pass_finds_the_same_duplicate_keys(tmp_path: Path) -> None:
    scanned(tmp_path, "SharedKeys()")
    with contextlib.closing(store.open_index(tmp_path / "keys.db", create=False)) as db:
        options = policy.PolicyOptions()
        whole = policy.derive_findings(db, options)
        by_parts = summary_findings.findings(db, summaries.summarize(db.conn), options, part_rows=4)[1]
    assert [f for f in by_parts if f.kind == "duplicate_key"] == [
        f for f in whole if f.kind == "duplicate_key"
    ]
    assert len([f for f in whole if f.kind == "duplicate_key"]) == 6


@pytest.mark.parametrize("kinds", ["error,crash"])
def test_a_policy_without_it_reports_it_and_lists_nothing(tmp_path: Path, kinds: str) -> None:
    (tmp_path / "keys.py").write_text(DATASET, encoding="utf-8")
    summary = datalint.scan(
        f"{tmp_path / 'keys.py'}:SharedKeys()", db=tmp_path / "k.db", workers=1, kinds=kinds
    )
    assert summary.findings == {"duplicate_key": 6} and summary.quarantined == 0
    with contextlib.closing(sqlite3.connect(tmp_path / "k.db")) as connection:
        rows = connection.execute("SELECT quarantine FROM findings WHERE kind = 'duplicate_key'").fetchall()
    assert rows == [(0,)] * 6
