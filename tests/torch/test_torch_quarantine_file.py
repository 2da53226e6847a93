"""Reading quarantine lists: quarantine.json and scan indices, with clear errors for bad files."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from torch_test_data import write_quarantine

from datalint.index import store
from datalint.torch import Quarantine, QuarantineFormatError, load_quarantine
from datalint.training.record import Failure, record_failure, start_guard_run


def test_json_list_loads_as_an_immutable_sorted_list(tmp_path: Path) -> None:
    path = write_quarantine(tmp_path / "q.json", [9, 2, 5], length=10, keys=["i", "c", "f"])
    quarantine = load_quarantine(path)
    assert quarantine.indices.tolist() == [2, 5, 9]
    assert quarantine.keys == ("c", "f", "i")
    assert quarantine.kinds == (("error",),) * 3
    assert len(quarantine) == 3
    assert 5 in quarantine and 4 not in quarantine and "f" in quarantine and "z" not in quarantine
    assert quarantine.length == 10
    with pytest.raises(ValueError, match="read-only"):
        quarantine.indices[0] = 3
    with pytest.raises(AttributeError):
        quarantine.length = 11  # type: ignore[misc]


def _document(**changes: object) -> dict[str, object]:
    base: dict[str, object] = {
        "format": "datalint-quarantine/1",
        "length": 10,
        "samples": [{"index": 3, "key": None, "kinds": ["crash"]}],
    }
    base.update(changes)
    return base


@pytest.mark.parametrize(
    ("document", "message"),
    [
        (_document(format="datalint-quarantine/9"), r"format: expected 'datalint-quarantine/1'"),
        (_document(length="10"), r"length: expected an integer or null, got '10'"),
        (_document(samples={"3": 1}), r"samples: expected a list, got an object"),
        (_document(samples=[{"index": "3", "kinds": []}]), r"samples\[0\]\.index: expected a non-negative"),
        (_document(samples=[{"index": True, "kinds": []}]), r"samples\[0\]\.index"),
        (_document(samples=[{"index": 1, "kinds": "crash"}]), r"samples\[0\]\.kinds: expected a list of str"),
        (_document(samples=[{"index": 1, "kinds": [], "key": 7}]), r"samples\[0\]\.key: expected a string"),
        (_document(samples=[{"index": 1}, {"index": 1}]), r"index 1 is listed twice"),
        (_document(samples=[{"index": 10}]), r"index 10 is past the end of a dataset of length 10"),
        ([1, 2], r"expected a JSON object, got a list"),
    ],
)
def test_malformed_list_is_refused_naming_file_and_field(
    tmp_path: Path, document: object, message: str
) -> None:
    path = tmp_path / "quarantine.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    with pytest.raises(QuarantineFormatError, match=message) as caught:
        load_quarantine(path)
    assert str(path) in str(caught.value)


def test_not_json_and_missing_file_say_what_to_do(tmp_path: Path) -> None:
    broken = tmp_path / "quarantine.json"
    broken.write_text('{"format": "datalint-quarantine/1",', encoding="utf-8")
    with pytest.raises(QuarantineFormatError, match=r"not valid JSON at line 1"):
        load_quarantine(broken)
    with pytest.raises(QuarantineFormatError, match=r"no such quarantine list; run `datalint scan`"):
        load_quarantine(tmp_path / "absent.json")


def test_pickle_is_never_read(tmp_path: Path) -> None:
    import pickle

    path = tmp_path / "quarantine.pkl"
    path.write_bytes(pickle.dumps({"format": "datalint-quarantine/1", "samples": []}))
    with pytest.raises(QuarantineFormatError, match="not a quarantine list"):
        load_quarantine(path)


def _scan_index(path: Path, *, length: int) -> None:
    """An index as a scan leaves it: a run, sample rows and the findings policy derived."""
    store.open_index(path).close()  # the schema, as the scan creates it
    with sqlite3.connect(path) as connection:
        connection.execute(
            "INSERT INTO runs (kind, spec, length, fingerprint) VALUES ('dataset', 'mymod:ds', ?, 'f00d')",
            (length,),
        )
        connection.executemany(
            "INSERT INTO samples (idx, key, status) VALUES (?, ?, ?)",
            [(i, f"img/{i}.jpg", "crash" if i == 4 else "ok") for i in range(length)],
        )
        connection.executemany(
            "INSERT INTO findings (idx, kind, detail, quarantine) VALUES (?, ?, ?, ?)",
            [(4, "crash", "SIGSEGV", 1), (6, "non_finite", "3 NaN", 1), (6, "oversized", "9 MB", 1),
             (8, "slow", "2 s", 0)],
        )


def test_scan_index_loads_the_quarantined_findings(tmp_path: Path) -> None:
    path = tmp_path / "scan.db"
    _scan_index(path, length=12)
    quarantine = load_quarantine(path)
    assert quarantine.indices.tolist() == [4, 6]  # "slow" is not quarantined
    assert quarantine.keys == ("img/4.jpg", "img/6.jpg")
    assert quarantine.kinds == (("crash",), ("non_finite", "oversized"))
    assert (quarantine.length, quarantine.fingerprint, quarantine.dataset) == (12, "f00d", "mymod:ds")


def test_guard_failures_in_an_index_are_quarantined(tmp_path: Path) -> None:
    path = tmp_path / "scan.db"
    _scan_index(path, length=12)
    run_id = start_guard_run(path, spec="train", length=12, fingerprint=None, options={}, environment={})
    failure = Failure(9, "img/9.jpg", "OSError", "truncated", "Traceback ...", 0.01, 1234, "2026-11-30")
    record_failure(path, run_id, failure)
    assert load_quarantine(path).indices.tolist() == [4, 6, 9]
    assert load_quarantine(path).length == 12  # from the scan run, not the guard's


def test_foreign_sqlite_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    with sqlite3.connect(path) as connection:
        connection.execute("PRAGMA user_version = 1")
        connection.execute("CREATE TABLE t (x)")
    with pytest.raises(QuarantineFormatError, match=r"not a datalint index \(no table runs, samples"):
        load_quarantine(path)


def test_in_memory_list_checks_its_input() -> None:
    quarantine = Quarantine.from_indices([3, 1], length=5, keys=["d", "b"])
    assert quarantine.indices.tolist() == [1, 3] and quarantine.keys == ("b", "d")
    with pytest.raises(QuarantineFormatError, match="listed twice"):
        Quarantine.from_indices([1, 1], length=5)
    with pytest.raises(ValueError, match="negative index -1"):
        Quarantine.from_indices([-1], length=5)
