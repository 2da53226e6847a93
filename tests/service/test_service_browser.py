"""The overview page in a real headless Chromium: sign in, see the datasets, watch a scan, open a report."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from service_server import Server, dataset_table

sys.path.insert(0, str(Path(__file__).parent.parent / "report"))
from report_browser import Browser, Page, chromium

pytestmark = pytest.mark.slow


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Browser]:
    started = Browser(chromium(), tmp_path / "profile")
    try:
        yield started
    finally:
        started.close()


def wait_for(page: Page, expression: str, timeout: float = 30) -> object:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = page.evaluate(expression)
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"{expression} stayed falsy for {timeout} s")


def test_the_overview_signed_in_clicked_through_with_live_progress(browser: Browser, tmp_path: Path) -> None:
    datasets = dataset_table("train") + dataset_table("slow", n=400, bad_every=50, delay=0.02)
    server = Server(tmp_path, datasets).start()
    try:
        job = server.request("POST", "/v1/datasets/train/scans").json()
        server.wait_job(job["id"])

        page = browser.open(server.base + "/")
        assert page.evaluate("location.pathname") == "/login", "no token, no overview"
        page.type_text("input[name=token]", server.tokens["reader"])
        page.click("button[type=submit]")
        wait_for(page, "location.pathname === '/' && !!document.getElementById('datasets')")
        cells = page.evaluate(
            "Array.from(document.querySelectorAll('#dataset-train td')).map(td => td.textContent)"
        )
        assert cells[0] == "train" and cells[2] == "60" and cells[3] == "6", cells

        slow = server.request("POST", "/v1/datasets/slow/scans").json()
        page.browser.send("Page.reload", session=page.session)
        page.browser.wait_event("Page.loadEventFired", page.session)
        row = f"document.getElementById('job-{slow['id']}')"
        wait_for(page, f"!!{row}")
        # the page's own script moves the bar as the scan goes (no reload)
        first = wait_for(page, f"{row} && Number({row}.querySelector('progress').value)")
        later = wait_for(page, f"Number({row}.querySelector('progress').value) > {first} && "
                               f"Number({row}.querySelector('progress').value)")  # fmt: skip
        assert int(str(later)) > int(str(first))
        assert "samples" in str(page.evaluate(f"{row}.querySelector('.progress-text').textContent"))

        page.click("#dataset-train a.report-link")
        wait_for(
            page, "location.pathname === '/v1/datasets/train/report' && document.readyState === 'complete'"
        )
        assert page.evaluate("document.title") == "datalint report: train"
        assert page.evaluate("document.getElementById('table-controls').hidden") is False, (
            "the report's script ran"
        )
        assert page.problems() == [], "no CSP violation, no console error"
        server.request("POST", f"/v1/scans/{slow['id']}/cancel")
    finally:
        server.stop()
