"""The binary quarantine list: written atomically, memory-mapped, equal to the JSON list it came from."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from datalint.index import binary_list
from datalint.training.quarantine import QuarantineFormatError, load_quarantine
from tests.scan.scan_support import run_cli, spec


@pytest.fixture(scope="module")
def scanned(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real scan of the demo dataset (8 planted faults), its binary list written beside the JSON one."""
    db = tmp_path_factory.mktemp("binary") / "demo.db"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(binary_list, "BINARY_FROM", 1)
        code, _, err = run_cli(
            "scan",
            "--dataset",
            spec("demo.py:demo"),
            "--label",
            "label",
            "--num-classes",
            "10",
            "--db",
            str(db),
        )
    assert code == 1, err
    return db


def test_the_scan_writes_a_binary_list_past_the_size_that_reads_back_equal_to_the_json_one(
    scanned: Path,
) -> None:
    from_json = load_quarantine(scanned.with_name("demo.quarantine.json"))
    from_binary = load_quarantine(scanned.with_name("demo.quarantine.bin"))
    assert len(from_binary) == len(from_json) == 8
    assert from_binary.indices.tolist() == from_json.indices.tolist()
    assert (from_binary.length, from_binary.fingerprint, from_binary.dataset) == (
        from_json.length,
        from_json.fingerprint,
        from_json.dataset,
    )
    assert isinstance(from_binary.indices, np.memmap) and not from_binary.indices.flags.writeable
    assert 99 in from_binary and 98 not in from_binary


def test_datalint_quarantine_writes_the_binary_form_on_request(scanned: Path, tmp_path: Path) -> None:
    target = tmp_path / "crashes.bin"
    code, _, err = run_cli(
        "quarantine", str(scanned), "--kinds", "crash", "--format", "binary", "-o", str(target)
    )
    assert code == 1, err
    assert load_quarantine(target).indices.tolist() == [17, 99]
    code, _, err = run_cli("quarantine", str(scanned), "--format", "binary")
    assert code == 2 and "-o/--output-file" in err


def test_datalint_quarantine_chooses_the_binary_form_past_the_scans_size(
    scanned: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "derived.json"
    beside = tmp_path / "derived.bin"
    code, _, err = run_cli("quarantine", str(scanned), "--kinds", "crash", "-o", str(target))
    assert code == 1 and not beside.exists(), err  # a small list: JSON only
    monkeypatch.setattr(binary_list, "BINARY_FROM", 2)
    code, _, err = run_cli("quarantine", str(scanned), "--kinds", "crash", "-o", str(target))
    assert code == 1 and str(beside) in err, err
    assert load_quarantine(beside).indices.tolist() == load_quarantine(target).indices.tolist() == [17, 99]
    # Smaller again (one kind with one sample): the stale binary list beside it goes.
    code, _, err = run_cli("quarantine", str(scanned), "--kinds", "timeout", "-o", str(target))
    assert code == 0 and not beside.exists(), err
    # A .bin target gets the binary form whatever the size; --format json never writes one.
    code, _, err = run_cli("quarantine", str(scanned), "--kinds", "crash", "-o", str(tmp_path / "a.bin"))
    assert code == 1 and binary_list.is_binary_list(tmp_path / "a.bin"), err
    code, _, err = run_cli("quarantine", str(scanned), "--format", "json", "-o", str(target))
    assert code == 1 and not beside.exists(), err


def test_a_large_list_maps_without_copying_and_a_damaged_one_is_refused(tmp_path: Path) -> None:
    indices = np.random.default_rng(1).choice(10**9, size=200_000, replace=False)
    path = binary_list.write_binary_quarantine(tmp_path / "big.bin", indices, length=10**9, fingerprint="f")
    loaded = load_quarantine(path)
    assert loaded.indices.tolist() == sorted(indices.tolist())
    assert path.stat().st_size < 8 * 200_000 + 512
    path.write_bytes(path.read_bytes()[:-4])  # cut inside the last index
    with pytest.raises(QuarantineFormatError, match="truncated"):
        load_quarantine(path)
    with pytest.raises(ValueError, match="listed twice"):
        binary_list.write_binary_quarantine(tmp_path / "dup.bin", [3, 3], length=10)
