"""A stream's length: its own __len__ disagreeing with what it yields is said (and exits 1), and
`--limit N` stops an endless stream with the summary saying it was capped."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from datalint.cli import main
from datalint.errors import UsageError

pytest.importorskip("torch")

STREAMS = Path(__file__).resolve().parents[2] / "fixtures" / "datasets" / "streams.py"


def scan(capsys: pytest.CaptureFixture[str], tmp_path: Path, spec: str, *args: str) -> tuple[int, dict]:
    code = main(["scan", "--dataset", f"{STREAMS}:{spec}", "--db", str(tmp_path / "s.db"), "--format", "json",
                 "--progress", "none", "--workers", "1", *args])
    return code, json.loads(capsys.readouterr().out)


def test_a_stream_that_yields_fewer_samples_than_its_len_says_is_named_with_both_numbers(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, summary = scan(capsys, tmp_path, "declared_ten_yields_three")
    assert code == 1
    assert (summary["length"], summary["declared_length"], summary["quarantined"]) == (3, 10, 0)
    assert any(note.startswith("length: the dataset's __len__ says 10 but iterating it yielded 3 sample(s)")
               for note in summary["notes"])


def test_a_stream_whose_len_is_right_exits_0_with_no_length_note(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, summary = scan(capsys, tmp_path, "declared_right")
    assert code == 0 and summary["declared_length"] is None
    assert not any(note.startswith("length:") for note in summary["notes"])


def test_limit_stops_an_endless_stream_and_the_summary_says_it_was_capped(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, summary = scan(capsys, tmp_path, "endless", "--limit", "25")
    assert code == 0
    assert (summary["length"], summary["capped"]) == (25, 25)
    capped = "capped: --limit 25 stopped the stream after 25 samples"
    assert any(note.startswith(capped) for note in summary["notes"])


def test_limit_is_refused_for_a_map_style_dataset(tmp_path: Path) -> None:
    fixtures = STREAMS.parent
    code = main(["scan", "--dataset", f"{fixtures / 'kinds.py'}:tensors()", "--db", str(tmp_path / "m.db"),
                 "--progress", "none", "--limit", "5"])
    assert code == 2


def test_the_api_takes_limit_and_refuses_nonsense(tmp_path: Path) -> None:
    import datalint

    summary = datalint.scan(f"{STREAMS}:endless", db=tmp_path / "api.db", limit=7, workers=1)
    assert (summary.length, summary.capped) == (7, 7)
    with pytest.raises(UsageError, match="limit must be a whole number"):
        datalint.scan(f"{STREAMS}:endless", db=tmp_path / "api.db", limit=0)
