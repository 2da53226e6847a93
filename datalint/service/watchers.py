"""`watch = true`: one `datalint watch` child per watched dataset, kept alive by the service.

Each watcher is `python -m datalint watch --images DIR|--dataset SPEC --db INDEX --quarantine LIST`
with the dataset's scan options, in its own session, so a watcher that crashes or is SIGKILLed takes
only itself down; the service restarts it with a doubling backoff (reset once it has stayed up for a
while) and stops its whole process group on shutdown. One writer per index: a scan job of a watched
dataset (asked for through the API, or resumed after a restart) pauses its watcher first (SIGTERM: it
finishes the update it is writing and exits) and the watcher starts again when the scan is over; the
index's scan lock would refuse two scanners anyway. The served list follows on its own: the list
keeper notices the index changing.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from datalint.service.config import DatasetConfig
from datalint.service.registry import Registry

logger = logging.getLogger("datalint.service")

BACKOFF_START_S = 1.0
BACKOFF_MAX_S = 60.0
HEALTHY_AFTER_S = 30.0  # a watcher up this long has recovered: the next death restarts it at once
STOP_GRACE_S = 10.0


@dataclass(frozen=True)
class WatcherState:
    """What the API and the overview show of one watcher."""

    dataset: str
    running: bool
    pid: int | None
    restarts: int
    last_exit: str | None
    paused: bool = False  # stopped while a scan job of the dataset runs


def watch_command(dataset: DatasetConfig, registry: Registry) -> list[str]:
    """The `datalint watch` command line for a dataset: its source, its files and its scan options."""
    command = [sys.executable, "-m", "datalint", "watch"]
    if dataset.images is not None:
        command += ["--images", str(dataset.images)]
    else:
        assert dataset.dataset is not None
        command += ["--dataset", dataset.dataset]
    command += [
        "--db",
        str(registry.index_path(dataset.name)),
        "--quarantine",
        str(registry.quarantine_path(dataset.name)),
        "--progress",
        "none",
    ]
    command += _scan_flags(dataset.scan_options)
    options: dict[str, Any] = {}
    if registry.config.scheduler:
        options.update(backend="dask", scheduler=registry.config.scheduler)
    if "backend" in dataset.scan_options:  # the dataset's own choice wins over the service's
        options["backend"] = dataset.scan_options["backend"]
    options.update(dataset.watch_options)  # settle, poll, rescan_every: seconds
    for key, value in options.items():
        command += ["--" + key.replace("_", "-"), str(value)]
    return command


def _scan_flags(scan_options: dict[str, Any]) -> list[str]:
    """The dataset's scan settings as `datalint watch` flags, under `--isolated`: the watcher reads no
    project file itself. A dataset's `config` is merged here, with a scan job's precedence (the
    dataset's keys over the project's), so a key the dataset switched off stays off."""
    from datalint.errors import UsageError
    from datalint.scan.settings import DEFAULT, KEYS, THRESHOLDS_KEY, as_flags, keyword_settings

    keywords = {key: value for key, value in scan_options.items() if key.replace("_", "-") in KEYS}
    limits = scan_options.get(THRESHOLDS_KEY)
    project = scan_options.get("config")
    try:
        settings = keyword_settings(keywords, limits, project or False)
    except UsageError:  # the project file broke since the start: the watcher's log says why (exit 2)
        given = {key.replace("_", "-"): value for key, value in keywords.items()}
        return ["--config", str(project), *as_flags(given, limits)]
    given = {name: value for name, value in settings.values.items() if settings.origins[name] != DEFAULT}
    return ["--isolated", *as_flags(given, dict(settings.thresholds))]


class Watchers:
    """Starts the watched datasets' watchers, restarts the dead ones, stops them all on shutdown."""

    def __init__(
        self,
        registry: Registry,
        *,
        poll: float = 0.5,
        on_event: Callable[[str, str], None] | None = None,
    ) -> None:
        self.registry = registry
        self.folder = registry.config.data_dir / "watchers"
        self.poll = poll
        self.on_event = on_event
        self._lock = threading.Lock()
        self._control = threading.Lock()  # a launch and a pause never interleave
        self._paused: set[str] = set()
        self._children: dict[str, subprocess.Popen[bytes]] = {}
        self._started: dict[str, float] = {}
        self._backoff: dict[str, float] = {}
        self._next_start: dict[str, float] = {}
        self._restarts: dict[str, int] = {}
        self._last_exit: dict[str, str] = {}
        self._commands: dict[str, list[str]] = {}  # what each running watcher was started with
        self._stamps: dict[str, tuple[int, int | None]] = {}  # its settings as last looked at
        # stopped for new settings (-> when): started again at once; killed if it outlives STOP_GRACE_S
        self._restarting: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        self._stop_orphans()
        self._tick()  # the watchers start with the service, not one poll later
        self._thread = threading.Thread(target=self._loop, name="datalint-watchers", daemon=True)
        self._thread.start()

    def running(self, name: str) -> bool:
        with self._lock:
            child = self._children.get(name)
            return child is not None and child.poll() is None

    def states(self) -> list[WatcherState]:
        with self._lock:
            names = sorted(set(self._children) | set(self._restarts))
            return [
                WatcherState(
                    dataset=name,
                    running=name in self._children and self._children[name].poll() is None,
                    pid=self._children[name].pid if name in self._children else None,
                    restarts=self._restarts.get(name, 0),
                    last_exit=self._last_exit.get(name),
                    paused=name in self._paused,
                )
                for name in names
            ]

    def pause(self, name: str, timeout: float = STOP_GRACE_S) -> None:
        """Stop the dataset's watcher until `resume(name)` (a scan job is about to write its index);
        returns once it has exited."""
        dataset = self.registry.get(name)
        if dataset is None or not dataset.watch:
            return  # no watcher to pause (nor to resume, nor to log about)
        with self._control:
            with self._lock:
                self._paused.add(name)
                child = self._children.pop(name, None)
            if child is None:
                return
            _signal_group(child.pid, signal.SIGTERM)
            try:
                child.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                _signal_group(child.pid, signal.SIGKILL)
                child.wait()
        self._event(name, f"watcher paused for a scan (exit {child.returncode})")

    def resume(self, name: str) -> None:
        """The scan is over: the watcher starts again at the next poll."""
        with self._lock:
            if name not in self._paused:
                return
            self._paused.discard(name)
            self._next_start[name] = 0.0
        self._event(name, "watcher resumed after the scan")

    def count_running(self) -> int:
        return sum(state.running for state in self.states())

    def shutdown(self, timeout: float = STOP_GRACE_S) -> None:
        """Stop every watcher (SIGTERM to its group: it finishes the update it is writing, then exits)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        with self._lock:
            children = dict(self._children)
            self._children.clear()
        for child in children.values():
            _signal_group(child.pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for name, child in children.items():
            try:
                child.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                _signal_group(child.pid, signal.SIGKILL)
                child.wait()
            self._event(name, f"watcher stopped (exit {child.returncode})")

    # ---- the loop ----------------------------------------------------------------------------

    def _loop(self) -> None:
        while not self._stop.wait(self.poll):
            try:
                self._tick()
            except Exception:  # the loop must outlive any one watcher's surprise; the log says what
                logger.exception("watcher loop")

    def _tick(self) -> None:
        with self._lock:
            paused = set(self._paused)
        wanted = {name for name in self.registry.names() if self._watched(name) and name not in paused}
        with self._lock:
            running = [name for name in self._children if name in wanted and name not in self._restarting]
        changed = {name for name in running if self._settings_changed(name)}  # reads files: unlocked
        now = time.monotonic()
        with self._lock:
            for name, child in list(self._children.items()):
                code = child.poll()
                if code is None and name in wanted:
                    if name in changed:
                        self._restarting[name] = now
                        _signal_group(child.pid, signal.SIGTERM)  # it finishes the update it is writing
                    elif now - self._restarting.get(name, now) > STOP_GRACE_S:
                        # A watcher that outlives its grace would hold its dataset's restart for ever:
                        # what it wrote is in the index; the next one goes on from there.
                        _signal_group(child.pid, signal.SIGKILL)
                    continue
                if code is None:  # unregistered or no longer watched
                    _signal_group(child.pid, signal.SIGTERM)
                    continue
                del self._children[name]
                if name in self._restarting:  # not a death: no backoff, no restart counted
                    del self._restarting[name]
                    self._next_start[name] = now
                    continue
                self._died(name, code, now)
            due = [n for n in wanted if n not in self._children and self._next_start.get(n, 0.0) <= now]
        for name in sorted(due):
            if not self._stop.is_set():
                self._launch(name)

    def _settings_changed(self, name: str) -> bool:
        """Whether the watcher should start again with other flags: the dataset was registered anew,
        or the project file its `config` names was edited (and still reads: a broken one fails
        the scan jobs, but the watcher keeps the settings it has)."""
        dataset = self.registry.get(name)
        if dataset is None:
            return False
        stamp = _settings_stamp(dataset)
        if stamp == self._stamps.get(name):
            return False
        self._stamps[name] = stamp  # looked at once per change, not at every poll
        command = watch_command(dataset, self.registry)
        if command == self._commands.get(name):
            return False
        if "--isolated" not in command:  # the project file no longer reads
            self._event(name, f"the settings in {dataset.scan_options.get('config')} cannot be read: "
                        "the watcher keeps those it has")  # fmt: skip
            return False
        self._event(name, "the dataset's settings changed: restarting its watcher with them")
        return True

    def _watched(self, name: str) -> bool:
        dataset = self.registry.get(name)
        return dataset is not None and dataset.watch

    def _died(self, name: str, code: int, now: float) -> None:
        how = f"killed by signal {-code}" if code < 0 else f"exited with status {code}"
        up = now - self._started.get(name, now)
        previous = self._backoff.get(name, BACKOFF_START_S / 2)
        backoff = BACKOFF_START_S if up >= HEALTHY_AFTER_S else min(previous * 2, BACKOFF_MAX_S)
        self._backoff[name] = backoff
        self._next_start[name] = now + backoff
        self._restarts[name] = self._restarts.get(name, 0) + 1
        self._last_exit[name] = how
        self.registry.lists.invalidate(name)  # it may have died mid-update
        self._event(name, f"watcher {how} after {up:.0f}s; restarting in {backoff:g}s")

    def _launch(self, name: str) -> None:
        with self._control:
            with self._lock:
                if name in self._paused:
                    return  # a scan job paused it between the tick's decision and now
            self._start_child(name)

    def _start_child(self, name: str) -> None:
        dataset = self.registry.get(name)
        if dataset is None:
            return
        self.registry.folder(name).mkdir(parents=True, exist_ok=True)
        log = (self.folder / f"{name}.log").open("ab")
        stamp, command = _settings_stamp(dataset), watch_command(dataset, self.registry)
        try:
            child = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                start_new_session=True,
            )
        except OSError as exc:
            self._died(name, 127, time.monotonic())
            self._event(name, f"watcher could not start: {exc}")
            return
        finally:
            log.close()
        (self.folder / f"{name}.pid").write_text(str(child.pid), encoding="utf-8")
        with self._lock:
            self._children[name] = child
            self._started[name] = time.monotonic()
            self._commands[name], self._stamps[name] = command, stamp
        self._event(name, f"watcher started (pid {child.pid})")

    def _stop_orphans(self) -> None:
        """Watchers a SIGKILLed service left running (their own sessions survive it): a second would
        be a second writer of the same index."""
        from datalint.service.jobs import _stop_orphan

        for path in self.folder.glob("*.pid"):
            with contextlib.suppress(OSError, ValueError):
                index = self.registry.index_path(path.stem)
                _stop_orphan(int(path.read_text(encoding="utf-8")), str(index))  # checks its command line
            path.unlink(missing_ok=True)

    def _event(self, name: str, what: str) -> None:
        logger.info("dataset %s: %s", name, what)
        if self.on_event is not None:
            self.on_event(name, what)


def _settings_stamp(dataset: DatasetConfig) -> tuple[int, int | None]:
    """What changes when the dataset's settings may have: its registration (a new object) and the
    modification time of the project file its `config` names."""
    project = dataset.scan_options.get("config")
    try:
        mtime = os.stat(project).st_mtime_ns if project else None
    except OSError:
        mtime = -1
    return id(dataset), mtime


def _signal_group(pid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signum)  # the watcher leads its own group: its scan's workers get it too


def as_dict(state: WatcherState) -> dict[str, Any]:
    return {
        "running": state.running,
        "pid": state.pid,
        "restarts": state.restarts,
        "last_exit": state.last_exit,
        "paused": state.paused,
    }
