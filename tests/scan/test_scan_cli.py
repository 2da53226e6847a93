"""The face: exit codes, the JSON summary, the quarantine.json contract, `datalint quarantine`."""

from __future__ import annotations

import json

import jsonschema
import pytest
from scan_support import load_json, run_cli, spec

QUARANTINE_SCHEMA = {
    "type": "object",
    "required": ["format", "dataset", "length", "fingerprint", "created", "policy", "samples"],
    "properties": {
        "format": {"const": "datalint-quarantine/1"},
        "dataset": {"type": "string"},
        "length": {"type": ["integer", "null"]},
        "fingerprint": {"type": ["string", "null"]},
        "created": {"type": "string", "pattern": r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00$"},
        "policy": {"type": "array", "items": {"type": "string"}},
        "samples": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["index", "key", "kinds", "detail"],
                "additionalProperties": False,
                "properties": {
                    "index": {"type": "integer", "minimum": 0},
                    "key": {"type": ["string", "null"]},
                    "kinds": {"type": "array", "items": {"type": "string"}, "minItems": 1},
                    "detail": {"type": "string"},
                },
            },
        },
    },
}
DEMO = spec("demo.py:demo")
DEMO_FAULTS = {
    17: "crash",
    42: "error",
    99: "crash",
    123: "shape_mismatch",
    150: "non_finite",
    200: "label_out_of_range",
    250: "uncollatable",
    300: "missing_field",
}


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory):
    folder = tmp_path_factory.mktemp("demo")
    db = folder / "demo.db"
    code, out, err = run_cli(
        "scan",
        "--dataset",
        DEMO,
        "--label",
        "label",
        "--num-classes",
        "10",
        "--db",
        str(db),
        "--format",
        "json",
    )
    return code, json.loads(out), err, db


@pytest.mark.slow
def test_the_demo_finds_every_planted_fault(demo) -> None:
    code, summary, _, _ = demo
    assert code == 1
    document = load_json(summary["quarantine"])
    jsonschema.validate(document, QUARANTINE_SCHEMA)
    assert {entry["index"]: entry["kinds"][0] for entry in document["samples"]} == DEMO_FAULTS
    assert document["samples"][0]["key"] == "images/class7/0017.jpg"
    assert document["length"] == 400 and document["dataset"] == DEMO
    assert summary["statuses"] == {"ok": 397, "error": 1, "crash": 2, "timeout": 0}
    assert summary["findings"]["dtype_mismatch"] == 1 and summary["quarantined"] == 8


@pytest.mark.slow
def test_quarantine_rederives_with_another_policy_without_rescanning(demo, tmp_path) -> None:
    _, _, _, db = demo
    code, out, _ = run_cli("quarantine", str(db), "--kinds", "crash")
    assert code == 1  # the list holds samples, as a scan's exit says
    assert [entry["index"] for entry in json.loads(out)["samples"]] == [17, 99]

    target = tmp_path / "all.txt"
    code, _, err = run_cli("quarantine", str(db), "--kinds", "all", "--format", "text", "-o", str(target))
    lines = target.read_text().splitlines()
    assert code == 1 and "9 sample(s)" in err
    assert "333\timages/class3/0333.jpg\tdtype_mismatch\tfield 'image' has dtype float64" in "\n".join(lines)

    code, out, _ = run_cli("quarantine", str(db), "--num-classes", "13")
    assert 200 not in [entry["index"] for entry in json.loads(out)["samples"]]  # 12 is a class now


def test_unknown_kinds_and_a_missing_index_are_usage_errors(tmp_path) -> None:
    code, _, err = run_cli("quarantine", str(tmp_path / "none.db"))
    assert code == 2 and "no scan index at" in err
    code, _, err = run_cli("scan", "--dataset", spec("faults.py:clean"), "--kinds", "crash,bogus")
    assert code == 2 and "unknown finding kind 'bogus'; known kinds: all, default" in err


def test_a_misspelt_kind_suggests_the_closest_one() -> None:
    code, _, err = run_cli("scan", "--dataset", spec("faults.py:clean"), "--kinds", "crash,corupt")
    assert code == 2 and "unknown finding kind 'corupt' (did you mean 'corrupt'?)" in err
    code, _, err = run_cli("scan", "--dataset", spec("faults.py:clean"), "--kinds", "defualt")
    assert code == 2 and "(did you mean 'default'?)" in err


def test_a_clean_dataset_exits_0_with_a_table_and_an_empty_list(tmp_path) -> None:
    db = tmp_path / "clean.db"
    code, out, err = run_cli(
        "scan", "--dataset", spec("faults.py:clean"), "--db", str(db), "--progress", "plain"
    )
    assert code == 0
    assert "64 samples" in out and "ok 64" in out and "(0 sample(s))" in out
    assert "scanned 64/64 (100.0%)" in err  # the plain progress line a CI log gets
    assert load_json(tmp_path / "clean.quarantine.json")["samples"] == []


def test_an_index_of_another_dataset_is_not_silently_mixed(tmp_path) -> None:
    db = str(tmp_path / "one.db")
    assert run_cli("scan", "--dataset", spec("faults.py:make(length=4)"), "--db", db)[0] == 0
    code, _, err = run_cli("scan", "--dataset", spec("faults.py:make(length=5)"), "--db", db)
    assert code == 2 and "--rescan" in err
    code, _, err = run_cli(
        "scan", "--dataset", spec("faults.py:make(length=4)"), "--db", db, "--label", "0", "--no-incremental"
    )
    assert code == 2 and "--label" in err


def test_workers_zero_warns_on_stderr(tmp_path) -> None:
    code, _, err = run_cli(
        "scan",
        "--dataset",
        spec("faults.py:make(length=3)"),
        "--db",
        str(tmp_path / "w.db"),
        "--workers",
        "0",
    )
    assert code == 0 and "--workers 0" in err and "nothing is isolated" in err


def test_the_datasette_hint_shows_only_when_datasette_is_on_path(tmp_path, monkeypatch) -> None:
    tools = tmp_path / "bin"
    tools.mkdir()
    monkeypatch.setenv("PATH", str(tools))
    db = str(tmp_path / "clean.db")
    code, out, _ = run_cli("scan", "--dataset", spec("faults.py:make(length=4)"), "--db", db)
    assert code == 0 and f"index:      {db}\n" in out and "browse" not in out

    (tools / "datasette").write_text("#!/bin/sh\n")
    (tools / "datasette").chmod(0o755)
    code, out, _ = run_cli("scan", "--dataset", spec("faults.py:make(length=4)"), "--db", db)
    assert code == 0 and f"(browse: datasette {db})" in out


def test_quarantine_exits_as_the_scan_did_on_the_same_index(tmp_path) -> None:
    db = str(tmp_path / "faults.db")
    scanned, _, _ = run_cli("scan", "--dataset", spec("faults.py:make(length=4)"), "--db", db)
    code, out, _ = run_cli("quarantine", db)
    assert scanned == code == 0 and json.loads(out)["samples"] == []
    code, out, _ = run_cli("quarantine", db, "--require", "no_such_field")
    assert code == 1 and len(json.loads(out)["samples"]) == 4  # every sample lacks the field
    code, _, err = run_cli("quarantine", db, "--kinds", "bogus")
    assert code == 2 and "unknown finding kind 'bogus'" in err
