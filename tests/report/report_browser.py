"""Drive a real headless Chromium over the DevTools protocol, through a pipe.

`--remote-debugging-pipe` speaks the protocol as NUL-separated JSON on file descriptors 3
(commands in) and 4 (replies and events out), so no websocket client and no port are needed.
Clicks are real mouse events at the element's position, so a test exercises the page the
way a person does; console messages, uncaught exceptions and browser log errors (a CSP
violation, a failed load) are collected for the test to assert on.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import queue
import shutil
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest

TIMEOUT_S = 30.0
MISSING = "chromium is not installed (`make browser` installs Debian's package)"


def find_chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


# The one place that decides what a missing Chromium means. Locally the browser tests are skipped;
# with CI=true they fail, so CI can never go green on browser tests it did not run.
CHROMIUM = find_chromium()
IN_CI = os.environ.get("CI", "").lower() in ("true", "1")
needs_chromium = pytest.mark.skipif(CHROMIUM is None and not IN_CI, reason=MISSING)


def chromium() -> str:
    """The Chromium to drive: without one the test is skipped, or failed when CI=true."""
    if CHROMIUM is None:
        if IN_CI:
            pytest.fail(f"{MISSING}; with CI=true the browser tests must run, not be skipped", pytrace=False)
        pytest.skip(MISSING)
    return CHROMIUM


class BrowserError(RuntimeError):
    pass


class Browser:
    def __init__(self, executable: str, profile: Path) -> None:
        to_child_r, self._to_child = os.pipe()
        self._from_child, from_child_w = os.pipe()
        # move the child's ends above 10 first, so placing them on 3 and 4 can never clobber one
        high_r = fcntl.fcntl(to_child_r, fcntl.F_DUPFD, 10)
        high_w = fcntl.fcntl(from_child_w, fcntl.F_DUPFD, 10)
        os.close(to_child_r)
        os.close(from_child_w)

        def place_pipes() -> None:
            os.dup2(high_r, 3)
            os.dup2(high_w, 4)

        self.process = subprocess.Popen(
            [
                executable,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--remote-debugging-pipe",
                f"--user-data-dir={profile}",
                "--no-first-run",
                "--no-default-browser-check",
                "--disable-extensions",
                "--disable-background-networking",
                "--hide-scrollbars",
                "about:blank",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            pass_fds=(3, 4),
            preexec_fn=place_pipes,
        )
        os.close(high_r)
        os.close(high_w)
        self._next_id = 0
        self._replies: dict[int, dict[str, Any]] = {}
        self.events: list[dict[str, Any]] = []
        self._inbox: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        buffer = b""
        while True:
            chunk = os.read(self._from_child, 1 << 16)
            if not chunk:
                self._inbox.put(None)
                return
            buffer += chunk
            while b"\0" in buffer:
                message, buffer = buffer.split(b"\0", 1)
                self._inbox.put(json.loads(message))

    def send(self, method: str, params: dict[str, Any] | None = None, session: str | None = None) -> Any:
        self._next_id += 1
        command: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            command["sessionId"] = session
        os.write(self._to_child, json.dumps(command).encode() + b"\0")
        reply = self._wait(lambda m: m.get("id") == command["id"], f"reply to {method}")
        if "error" in reply:
            raise BrowserError(f"{method}: {reply['error']}")
        return reply.get("result", {})

    def _wait(self, wanted: Any, what: str) -> dict[str, Any]:
        deadline = time.monotonic() + TIMEOUT_S
        for event in self.events:
            if wanted(event):
                self.events.remove(event)
                return event
        while time.monotonic() < deadline:
            try:
                message = self._inbox.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                break
            if message is None:
                raise BrowserError(f"chromium exited while waiting for {what}")
            if wanted(message):
                return message
            if "method" in message:
                self.events.append(message)
        raise BrowserError(f"timed out after {TIMEOUT_S:.0f} s waiting for {what}")

    def wait_event(self, method: str, session: str) -> dict[str, Any]:
        return self._wait(lambda m: m.get("method") == method and m.get("sessionId") == session, method)

    def open(self, url: str, width: int = 1280, height: int = 900) -> Page:
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Log"):
            self.send(f"{domain}.enable", session=session)
        self.send(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
            session=session,
        )
        self.send("Page.navigate", {"url": url}, session=session)
        self.wait_event("Page.loadEventFired", session)
        return Page(self, session)

    def close(self) -> None:
        with contextlib.suppress(BrowserError):  # it may already be gone; the wait below decides
            self.send("Browser.close")
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        os.close(self._to_child)


class Page:
    def __init__(self, browser: Browser, session: str) -> None:
        self.browser = browser
        self.session = session

    def evaluate(self, expression: str) -> Any:
        result = self.browser.send(
            "Runtime.evaluate",
            {"expression": expression, "returnByValue": True, "awaitPromise": True},
            session=self.session,
        )
        if "exceptionDetails" in result:
            raise BrowserError(f"{expression!r} raised: {result['exceptionDetails']}")
        return result["result"].get("value")

    def click(self, selector: str) -> None:
        """A real mouse click in the middle of the element, as a person would do it."""
        box = self.evaluate(
            f"(() => {{ const e = document.querySelector({json.dumps(selector)}); if (!e) return null;"
            " e.scrollIntoView({block: 'center'}); const r = e.getBoundingClientRect();"
            " return [r.x + r.width / 2, r.y + r.height / 2, r.width * r.height]; })()"
        )
        if not box or not box[2]:
            raise BrowserError(f"no visible element matches {selector!r}")
        for kind in ("mousePressed", "mouseReleased"):
            self.browser.send(
                "Input.dispatchMouseEvent",
                {"type": kind, "x": box[0], "y": box[1], "button": "left", "clickCount": 1},
                session=self.session,
            )

    def type_text(self, selector: str, text: str) -> None:
        self.click(selector)
        self.browser.send("Input.insertText", {"text": text}, session=self.session)

    def screenshot(self, path: Path) -> None:
        """The whole page (up to 6000 px), from the top, so the sticky bar sits where it belongs."""
        self.evaluate("window.scrollTo(0, 0)")
        metrics = self.browser.send("Page.getLayoutMetrics", session=self.session)
        size = metrics.get("cssContentSize") or metrics["contentSize"]
        clip = {"x": 0, "y": 0, "width": size["width"], "height": min(size["height"], 6000), "scale": 1}
        shot = self.browser.send(
            "Page.captureScreenshot",
            {"format": "png", "clip": clip, "captureBeyondViewport": True},
            session=self.session,
        )
        path.write_bytes(base64.b64decode(shot["data"]))

    def problems(self) -> list[str]:
        """Console errors and warnings, uncaught exceptions and browser log errors seen so far."""
        found = []
        for event in self.browser.events:
            if event.get("sessionId") != self.session:
                continue
            method, params = event["method"], event.get("params", {})
            if method == "Runtime.exceptionThrown":
                found.append(f"exception: {params['exceptionDetails']}")
            elif method == "Runtime.consoleAPICalled" and params.get("type") in (
                "error",
                "warning",
                "assert",
            ):
                found.append(f"console.{params['type']}: {params.get('args')}")
            elif method == "Log.entryAdded" and params["entry"].get("level") in ("error", "warning"):
                found.append(f"log {params['entry']['level']}: {params['entry'].get('text')}")
        return found
