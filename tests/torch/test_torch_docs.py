"""The three-line change in docs/training.md runs as written and does what it says."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from torch.utils.data import DataLoader
from torch_test_data import FlakyDataset, seen_indices, write_quarantine

DOC = Path(__file__).resolve().parents[2] / "docs" / "training.md"


def _first_python_block(text: str) -> str:
    match = re.search(r"```python\n(.*?)```", text, re.DOTALL)
    assert match, f"{DOC} has no python example"
    return match.group(1)


def test_three_line_change_trains_without_quarantined_or_failing_samples(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "out").mkdir()
    write_quarantine(tmp_path / "out" / "quarantine.json", [5, 6], length=300)
    namespace = {"DataLoader": DataLoader, "train_ds": FlakyDataset(300, bad={100})}
    code = _first_python_block(DOC.read_text(encoding="utf-8"))
    assert len(code.strip().splitlines()) == 3
    exec(code, namespace)
    seen = seen_indices(namespace["loader"])
    assert len(seen) == 298 and not set(seen) & {5, 6, 100}
    assert (tmp_path / "out" / "scan.db").is_file()  # the failure of sample 100 was recorded
