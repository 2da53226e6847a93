"""`datalint report --run`: a real `datalint run` record, where a worker is SIGKILLed, drawn in a
real headless Chromium: charts over time, limits as lines, the death marked."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from report_browser import Browser, chromium, needs_chromium

from datalint.cli import main

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]

# A main process with two forked workers (same interpreter, as DataLoader's); worker 1 is killed.
TREE = textwrap.dedent(
    """
    import os, signal, time
    pids = []
    for _ in range(2):
        pid = os.fork()
        if pid == 0:
            data = bytearray(8 << 20)
            time.sleep(30)
            os._exit(0)
        pids.append(pid)
    time.sleep(2.2)
    os.kill(pids[1], signal.SIGKILL)
    time.sleep(0.5)
    os.waitpid(pids[1], 0)
    time.sleep(1.2)
    os.kill(pids[0], signal.SIGTERM)
    os.waitpid(pids[0], 0)
    raise SystemExit(1)
    """
)


@pytest.fixture(scope="module")
def record(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("run")
    (folder / "tree.py").write_text(TREE)
    done = subprocess.run(
        [sys.executable, "-m", "datalint", "run", "--record", str(folder / "run.db"), "--",
         sys.executable, "tree.py"],
        cwd=folder, capture_output=True, text=True, timeout=60, env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=False,
    )
    assert done.returncode == 1, done.stderr
    assert "worker 1 (pid" in done.stderr and "killed by SIGKILL" in done.stderr
    return folder / "run.db"


def test_the_run_page_is_written_from_a_record(record: Path, tmp_path: Path) -> None:
    out = tmp_path / "run.html"
    assert main(["report", "--run", str(record), "-o", str(out)]) == 0
    html = out.read_text()
    assert "worker 1 killed by SIGKILL" in html  # the death, marked on the charts
    assert "/dev/shm size" in html  # a limit drawn as a line
    assert html.count("<polyline") >= 5


def test_a_missing_record_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", "--run", str(tmp_path / "none.db")]) == 2
    assert "no such record" in capsys.readouterr().err


@needs_chromium
def test_the_run_charts_render_in_a_real_browser(record: Path, tmp_path: Path) -> None:
    out = tmp_path / "run.html"
    assert main(["report", "--run", str(record), "-o", str(out)]) == 0
    browser = Browser(chromium(), tmp_path / "profile")
    try:
        page = browser.open(out.resolve().as_uri())
        charts = page.evaluate("document.querySelectorAll('svg.chart').length")
        assert charts >= 5
        titles = "Array.from(document.querySelectorAll('svg .mark title')).map(t => t.textContent)"
        marks = page.evaluate(titles)
        assert any("worker 1 killed by SIGKILL" in m for m in marks)
        # the memory chart's lines really have a drawn extent on screen
        width = page.evaluate("document.querySelector('svg.chart polyline').getBoundingClientRect().width")
        assert width > 100
        # each limit is named (a line on the scale, or in the legend when far above the data)
        assert page.evaluate("document.querySelectorAll('svg .limit-label').length") >= 2
        page.screenshot(tmp_path / "run.png")
        assert page.problems() == []
    finally:
        browser.close()
