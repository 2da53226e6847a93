"""`datalint bench` as a user runs it: the table, the JSON contract, the plot, the soak's exit code."""

from __future__ import annotations

import json
from pathlib import Path
from xml.etree import ElementTree

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
def test_json_lists_every_run_and_the_recommendation_and_the_plot_is_an_svg(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    plot = tmp_path / "bench.svg"
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
    svg = ElementTree.fromstring(plot.read_text())  # a well-formed SVG document
    assert svg.tag == "{http://www.w3.org/2000/svg}svg"
    bars = svg.findall(".//{http://www.w3.org/2000/svg}rect")
    assert len(bars) == 6  # samples/s, memory and shm, for each of the two worker counts
    assert len([bar for bar in bars if "best" in bar.get("class", "")]) == 3


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
        (["--plot", "bench.png"], "--plot bench.png: the plot is an SVG file"),
        (["--plot", "/no/such/folder/bench.svg"], "no such folder /no/such/folder"),
    ],
)
def test_usage_mistakes_exit_2_before_the_sweep(
    capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    assert main(["bench", "--dataset", SMALL, "--batch-size", "4", *args]) == 2
    err = capsys.readouterr().err
    assert message in err
    assert "bench: num_workers=" not in err  # refused before any run


def test_worker_counts_must_be_a_list_of_whole_numbers(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["bench", "--dataset", SMALL, "--batch-size", "4", "--workers", "0,two"])
    assert "expected worker counts such as 0,1,2,4" in capsys.readouterr().err
