"""`doctor` uses what `check` knows: a per-worker cache without a bound (DL302) and copy-on-read
containers (DL301) in the measured dataset's code are what its estimate leaves out, said and bounded."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from datalint.cli import main
from datalint.diagnosis.code_facts import dataset_findings
from datalint.units import MiB

CACHED = textwrap.dedent(
    """
    import torch
    from torch.utils.data import Dataset


    class Cached(Dataset):
        def __init__(self):
            self.cache = {}

        def __len__(self):
            return 1000

        def __getitem__(self, i):
            if i not in self.cache:
                self.cache[i] = torch.zeros(256, 256)  # 256 KiB
            return self.cache[i]


    class Plain(Dataset):
        def __len__(self):
            return 1000

        def __getitem__(self, i):
            return torch.zeros(256, 256)
    """
)


def doctor(capsys: pytest.CaptureFixture[str], spec: str, *args: str) -> tuple[int, dict[str, dict]]:
    code = main(["doctor", "--format", "json", "--dataset", spec, "--batch-size", "8", "--num-workers", "2",
                 "--samples", "4", *args])
    document = json.loads(capsys.readouterr().out)
    return code, {check["name"]: check for check in document["checks"]}


def test_an_unbounded_cache_is_what_the_estimate_leaves_out_with_its_bound(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "cached.py").write_text(CACHED)
    line = next(n for n, text in enumerate(CACHED.splitlines(), 1) if "self.cache[i] =" in text)
    # 1000 samples x 256 KiB in each of 2 workers: 500 MiB, against a budget of 4 GiB
    code, checks = doctor(capsys, f"{tmp_path / 'cached.py'}:Cached()", "--memory-bytes", str(4096 * MiB))
    check = checks["loader code"]
    assert check["status"] == "warn"
    assert check["value"] == "a per-worker cache with no bound: up to 500.0 MiB in all workers, of 4.0 GiB"
    assert f"Cached caches every sample it reads without a bound (DL302 at {tmp_path / 'cached.py'}:{line})" \
        in check["detail"]
    assert "250.0 MiB in each of 2 worker(s)" in check["detail"]
    assert "lru_cache" in check["fix"]
    # the same cache against a budget it cannot fit in fails the run
    code, checks = doctor(capsys, f"{tmp_path / 'cached.py'}:Cached()", "--memory-bytes", str(400 * MiB))
    assert checks["loader code"]["status"] == "fail" and code == 1
    assert checks["loader host memory"]["status"] == "ok"  # what it measured fits: only the cache does not


def test_a_dataset_without_such_code_has_no_line_of_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "cached.py").write_text(CACHED)
    _, checks = doctor(capsys, f"{tmp_path / 'cached.py'}:Plain()")
    assert "loader code" not in checks


def test_copy_on_read_in_a_base_in_another_file_is_found_and_torch_is_not_read(tmp_path: Path) -> None:
    base = textwrap.dedent(
        """
        from torch.utils.data import Dataset


        class Records(Dataset):
            def __init__(self):
                self.records = [{"path": f"{i}.jpg", "label": i % 10} for i in range(100)]

            def __len__(self):
                return len(self.records)

            def __getitem__(self, i):
                return self.records[i]["label"]
        """
    )
    (tmp_path / "records_base.py").write_text(base)
    (tmp_path / "records_child.py").write_text(
        "from records_base import Records\n\n\nclass Labels(Records):\n    pass\n"
    )
    import importlib
    import sys

    sys.path.insert(0, str(tmp_path))
    try:
        child = importlib.import_module("records_child")
        found = dataset_findings(child.Labels())
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("records_child", None)
        sys.modules.pop("records_base", None)
    assert [(f.code, Path(f.path).name, f.owner) for f in found] == [("DL301", "records_base.py", "Records")]
