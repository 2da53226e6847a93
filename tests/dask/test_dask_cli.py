"""`datalint scan --backend dask` from the command line: usage errors, a missing extra, and a scanner
killed mid-scan (its cluster goes with it; the rerun resumes)."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest
from dask_support import (
    PYTHON,
    ROOT,
    row_count,
    run_cli,
    samples,
    session_members,
    spec,
    start_cli,
    wait_until,
)

import datalint
from datalint.errors import UsageError
from datalint.extras import install_line
from datalint.scan import dask_backend


def test_scheduler_without_the_dask_backend_is_a_usage_error(tmp_path: Path) -> None:
    code, _, err = run_cli(
        "scan", "--dataset", spec("make(length=4)"), "--scheduler", "tcp://127.0.0.1:8786",
        "--db", str(tmp_path / "x.db"),
    )  # fmt: skip
    assert code == 2
    assert "--scheduler ADDRESS runs the scan on a dask cluster: add --backend dask" in err
    assert not (tmp_path / "x.db").exists()


def test_workers_zero_cannot_run_on_a_cluster(tmp_path: Path) -> None:
    code, _, err = run_cli(
        "scan", "--dataset", spec("make(length=4)"), "--backend", "dask", "--workers", "0",
        "--db", str(tmp_path / "x.db"),
    )  # fmt: skip
    assert code == 2
    assert "--workers 0" in err and "cannot be combined with --backend dask" in err


def test_a_dataset_object_cannot_travel_to_a_cluster(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="a dataset object cannot travel to a dask cluster: pass a spec"):
        datalint.scan([1, 2, 3], db=tmp_path / "x.db", backend="dask")
    assert not (tmp_path / "x.db").exists()  # refused before the index was created


def test_a_stream_cannot_be_split_across_a_cluster(tmp_path: Path) -> None:
    stream = spec("counting(8)")
    code, _, err = run_cli("scan", "--dataset", stream, "--backend", "dask", "--db", str(tmp_path / "s.db"))
    assert code == 2, err
    assert "is an IterableDataset" in err and "--backend local" in err


def test_without_dask_the_error_says_how_to_install_it(tmp_path: Path) -> None:
    # A fresh interpreter in which `import distributed` fails, as it does where the extra is missing.
    program = (
        "import sys; sys.modules['distributed'] = None\n"
        "from datalint.cli import main\n"
        f"sys.exit(main(['scan', '--dataset', {spec('make(length=4)')!r}, '--backend', 'dask', "
        f"'--db', {str(tmp_path / 'x.db')!r}]))\n"
    )
    done = subprocess.run([PYTHON, "-c", program], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 2, done.stderr
    assert "`datalint scan --backend dask` needs the [dask] extra (missing: distributed)" in done.stderr
    assert install_line("dask") in done.stderr  # the line for this installation: the index, or a checkout
    assert "Traceback" not in done.stderr


def test_an_unreachable_scheduler_is_a_usage_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dask_backend, "CONNECT_TIMEOUT", 1.0)
    code, _, err = run_cli(
        "scan", "--dataset", spec("make(length=4)"), "--backend", "dask", "--scheduler", "tcp://127.0.0.1:9",
        "--db", str(tmp_path / "x.db"), "--progress", "none",
    )  # fmt: skip
    assert code == 2, err
    assert "cannot reach the dask scheduler at tcp://127.0.0.1:9" in err


@pytest.mark.slow
def test_a_killed_scanner_takes_its_cluster_along_and_the_rerun_resumes(tmp_path: Path) -> None:
    db = tmp_path / "resume.db"
    argv = (
        "scan", "--dataset", spec("make(length=200, delay=0.01, error=[7])"), "--backend", "dask",
        "--workers", "2", "--db", str(db), "--progress", "none", "--chunk-size", "10",
    )  # fmt: skip
    scanner = start_cli(*argv)
    try:
        wait_until(lambda: row_count(db) >= 20 or scanner.poll() is not None, 120, "rows in the index")
        assert scanner.poll() is None, scanner.communicate()
        os.kill(scanner.pid, signal.SIGKILL)
        scanner.wait(30)
        # The scanner led its own session: its dask workers and their children are all in it.
        wait_until(lambda: not session_members(scanner.pid), 30, "the cluster's processes to exit")
    finally:
        if scanner.poll() is None:
            os.killpg(scanner.pid, signal.SIGKILL)
        scanner.communicate()
    kept = row_count(db)
    assert 20 <= kept < 200
    done = subprocess.run(
        [PYTHON, "-m", "datalint", *argv], capture_output=True, text=True, timeout=300, cwd=ROOT
    )
    assert done.returncode == 1, done.stderr  # sample 7 raises: quarantined
    assert f"{kept:,} from a previous run" in done.stdout
    rows = samples(db)
    assert sorted(rows) == list(range(200))
    assert [index for index, row in rows.items() if row["status"] != "ok"] == [7]
