"""Scan progress on stderr: a live bar on a terminal, a plain line every ~30 s elsewhere (CI logs).

rich draws nothing until the end when stderr is not a terminal, and a bar redrawn ten times a
second floods a CI log; so off a terminal we print one self-contained line at a steady interval.
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any, TextIO

from datalint.index.kinds import DAMAGE_KINDS, UNSUPPORTED_KIND

MODES = ("auto", "rich", "plain", "none")


class Progress:
    """Counts outcomes and reports them; `update()` is called at least every ~0.1 s by the scan loop."""

    def __init__(self, mode: str = "auto", stream: TextIO | None = None, interval: float = 30.0) -> None:
        self.stream = stream or sys.stderr
        self.mode = _resolve(mode, self.stream)
        self.interval = interval
        self.counts: Counter[str] = Counter()
        self.total: int | None = None
        self.done_before = 0
        self.started = time.monotonic()
        self.last_line = self.started
        self._bar: Any = None
        self._task: Any = None

    def start(self, total: int | None, done_before: int, label: str) -> None:
        self.total, self.done_before, self.label = total, done_before, label
        self.started = self.last_line = time.monotonic()
        if self.mode == "rich":
            self._start_rich()
        elif self.mode == "plain":
            resumed = f", {done_before:,} already in the index" if done_before else ""
            print(
                f"datalint: scanning {label}: {self._total_text()} samples{resumed}",
                file=self.stream,
                flush=True,
            )

    def update(self, rows: Iterable[dict[str, Any]]) -> None:
        for row in rows:
            # a damaged file's probe ran to the end (status ok), but it is no good sample: counted
            # as the summary line counts it
            self.counts[outcome(row)] += 1
        now = time.monotonic()
        if self._bar is not None and now - self.last_line >= 0.1:  # redraw at most ten times a second
            self.last_line = now
            self._bar.update(
                self._task,
                completed=self.done_before + self.measured,
                status=self._status_text(),
                rate=f"{self.rate():,.0f}/s",
            )
            self._bar.refresh()
        elif self.mode == "plain" and now - self.last_line >= self.interval:
            self.last_line = now
            print(f"datalint: {self.line()}", file=self.stream, flush=True)

    def count(self, outcomes: Iterable[Mapping[str, int]]) -> None:
        """Outcomes counted elsewhere (a shard writer's), without their rows; `update()` reports them."""
        for counts in outcomes:
            self.counts.update(counts)

    def close(self) -> None:
        if self._bar is not None:
            self.last_line = 0.0
            self.update(())
            self._bar.stop()
            self._bar = None
        elif self.mode == "plain":
            print(f"datalint: {self.line()}", file=self.stream, flush=True)

    @property
    def measured(self) -> int:
        return sum(self.counts.values())

    def rate(self) -> float:
        elapsed = time.monotonic() - self.started
        return self.measured / elapsed if elapsed > 0 else 0.0

    def line(self) -> str:
        """`scanned 12,345/1,000,000 (1.2%) ok=... error=... 2,310 samples/s ETA 7m`"""
        done = self.done_before + self.measured
        share = f" ({100 * done / self.total:.1f}%)" if self.total else ""
        rate = self.rate()
        eta = ""
        if self.total and rate > 0:
            eta = f" ETA {_duration((self.total - done) / rate)}"
        return (
            f"scanned {done:,}/{self._total_text()}{share} {self._status_text()} {rate:,.0f} samples/s{eta}"
        )

    def _status_text(self) -> str:
        files = self.counts.get("damaged") or self.counts.get("unsupported")
        names = ("ok", "damaged", "unsupported", "error", "crash", "timeout") if files else _STATUSES
        return " ".join(f"{name}={self.counts.get(name, 0):,}" for name in names)

    def _total_text(self) -> str:
        return f"{self.total:,}" if self.total is not None else "?"

    def _start_rich(self) -> None:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )
        from rich.progress import Progress as RichProgress

        # auto_refresh=False: no refresh thread, so the scan loop stays single-threaded and forking a
        # replacement worker never copies a thread holding a lock.
        self._bar = RichProgress(
            TextColumn("[bold]scan[/bold]"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[status]}"),
            TextColumn("{task.fields[rate]}"),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=Console(file=self.stream),
            auto_refresh=False,
            transient=False,
        )
        self._bar.start()
        self._task = self._bar.add_task(
            "scan", total=self.total, completed=self.done_before, status="", rate=""
        )


_STATUSES = ("ok", "error", "crash", "timeout")


def outcome(row: dict[str, Any]) -> str:
    """ok, damaged, unsupported, error, crash or timeout, from a row's status and reported kinds."""
    status = str(row["status"])
    reported = row.get("reported")
    if status != "ok" or not reported:
        return status
    if isinstance(reported, str):  # JSON text, as workers send it: a substring test is enough
        kinds = {kind for kind in (*DAMAGE_KINDS, UNSUPPORTED_KIND) if f'"kind":"{kind}"' in reported}
    else:
        kinds = {str(f.get("kind")) for f in reported if isinstance(f, dict)}
    if kinds & set(DAMAGE_KINDS):
        return "damaged"
    return "unsupported" if UNSUPPORTED_KIND in kinds else status


def _resolve(mode: str, stream: TextIO) -> str:
    if mode != "auto":
        return mode
    return "rich" if _is_terminal(stream) else "plain"


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f}s"
    if seconds < 5400:
        return f"{seconds / 60:.0f}m"
    return f"{seconds / 3600:.1f}h"
