"""Scans as jobs: queued per dataset, one at a time, each an isolated child process.

A job is a JSON file in `<data-dir>/jobs/` (written atomically), so a restarted service finds the
jobs it was running and resumes them: the engine resumes a scan from its index, measuring only what
is missing. Progress is read from the index the child writes (WAL: readers never block it), so the
child reports nothing and a SIGKILLed child leaves nothing half-said: the parent sees the exit code.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from datalint.index import read, store
from datalint.service.config import DatasetConfig
from datalint.service.registry import Registry

logger = logging.getLogger("datalint.service")

ACTIVE = ("queued", "running")
MODES = ("resume", "full", "incremental")
CANCEL_GRACE_S = 10.0


@dataclass(frozen=True)
class Progress:
    done: int = 0
    total: int | None = None
    rate: float | None = None  # samples per second, over the last poll interval
    eta: float | None = None  # seconds
    findings: int = 0  # samples measured so far that are not ok


@dataclass(frozen=True)
class Job:
    id: str
    dataset: str
    mode: str
    state: str  # queued, running, succeeded, failed, cancelled, interrupted
    created: str
    reason: str = "api"  # api, schedule, resume
    started: str | None = None
    finished: str | None = None
    pid: int | None = None
    returncode: int | None = None
    error: str | None = None
    resumed: bool = False
    summary: dict[str, Any] | None = None
    progress: Progress = field(default_factory=Progress)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, value: dict[str, Any]) -> Job:
        value = dict(value)
        value["progress"] = Progress(**value.get("progress") or {})
        return cls(**value)


class JobManager:
    """Starts, watches, cancels and resumes the scans of every dataset (one thread, polling)."""

    def __init__(
        self,
        registry: Registry,
        *,
        poll: float = 0.25,
        on_event: Callable[[Job, str], None] | None = None,
        pause: Callable[[str], None] = lambda name: None,
        resume: Callable[[str], None] = lambda name: None,
    ) -> None:
        """`pause(name)` runs before a scan of the dataset starts and returns once nothing else writes
        its index (the dataset's watcher stopped); `resume(name)` runs once the scan is over."""
        self.registry = registry
        self.pause = pause
        self.resume = resume
        self.folder = registry.config.data_dir / "jobs"
        self.folder.mkdir(parents=True, exist_ok=True)
        self.poll = poll
        self.on_event = on_event
        self._lock = threading.Lock()
        self._jobs: dict[str, Job] = {}
        self._children: dict[str, subprocess.Popen[bytes]] = {}
        self._cancelling: dict[str, float] = {}
        self._last_done: dict[str, tuple[float, int]] = {}
        self._base_run: dict[str, int | None] = {}  # each job's index's last scan run before it started
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.samples_per_second = 0.0
        self._load()

    # ---- the API -----------------------------------------------------------------------------

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="datalint-jobs", daemon=True)
        self._thread.start()

    def submit(self, dataset: str, mode: str = "resume", reason: str = "api") -> Job:
        job = Job(
            id=uuid.uuid4().hex[:16],
            dataset=dataset,
            mode=mode,
            state="queued",
            created=store.utc_now("milliseconds"),
            reason=reason,
        )
        with self._lock:
            self._save(job)
        self._event(job, "queued")
        return job

    def get(self, job_id: str) -> Job | None:
        with self._lock:
            return self._jobs.get(job_id)

    def jobs(self, dataset: str | None = None) -> list[Job]:
        with self._lock:
            chosen = [j for j in self._jobs.values() if dataset is None or j.dataset == dataset]
        return sorted(chosen, key=lambda j: j.created, reverse=True)

    def cancel(self, job_id: str) -> Job | None:
        with self._lock:
            job = self._jobs.get(job_id)
            if job is None or job.state not in ACTIVE:
                return job
            if job.state == "queued":
                job = replace(job, state="cancelled", finished=store.utc_now("milliseconds"))
                self._save(job)
            else:
                self._signal(job_id, signal.SIGTERM)
                self._cancelling[job_id] = time.monotonic()
        self._event(job, "cancel requested" if job.state == "running" else "cancelled")
        return job

    def running(self) -> list[Job]:
        return [j for j in self.jobs() if j.state == "running"]

    def shutdown(self, timeout: float = 30.0) -> None:
        """Drain: stop starting jobs, checkpoint running scans (SIGTERM), mark them for resuming."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        with self._lock:
            running = list(self._children)
            for job_id in running:
                self._signal(job_id, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for job_id in running:
            child = self._children[job_id]
            try:
                child.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                self._signal(job_id, signal.SIGKILL)
                child.wait()
            with self._lock:
                job = self._jobs[job_id]
                cancelled = job_id in self._cancelling
                job = replace(
                    job,
                    state="cancelled" if cancelled else "interrupted",
                    pid=None,
                    finished=store.utc_now("milliseconds") if cancelled else None,
                )
                self._save(job)
            self._event(job, "checkpointed for resume" if not cancelled else "cancelled")

    # ---- the loop ----------------------------------------------------------------------------

    def _loop(self) -> None:
        while not self._stop.wait(self.poll):
            try:
                self._tick()
            except Exception:  # the loop must outlive any one job's surprise; the log says what
                logger.exception("job loop")

    def _tick(self) -> None:
        for job_id in list(self._children):
            self._watch(job_id)
        self._schedule()
        with self._lock:
            busy = {j.dataset for j in self._jobs.values() if j.state == "running"}
            queued = sorted((j for j in self._jobs.values() if j.state == "queued"), key=lambda j: j.created)
        for job in queued:
            if job.dataset not in busy and not self._stop.is_set():
                busy.add(job.dataset)
                self._launch(job)

    def _schedule(self) -> None:
        """Datasets with an `interval` get a scan when the last one finished that long ago."""
        now = time.time()
        for name in self.registry.names():
            dataset = self.registry.get(name)
            if dataset is None or dataset.interval is None or dataset.watch:
                continue  # a watched dataset's watcher is its one scanner
            jobs = self.jobs(name)
            if any(j.state in ACTIVE for j in jobs):
                continue
            last = max((_epoch(j.finished or j.created) for j in jobs), default=0.0)
            if now - last >= dataset.interval:
                self.submit(name, "incremental", reason="schedule")

    def _launch(self, job: Job) -> None:
        dataset = self.registry.get(job.dataset)
        if dataset is None:
            self._finish(job, "failed", error=f"dataset {job.dataset!r} is no longer registered")
            return
        folder = self.registry.folder(job.dataset)
        folder.mkdir(parents=True, exist_ok=True)
        spec_path = self.folder / f"{job.id}.job.json"
        spec_path.write_text(json.dumps(self._child_spec(job, dataset)), encoding="utf-8")
        # Progress counts from the run the child starts: until then the index shows the last scan's.
        self._base_run[job.id] = latest_scan_run(self.registry.index_path(job.dataset))
        self.pause(job.dataset)  # one writer per index: the watcher waits while the scan runs
        self.registry.lists.hold(job.dataset)  # the list is published once, when the scan is over
        log = (self.folder / f"{job.id}.log").open("ab")
        try:
            child = subprocess.Popen(
                [sys.executable, "-m", "datalint.service.scanjob", str(spec_path)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                start_new_session=True,
            )
        except OSError as exc:
            self._over(job.dataset)
            self._finish(job, "failed", error=f"the scan process could not start: {exc}")
            return
        finally:
            log.close()
        job = replace(job, state="running", started=store.utc_now("milliseconds"), pid=child.pid)
        with self._lock:
            self._children[job.id] = child
            self._save(job)
        self._event(job, f"started (pid {child.pid})")

    def _child_spec(self, job: Job, dataset: DatasetConfig) -> dict[str, Any]:
        return {
            "id": job.id,
            "mode": job.mode,
            "resumed": job.resumed,
            "images": str(dataset.images) if dataset.images else None,
            "dataset": dataset.dataset,
            "scan_options": dataset.scan_options,
            "scheduler": self.registry.config.scheduler,
            "index": str(self.registry.index_path(job.dataset)),
            "quarantine": str(self.registry.quarantine_path(job.dataset)),
        }

    def _watch(self, job_id: str) -> None:
        child = self._children[job_id]
        job = self.get(job_id)
        assert job is not None
        code = child.poll()
        if code is None:
            since = self._cancelling.get(job_id)
            if since is not None and time.monotonic() - since > CANCEL_GRACE_S:
                self._signal(job_id, signal.SIGKILL)
            self._update_progress(job)
            return
        del self._children[job_id]
        self._update_progress(job)
        job = self.get(job_id) or job
        cancelled = self._cancelling.pop(job_id, None) is not None
        # The job ends once its list is published (a 1M-entry list takes seconds to build): a client
        # that sees `succeeded` and then GETs the list gets this scan's. Built off the job loop.
        threading.Thread(
            target=self._conclude, args=(job, code, cancelled), name=f"datalint-job-{job_id}", daemon=True
        ).start()

    def _conclude(self, job: Job, code: int, cancelled: bool) -> None:
        self._over(job.dataset)
        result = self._result(job.id)
        if cancelled:
            self._finish(job, "cancelled", returncode=code)
        elif code == 0 and result.get("ok"):
            self._finish(job, "succeeded", returncode=code, summary=result.get("summary"))
        else:
            self._finish(
                job,
                "failed",
                returncode=code,
                error=result.get("error") or _death(code, self._log_tail(job.id)),
            )

    def _over(self, dataset: str) -> None:
        """The scan of `dataset` is over: publish its list, and give the index back to its watcher."""
        try:
            self.registry.lists.publish_after(dataset)
        except Exception as exc:  # a broken index: its list answers with the error; the job still ends
            logger.warning("list of %s not published: %s", dataset, exc)
        finally:
            self.resume(dataset)

    def _update_progress(self, job: Job) -> None:
        progress = read_progress(self.registry.index_path(job.dataset), self._base_run.get(job.id))
        if progress is None:
            return
        now = time.monotonic()
        previous = self._last_done.get(job.id)
        rate = job.progress.rate
        if previous is not None and now > previous[0] and progress.done >= previous[1]:
            measured = (progress.done - previous[1]) / (now - previous[0])
            rate = measured if rate is None else 0.7 * rate + 0.3 * measured
        self._last_done[job.id] = (now, progress.done)
        eta = None
        if rate and progress.total is not None:
            eta = max(0.0, (progress.total - progress.done) / rate) if rate > 0 else None
        progress = replace(
            progress,
            rate=round(rate, 1) if rate is not None else None,
            eta=round(eta, 1) if eta is not None else None,
        )
        with self._lock:
            current = self._jobs.get(job.id)
            if current is not None:
                self._jobs[job.id] = replace(current, progress=progress)
        self.samples_per_second = sum((j.progress.rate or 0.0) for j in self.running())

    def _finish(self, job: Job, state: str, **values: Any) -> None:
        job = replace(job, state=state, pid=None, finished=store.utc_now("milliseconds"), **values)
        with self._lock:
            self._save(job)
        self._event(job, state + (f": {job.error}" if job.error else ""))

    def _result(self, job_id: str) -> dict[str, Any]:
        path = self.folder / f"{job_id}.job.result.json"
        try:
            value = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return value if isinstance(value, dict) else {}

    def _log_tail(self, job_id: str) -> str:
        try:
            lines = (self.folder / f"{job_id}.log").read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            return ""
        return lines[-1][:500] if lines else ""

    def _signal(self, job_id: str, signum: int) -> None:
        child = self._children.get(job_id)
        if child is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(child.pid, signum)  # the child leads its own group: its workers get it too

    # ---- persistence ---------------------------------------------------------------------------

    def _save(self, job: Job) -> None:
        from datalint.scan.api import write_json_atomically

        self._jobs[job.id] = job
        write_json_atomically(self.folder / f"{job.id}.json", job.to_dict())

    def _load(self) -> None:
        """Read the saved jobs; those a previous service was running (or had queued) go back in the queue."""
        for path in sorted(self.folder.glob("*.json")):
            if path.name.endswith((".job.json", ".result.json")):
                continue
            try:
                job = Job.from_dict(json.loads(path.read_text(encoding="utf-8")))
            except (OSError, ValueError, TypeError) as exc:
                logger.warning("jobs: skipping %s: %s", path, exc)
                continue
            if job.state in ("running", "interrupted") or job.state == "queued":
                if job.pid is not None:
                    _stop_orphan(job.pid, job.id)
                job = replace(
                    job,
                    state="queued",
                    pid=None,
                    resumed=job.state != "queued" or job.resumed,
                    reason="resume" if job.state != "queued" else job.reason,
                )
                self._save(job)
                self._event(job, "will resume")
            self._jobs[job.id] = job

    def _event(self, job: Job, what: str) -> None:
        logger.info("job %s %s (%s, %s): %s", job.id, job.dataset, job.mode, job.reason, what)
        if self.on_event is not None:
            self.on_event(job, what)


def latest_scan_run(index_path: Path) -> int | None:
    """The id of the index's last scan run (None: no index, or no scan in it yet)."""
    if not index_path.is_file():
        return None
    try:
        with read.reading(index_path, timeout=5) as connection:
            return read.last_scan_id(connection)
    except sqlite3.Error:
        return None


def read_progress(index_path: Path, after_run: int | None = None) -> Progress | None:
    """Samples measured, the dataset's length and the samples that are not ok, from the live index;
    nothing measured yet while its last scan run is still `after_run` (the job's own has not begun)."""
    if not index_path.is_file():
        return None
    try:
        with read.reading(index_path, timeout=5) as connection:
            now = read.measured(connection, after_run)
    except sqlite3.Error:
        return None  # the child is creating the schema right now; the next poll reads it
    return Progress(done=now.done, total=now.total, findings=now.not_ok)


def _death(code: int, tail: str) -> str:
    how = f"killed by signal {-code}" if code < 0 else f"exited with status {code}"
    return f"the scan process {how}" + (f"; last output: {tail}" if tail else "")


def _epoch(stamp: str) -> float:
    from datetime import datetime

    try:
        return datetime.fromisoformat(stamp).timestamp()
    except ValueError:
        return 0.0


def _stop_orphan(pid: int, job_id: str) -> None:
    """A scan a SIGKILLed service left running (its own session survived): stop it before resuming."""
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return
    if job_id.encode() not in command:
        return  # the pid was reused by something else
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGTERM)
    for _ in range(100):
        if not _running(pid):
            return
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def _running(pid: int) -> bool:
    """Alive and not a zombie (an orphan's zombie stays until init reaps it, which may be never)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False
