"""`datalint scan --webdataset`: real tar shards, a damaged member of each kind, a truncated shard."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from datalint.errors import UsageError
from datalint.scan.webdataset import expand_braces, shard_paths
from tests.scan.scan_support import run_cli
from tests.shards.shard_support import write_faulty_shards


def test_braces_expand_ranges_with_their_padding_and_lists() -> None:
    assert expand_braces("t-{008..011}.tar") == ["t-008.tar", "t-009.tar", "t-010.tar", "t-011.tar"]
    assert expand_braces("{a,b}/x-{1..2}.tar") == ["a/x-1.tar", "a/x-2.tar", "b/x-1.tar", "b/x-2.tar"]


def test_a_pattern_naming_missing_shards_is_a_usage_error(tmp_path: Path) -> None:
    write_faulty_shards(tmp_path)
    assert len(shard_paths(str(tmp_path / "train-*.tar"))) == 3
    with pytest.raises(UsageError, match=r"no such shard: .*train-000003\.tar"):
        shard_paths(str(tmp_path / "train-{000000..000003}.tar"))
    code, _, err = run_cli(
        "scan", "--webdataset", str(tmp_path / "nothing-*.tar"), "--db", str(tmp_path / "x.db")
    )
    assert code == 2 and "no shard file matches" in err


def test_the_scan_finds_every_planted_fault_and_goes_on_past_a_truncated_shard(tmp_path: Path) -> None:
    faults = write_faulty_shards(tmp_path)
    db = tmp_path / "index" / "shards.db"
    pattern = str(tmp_path / "train-{000000..000002}.tar")
    code, out, err = run_cli("scan", "--webdataset", pattern, "--db", str(db), "--format", "json")
    assert code == 1, err
    summary = json.loads(out)
    document = json.loads(Path(summary["quarantine"]).read_text())
    found = {sample["key"]: sample["kinds"][0] for sample in document["samples"]}
    assert found == faults
    details = {sample["key"]: sample["detail"] for sample in document["samples"]}
    assert "cut: " in details["train-000002.tar/s0002"]
    assert "the members after it are lost" in details["train-000002.tar"]
    assert "JSON" in details["train-000001.tar/s0002"]
    # Every sample the truncated shard still holds whole is scanned: 4 + 4 + 3 samples + 1 shard entry.
    assert document["length"] == 12


def test_a_second_scan_of_the_same_shards_resumes_instead_of_rescanning(tmp_path: Path) -> None:
    write_faulty_shards(tmp_path)
    db = tmp_path / "shards.db"
    argv = ("scan", "--webdataset", str(tmp_path / "train-*.tar"), "--db", str(db), "--format", "json")
    first = json.loads(run_cli(*argv)[1])
    second = json.loads(run_cli(*argv)[1])
    assert first["scanned"] == 12
    assert second["scanned"] == 0 and second["resumed"] == 12
    assert second["quarantined"] == first["quarantined"] == 5
