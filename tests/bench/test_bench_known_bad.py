"""`datalint bench` on a dataset that still has bad samples: `--quarantine LIST` leaves out what a scan
listed, `--guard` replaces what raises and says which; the advice never repeats what the run did."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("torch")

from datalint.cli import main

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "datasets"
MIXED_SHAPES = f"{FIXTURES / 'kinds.py'}:tensors()"  # sample 4 is (1, 8, 8) among (3, 8, 8)
RAISES_AT_5 = f"{FIXTURES / 'bench_faulty.py'}:make(32, raise_at=(5,))"


def bench(capsys: pytest.CaptureFixture[str], spec: str, *args: str) -> tuple[int, str]:
    code = main(["bench", "--dataset", spec, "--batch-size", "4", "--workers", "0,1", "--batches", "3",
                 *args])
    return code, capsys.readouterr().out


@pytest.fixture(scope="module")
def scanned_list(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("list")
    listed = folder / "quarantine.json"
    code = main(["scan", "--dataset", MIXED_SHAPES, "--db", str(folder / "scan.db"),
                 "--quarantine", str(listed), "--progress", "none"])
    assert code == 1  # it found the bad samples
    return listed


def test_without_the_list_every_run_fails_on_collate_and_the_advice_is_the_list(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out = bench(capsys, MIXED_SHAPES)
    assert code == 1
    assert "num_workers=0 failed: RuntimeError: stack expects each tensor to be equal size" in out
    assert "cause: a batch could not be collated" in out
    # not "rerun with num_workers=0" (it just did) nor "wrap in GuardedDataset" (it cannot help)
    assert "rerun with num_workers=0" not in out and "wrap the dataset in" not in out
    assert "--quarantine LIST` leaves them out of the measurement" in out


def test_with_the_scans_list_the_sweep_measures_and_recommends(
    capsys: pytest.CaptureFixture[str], scanned_list: Path
) -> None:
    listed = len(json.loads(scanned_list.read_text())["samples"])
    code, out = bench(capsys, MIXED_SHAPES, "--quarantine", str(scanned_list))
    assert code == 0
    assert "recommended: num_workers=" in out and "failed" not in out
    assert f"left out: {listed} sample(s) the quarantine list names" in out


def test_a_list_that_names_every_sample_is_a_usage_error(tmp_path: Path) -> None:
    every = {"format": "datalint-quarantine/1", "length": 4, "samples": [{"index": i} for i in range(4)]}
    (tmp_path / "all.json").write_text(json.dumps(every))
    code = main(["bench", "--dataset", f"{FIXTURES / 'bench_faulty.py'}:make(4)", "--batch-size", "2",
                 "--quarantine", str(tmp_path / "all.json")])
    assert code == 2


def test_guard_replaces_a_raising_sample_and_names_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out = bench(capsys, RAISES_AT_5)
    assert code == 1 and "num_workers=0 failed" in out
    code, out = bench(capsys, RAISES_AT_5, "--guard", "--record", str(tmp_path / "guard.db"))
    assert code == 0, out
    assert "guard: sample 5 raised and was replaced: ValueError" in out
    assert (tmp_path / "guard.db").exists()
