"""Messages never become crashes: hostile exceptions, dying bench configurations, hostile documents."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from files_support import assert_no_internal_error, datalint

NASTY = """
class Nasty(Exception):
    def __str__(self):
        raise RuntimeError("no message for you")

class DS:
    def __len__(self): return 6
    def __getitem__(self, i):
        if i == 2: raise Nasty()
        return [float(i)]
ds = DS()
"""


def test_an_exception_whose_str_raises_is_that_sample_s_error(tmp_path: Path) -> None:
    (tmp_path / "nasty.py").write_text(NASTY)
    db = tmp_path / "index.db"
    result = datalint("scan", "--dataset", f"{tmp_path / 'nasty.py'}:ds", "--db", str(db), "--workers", "1")
    assert result.returncode == 1, result.stderr
    assert_no_internal_error(result)
    assert "error 1  crash 0" in result.stdout
    assert "Nasty: <str() failed: RuntimeError>" in result.stdout


def test_the_guard_substitutes_for_an_exception_whose_str_raises(tmp_path: Path) -> None:
    (tmp_path / "nasty.py").write_text(NASTY)
    script = (
        f"import sys; sys.path.insert(0, {str(tmp_path)!r})\n"
        "from nasty import ds\n"
        "from datalint.torch import GuardedDataset\n"
        f"guarded = GuardedDataset(ds, record={str(tmp_path / 'guard.db')!r})\n"
        "print([guarded[i] for i in range(6)])\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[[0.0], [1.0], [3.0], [3.0], [4.0], [5.0]]"
    assert "Logging error" not in done.stderr and "<str() failed: RuntimeError>" in done.stderr


SEGFAULT = """
import ctypes
import torch

class DS(torch.utils.data.Dataset):
    def __len__(self): return 64
    def __getitem__(self, i):
        if i == 5:
            ctypes.string_at(0)  # a segfault in the process that loads this sample
        return torch.zeros(4)
ds = DS()
"""


@pytest.mark.slow
def test_bench_reports_a_configuration_that_dies_and_goes_on(tmp_path: Path) -> None:
    (tmp_path / "seg.py").write_text(SEGFAULT)
    spec = f"{tmp_path / 'seg.py'}:ds"
    argv = (
        "bench",
        "--dataset",
        spec,
        "--batch-size",
        "4",
        "--workers",
        "0,2",
        "--batches",
        "4",
        "--warmup",
        "1",
    )
    result = datalint(*argv, "--format", "json", timeout=300)
    assert result.returncode == 1, result.stderr
    runs = {run["num_workers"]: run for run in json.loads(result.stdout)["runs"]}
    assert set(runs) == {0, 2}, "the 2-worker configuration still ran"
    assert "killed by SIGSEGV" in runs[0]["error"] and "a sample crashed it" in runs[0]["error"]
    assert runs[2]["error"], "the worker that loaded sample 5 died too, and is reported"
    assert "Traceback" not in result.stderr and "ERROR: Unexpected segmentation fault" not in result.stderr


def test_bench_checks_the_plot_s_folder_before_the_sweep(tmp_path: Path) -> None:
    (tmp_path / "seg.py").write_text(SEGFAULT)
    missing = tmp_path / "no" / "such" / "bench.svg"
    result = datalint(
        "bench",
        "--dataset",
        f"{tmp_path / 'seg.py'}:ds",
        "--batch-size",
        "4",
        "--plot",
        str(missing),
        timeout=60,
    )
    assert result.returncode == 2 and "no such folder" in result.stderr, result.stderr
    assert "num_workers=" not in result.stderr, "refused before any configuration ran"


def test_readers_name_the_file_and_the_problem(tmp_path: Path) -> None:
    deep = tmp_path / "quarantine.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    script = f"from datalint.training.quarantine import load_quarantine\nload_quarantine({str(deep)!r})\n"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert "QuarantineFormatError" in done.stderr and "nested too deeply" in done.stderr
    assert "RecursionError" not in done.stderr

    cases = {
        "deep.toml": ("[tool.datalint]\nselect = " + "[" * 5000 + "]" * 5000 + "\n").encode(),
        "latin1.toml": b'[tool.datalint]\nexclude = ["caf\xe9"]\n',
    }
    for name, content in cases.items():
        (tmp_path / name).write_bytes(content)
        result = datalint("check", "--config", str(tmp_path / name), str(tmp_path), timeout=60)
        assert result.returncode == 2, (name, result.stderr)
        assert_no_internal_error(result)
        assert f"{tmp_path / name}: " in result.stderr, result.stderr

    db = tmp_path / "index.db"
    (tmp_path / "ok.py").write_text(
        "class DS:\n    def __len__(self): return 2\n    def __getitem__(self, i): return i\nds = DS()\n"
    )
    assert (
        datalint(
            "scan", "--dataset", f"{tmp_path / 'ok.py'}:ds", "--db", str(db), "--workers", "1"
        ).returncode
        == 0
    )
    for shape in ('{"runs": [1, 2]}', '{"runs": [{"num_workers": "two"}]}', '{"runs": {}}', "[["):
        (tmp_path / "bench.json").write_text(shape)
        result = datalint(
            "report", str(db), "-o", str(tmp_path / "r.html"), "--bench", str(tmp_path / "bench.json")
        )
        assert result.returncode == 2, (shape, result.stderr)
        assert f"{tmp_path / 'bench.json'}: " in result.stderr


@pytest.mark.slow
def test_a_report_of_long_failures_keeps_to_its_size_budget(tmp_path: Path) -> None:
    from datalint.index import store

    db_path = tmp_path / "index.db"
    db = store.open_index(db_path)
    store.start_run(
        db, kind="dataset", spec="long:ds", length=4000, fingerprint=None, options={}, environment={}
    )
    rows, findings = [], []
    for idx in range(4000):
        message = f"sample {idx}: " + "<field> " * 300
        row = {
            "idx": idx,
            "status": "error",
            "run_id": 1,
            "error_type": "ValueError",
            "error_message": message,
        }
        rows.append(store.sample_values(row))
        findings.append({"idx": idx, "kind": "error", "detail": message, "quarantine": 1})
    store.write_samples(db, rows)
    store.write_findings(db, findings)
    db.conn.close()
    result = datalint("report", str(db_path), "-o", str(tmp_path / "r.html"), timeout=120)
    assert result.returncode == 0, result.stderr
    page = (tmp_path / "r.html").read_text()
    assert len(page.encode()) < 10_000_000
    # The rows past the page's budget are not dropped: they page on through sibling files, each
    # under the same budget, linked from the report.
    siblings = sorted(tmp_path.glob("r.rows-*.html"))
    assert siblings and "r.rows-2.html" in page, result.stderr
    assert all(sibling.stat().st_size < 10_000_000 for sibling in siblings)
    texts = [page, *(sibling.read_text() for sibling in siblings)]
    shown = {int(number) for text in texts for number in re.findall(r"sample (\d+): ", text)}
    assert shown == set(range(4000)), "every flagged sample is on one of the pages"
