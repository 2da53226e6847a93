"""User code the scanner itself would run (import, factory, len, keys, iter) cannot end or hang it."""

from __future__ import annotations

from pathlib import Path

import pytest
from engine_support import dataset, samples, scan

ATTACKING_MODULES = {
    "exits": ("import os\nos._exit(0)\nds = []\n", "exit status 0"),
    "segfaults": ("import ctypes\nctypes.string_at(0)\nds = []\n", "segmentation fault"),
    "raises_system_exit": ("raise SystemExit(0)\nds = []\n", "SystemExit"),
}


@pytest.mark.parametrize("name", sorted(ATTACKING_MODULES))
def test_a_module_that_ends_the_process_at_import_is_a_spec_error(tmp_path: Path, name: str) -> None:
    source, said = ATTACKING_MODULES[name]
    module = tmp_path / f"{name}.py"
    module.write_text(source)
    outcome = scan("--dataset", f"{module}:ds", "--db", str(tmp_path / "x.db"))
    assert outcome.code == 2  # never 0: nothing was scanned, so nothing can be said to be clean
    assert said in outcome.stderr and str(module) in outcome.stderr
    assert not (tmp_path / "x.quarantine.json").exists()  # no list that reads "nothing quarantined"


def test_a_factory_that_never_returns_is_stopped_at_the_setup_limit(tmp_path: Path) -> None:
    outcome = scan(
        "--dataset", dataset("never_returns()"), "--db", str(tmp_path / "x.db"), "--setup-timeout", "1"
    )
    assert outcome.code == 2
    assert "did not finish within 1 s" in outcome.stderr and "never_returns" in outcome.stderr


@pytest.mark.parametrize(
    ("how", "said"),
    [("segfault", "segmentation fault"), ("hang", "did not finish within 1 s")],
)
def test_a_key_function_that_kills_or_hangs_is_named_with_its_sample(
    tmp_path: Path, how: str, said: str
) -> None:
    spec = dataset(f"bad_keys(10, {how!r}, 5)")
    outcome = scan("--dataset", spec, "--db", str(tmp_path / "x.db"), "--setup-timeout", "1")
    assert outcome.code == 2
    assert "key of sample 5" in outcome.stderr and said in outcome.stderr


def test_a_key_function_raising_system_exit_costs_only_that_key(tmp_path: Path) -> None:
    db = tmp_path / "x.db"
    outcome = scan(
        "--dataset", dataset("bad_keys(10, 'system_exit', 5)"), "--db", str(db), "--format", "json"
    )
    rows = samples(db)
    assert outcome.code == 0 and outcome.summary["statuses"]["ok"] == 10
    assert rows[5]["key"] is None and rows[4]["key"] == "sample-004"


@pytest.mark.parametrize(
    ("target", "error_type"), [("iter_raises", "OSError"), ("iter_not_an_iterator", "TypeError")]
)
def test_a_stream_that_cannot_start_is_not_an_empty_clean_stream(
    tmp_path: Path, target: str, error_type: str
) -> None:
    db = tmp_path / "s.db"
    outcome = scan("--dataset", dataset(target), "--db", str(db), "--format", "json")
    rows = samples(db)
    assert outcome.code == 1 and outcome.summary["quarantined"] == 1
    assert (rows[0]["status"], rows[0]["error_type"]) == ("error", error_type)


def test_a_dataset_too_long_to_fingerprint_is_said_to_be_so_at_once(tmp_path: Path) -> None:
    spec = dataset("make(1_000_000_000_000)")  # a __len__ of 10^12 keys
    outcome = scan("--dataset", spec, "--db", str(tmp_path / "x.db"), "--setup-timeout", "5")
    assert outcome.code == 2
    assert (
        "len() is 1,000,000,000,000, too many keys to fingerprint within --setup-timeout 5 s"
        in outcome.stderr
    )
    assert "hung" not in outcome.stderr and "did not finish" not in outcome.stderr


def test_keys_still_being_read_at_the_setup_limit_are_counted_not_called_hung(tmp_path: Path) -> None:
    spec = dataset("make(20_000_000)")  # under the cap, but far more keys than 3 s reads
    outcome = scan("--dataset", spec, "--db", str(tmp_path / "x.db"), "--setup-timeout", "3")
    assert outcome.code == 2
    said = outcome.stderr
    assert "len() is 20,000,000, too many keys to fingerprint within --setup-timeout 3 s" in said
    assert " of 20,000,000 keys read in 3 s" in said
    assert "hung" not in said and "did not finish" not in said
