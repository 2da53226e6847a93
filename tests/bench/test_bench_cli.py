"""`datalint bench` as a user runs it: the table, the JSON contract, the plot, the soak's exit code."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("torch")

from datalint.cli import main

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "datasets"
SMALL = f"{FIXTURES / 'bench_tensors.py'}:make(32, [3, 16, 16])"
RUN_KEYS = {
    "num_workers",
    "samples_per_s",
    "first_batch_s",
    "rss_bytes",
    "shm_peak_bytes",
    "fds",
    "cpu_percent",
}


@pytest.mark.slow
def test_json_lists_every_run_and_the_recommendation_and_the_plot_is_a_png(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    plot = tmp_path / "bench.png"
    code = main(
        [
            "bench",
            "--dataset",
            SMALL,
            "--batch-size",
            "4",
            "--workers",
            "0,1",
            "--batches",
            "3",
            "--format",
            "json",
            "--plot",
            str(plot),
        ]
    )
    document = json.loads(capsys.readouterr().out)
    assert code == 0
    assert [run["num_workers"] for run in document["runs"]] == [0, 1]
    assert all(set(run) >= RUN_KEYS for run in document["runs"])
    assert document["recommended"]["num_workers"] in (0, 1)
    assert document["recommended"]["reason"]
    assert document["soak"] is None
    assert plot.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")


@pytest.mark.slow
def test_the_table_marks_each_run_and_the_soak_reports_a_dead_worker_with_exit_1(
    capsys: pytest.CaptureFixture[str],
) -> None:
    spec = f"{FIXTURES / 'bench_faulty.py'}:make(32, kill_at=20)"
    code = main(
        [
            "bench",
            "--dataset",
            spec,
            "--batch-size",
            "4",
            "--workers",
            "1",
            "--batches",
            "2",
            "--soak",
            "--epochs",
            "2",
        ]
    )
    out = capsys.readouterr().out
    assert code == 1
    assert "samples/s" in out and "first batch s" in out and "shm peak" in out
    assert "worker died (SIGKILL)" in out and "while loading sample(s) 20" in out
    assert "out of memory" in out.lower() or "oom" in out.lower()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--soak"], "--soak needs --epochs N or --steps N"),
        (["--epochs", "2"], "add --soak"),
    ],
)
def test_usage_mistakes_exit_2(capsys: pytest.CaptureFixture[str], args: list[str], message: str) -> None:
    assert main(["bench", "--dataset", SMALL, "--batch-size", "4", *args]) == 2
    assert message in capsys.readouterr().err


def test_worker_counts_must_be_a_list_of_whole_numbers(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["bench", "--dataset", SMALL, "--batch-size", "4", "--workers", "0,two"])
    assert "expected worker counts such as 0,1,2,4" in capsys.readouterr().err
