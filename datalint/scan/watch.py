"""`datalint watch`: keep an index and its quarantine list current while the data changes.

Every update is an incremental scan (`datalint.scan.changes`): a stat walk finds what changed since
the index, only that is measured, and the list is rewritten atomically. What starts an update:

- folders: filesystem events through `watchfiles` (its Rust notify core debounces and copes with
  inotify limits). An update after events lists the folder from the index's keys and the event
  paths alone, without walking it, and stats only the files the events named (the others keep
  the state recorded when they were measured); a full walk, which stats every file, is made
  first, every `rescan_every` seconds (the safety net for events lost on NFS or when inotify
  watches run out), after a folder event (a folder created, moved or deleted names none of its
  files), after a burst of more than
  `_MAX_EVENT_PATHS` paths (watchfiles reports no inotify queue overflow, so a burst is treated
  as one), and whenever the event thread had to be restarted;
- datasets: a poll (`poll`), each in a freshly spawned interpreter, so the spec's module is
  imported again and sees new records.

A file still being written waits until it has been quiet for `settle` seconds; a file that
changes while it is measured differs from the state recorded before measuring it, so the next
update measures it again. A folder that disappears or loses most of its files at once (a lost
mount) pauses the watch with a warning and keeps the last list. The index is written the way a
scan writes it, so a watch killed with SIGKILL leaves a valid index that the next start resumes.
"""

from __future__ import annotations

import bisect
import contextlib
import dataclasses
import json
import multiprocessing
import os
import queue
import signal
import sqlite3
import stat
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from datalint.index import changes as index_changes
from datalint.index import read
from datalint.scan import api
from datalint.scan.sources import SourceDescription

Log = Callable[[str], None]

_CHECK_ROOT_EVERY = 1.0  # seconds between checks that the watched folder is still there
_RETRY_PAUSED = 5.0  # seconds between walks of a paused folder, to see whether its files are back
_QUIET_FILES = (".tmp", ".part", ".crdownload")  # being downloaded: the rename to the final name counts
_MAX_EVENT_PATHS = 20_000  # more paths than this between two updates: walk the folder instead


@dataclass(frozen=True)
class WatchOptions:
    """How a watch decides when to update."""

    settle: float = 2.0
    rescan_every: float = 3600.0
    poll: float = 300.0
    vanished_fraction: float = 0.5  # a folder losing at least this share of its samples at once pauses
    json_lines: bool = False  # log each update as one JSON object instead of a sentence


@dataclass(frozen=True)
class Update:
    """One update of the list: what changed, and who entered or left the list."""

    at: str
    changes: dict[str, Any] | None
    quarantined: int
    entered: tuple[str, ...]
    left: tuple[str, ...]
    elapsed: float
    listing: str = "walk"  # how the folder's files were found: "walk", or "events" (from event paths)

    def line(self) -> str:
        changed = (self.changes or {}).get("added") is not None
        what = _describe_changes(self.changes) if changed else "first scan"
        listed = f"{self.quarantined:,} quarantined"
        if self.entered:
            listed += f" (+{len(self.entered)}: {_few(self.entered)})"
        if self.left:
            listed += f" (-{len(self.left)}: {_few(self.left)})"
        return f"{self.at} {what}; {listed} [{self.elapsed:.2f}s]"

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self) | {"entered": list(self.entered), "left": list(self.left)}


def _describe_changes(changes: dict[str, Any] | None) -> str:
    counts = changes or {}
    parts = [
        f"{counts[name]:,} {name}" for name in ("added", "changed", "removed", "moved") if counts.get(name)
    ]
    if counts.get("remeasured"):
        parts.append(f"{counts['remeasured']:,} re-measured")
    waiting = f", {counts['deferred']:,} still being written" if counts.get("deferred") else ""
    return f"{', '.join(parts) or 'nothing changed'}; {counts.get('measured', 0):,} measured{waiting}"


def _few(keys: tuple[str, ...], shown: int = 3) -> str:
    return ", ".join(keys[:shown]) + (", ..." if len(keys) > shown else "")


# ----------------------------------------------------------------------------------------------
# One update


class _Lister:
    """Reads the keys a quarantine list holds, to say what entered and left it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.keys = self._read()

    def _read(self) -> set[str]:
        try:
            document = json.loads(self.path.read_text(encoding="utf-8"))
            return {str(entry.get("key", entry.get("index"))) for entry in document.get("samples", [])}
        except (OSError, ValueError, AttributeError):
            return set()

    def update(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        now = self._read()
        entered, left = tuple(sorted(now - self.keys)), tuple(sorted(self.keys - now))
        self.keys = now
        return entered, left


def scan_once(
    description: SourceDescription, options: api.ScanOptions, db: Path, quarantine: Path
) -> api.ScanSummary:
    """One incremental scan, as an update of a watch does it."""
    return api.scan_source(description, options, db=db, quarantine=quarantine)


def _update(
    description: SourceDescription,
    options: api.ScanOptions,
    db: Path,
    lister: _Lister,
    scan: Callable[..., dict[str, Any]],
) -> Update:
    started = time.monotonic()
    summary = scan(description, options, db, lister.path)
    entered, left = lister.update()
    return Update(
        at=time.strftime("%H:%M:%S"),
        changes=summary.get("changes"),
        quarantined=int(summary.get("quarantined", 0)),
        entered=entered,
        left=left,
        elapsed=time.monotonic() - started,
    )


def _scan_here(description: SourceDescription, options: api.ScanOptions, db: Path, quarantine: Path) -> Any:
    return scan_once(description, options, db, quarantine).to_dict()


# ----------------------------------------------------------------------------------------------
# Folders


def watch_folder(
    description: SourceDescription,
    options: api.ScanOptions,
    watch: WatchOptions,
    *,
    db: Path,
    quarantine: Path,
    log: Log,
    warn: Log,
    stop: threading.Event | None = None,
) -> None:
    """Keep the index and list of an image folder current until `stop` is set (or an interrupt)."""
    stop = stop or threading.Event()
    root = Path(str(description.option("root", description.spec)))
    scan_options = dataclasses.replace(
        options, settle=watch.settle, vanished_fraction=watch.vanished_fraction, progress="none"
    )
    lister = _Lister(quarantine)
    events = _Events(root, ignored=_own_files(db, quarantine))
    due: float | None = time.monotonic()  # the first update resumes whatever the index lacks
    next_walk = time.monotonic() + watch.rescan_every
    pending = _Pending()  # the paths events named since the last update; a full walk first
    paused: str | None = None
    first = True  # the first update is logged even when nothing changed: the index is current
    try:
        while not stop.is_set():
            if not root.is_dir():
                if paused is None or not paused.startswith(str(root)):
                    paused = f"{root} is gone (a lost mount?)"
                    warn(f"paused: {paused}; the last list is kept")
                events.close()  # a folder put back is another inode: watch it afresh
                pending.walk = True
                due = time.monotonic()
                stop.wait(_CHECK_ROOT_EVERY)
                continue
            if events.ensure_running():
                pending.walk = True  # events may have been missed while no thread watched
            if pending.add(events.drain(timeout=_next_wait(due, next_walk, time.monotonic()))):
                due = time.monotonic() + watch.settle  # wait until the writer has been quiet
            now = time.monotonic()
            if now >= next_walk:
                due, next_walk, pending.walk = now, now + watch.rescan_every, True
            if due is None and paused is not None:
                due = now + _RETRY_PAUSED
            if due is None or now < due:
                continue
            due = None
            try:
                held = not pending.walk and _hold_event_listing(description, root, db, pending.paths)
                # After events only the paths they named are stat'ed; a walk stats every file.
                stat_only = event_keys(root, pending.paths) if held else None
                now_options = dataclasses.replace(scan_options, stat_only=stat_only)
                update = _update(description, now_options, db, lister, _scan_here)
                update = dataclasses.replace(update, listing="events" if held else "walk")
            except (api.SourceVanishedError, FileNotFoundError) as exc:
                reason = str(exc) if isinstance(exc, api.SourceVanishedError) else f"{root} is gone"
                if paused is None:
                    warn(f"paused: {reason}")
                paused, due = reason, time.monotonic() + _RETRY_PAUSED
                continue
            except (OSError, sqlite3.OperationalError) as exc:  # a full disk, a locked index: try again
                warn(f"this update failed ({type(exc).__name__}: {exc}); the last list is kept, retrying")
                due = time.monotonic() + _RETRY_PAUSED
                continue
            scan_options = dataclasses.replace(scan_options, rescan=False)  # --rescan: the first update only
            if paused is not None:
                warn(f"resumed: {root} is back")
                paused = None
            if first or update.changes is None or _changed(update):
                log(_format(update, watch))
            first = False
            if (update.changes or {}).get("deferred"):
                due = time.monotonic() + watch.settle / 2  # the paths stay pending until measured
            else:
                pending.clear()
    finally:
        events.close()


class _Pending:
    """What the next folder update must look at: the event paths, or (`walk`) the whole folder."""

    def __init__(self) -> None:
        self.paths: set[str] = set()
        self.walk = True

    def add(self, paths: set[str] | None) -> bool:
        """Take the paths of a drain; True when there were any."""
        if not paths:
            return False
        self.paths |= paths
        if len(self.paths) > _MAX_EVENT_PATHS:
            self.walk = True
        return True

    def clear(self) -> None:
        self.paths = set()
        self.walk = False


def _hold_event_listing(description: SourceDescription, root: Path, db: Path, paths: set[str]) -> bool:
    """Give the next scan the folder's files from the index and the event paths, without a walk
    (the scan then stats each file as any incremental scan does); False, and nothing held, when
    only a walk can tell."""
    from datalint.scan.images import DEFAULT_EXTENSIONS, ImageFilesSource, ImageListing, normalize_extensions
    from datalint.scan.sources import hold_source

    if any(description.option(name) is not None for name in ("dataset", "file_list", "files")):
        return False
    keys = _indexed_keys(db)
    if keys is None:
        return False
    wanted = frozenset(normalize_extensions(description.option("extensions", DEFAULT_EXTENSIONS)))
    files = event_listing(root, keys, paths, wanted)
    if files is None:
        return False
    hold_source(description, ImageFilesSource(description, ImageListing(str(root), files)))
    return True


def event_listing(
    root: Path, keys: set[str], paths: Iterable[str], wanted: frozenset[str]
) -> tuple[str, ...] | None:
    """The folder's image files: `keys` (the last listing) with the event `paths` looked at again,
    sorted as a walk sorts them; None when only a walk can tell (a folder event, an unreadable entry).
    """
    files = set(keys)
    folders: list[str] | None = None
    base = os.fspath(root)
    for path in paths:
        relative = os.path.relpath(path, base)
        if relative == "." or relative == ".." or relative.startswith(".." + os.sep):
            return None  # the folder itself, or a path outside it (a symlinked root): walk
        try:
            mode = os.lstat(path).st_mode
        except FileNotFoundError:
            if relative in files:
                files.discard(relative)
                continue
            if folders is None:
                folders = sorted(files)
            at = bisect.bisect_left(folders, relative + "/")
            if at < len(folders) and folders[at].startswith(relative + "/"):
                return None  # a folder of indexed files went: its files sent no events of their own
            continue
        except (OSError, ValueError):
            return None
        if stat.S_ISDIR(mode):
            return None  # a folder created or moved in: its files sent no events of their own
        if os.path.splitext(relative)[1].lower() in wanted:
            files.add(relative)
    return tuple(sorted(files))


def event_keys(root: Path, paths: Iterable[str]) -> frozenset[str]:
    """The keys (paths relative to the folder, as a listing gives them) the event paths name."""
    base = os.fspath(root)
    return frozenset(os.path.relpath(path, base) for path in paths)


def _indexed_keys(db: Path) -> set[str] | None:
    """The keys of the last complete listing, or None when the index cannot say (an interrupted
    scan, folders that could not be listed)."""
    try:
        with read.reading(db, timeout=5) as connection:
            length, keys = index_changes.last_listing(connection)
    except sqlite3.Error:
        return None
    named = {key for key in keys if key is not None and not key.endswith("/")}
    if length is None or length != len(keys) or len(named) != len(keys):
        return None  # unkeyed samples, or folders that could not be listed: walk instead
    return named


def _own_files(db: Path, quarantine: Path) -> tuple[str, ...]:
    """Path prefixes of what the watch writes itself (the index and its WAL, the list and its
    temporary file), which may lie inside the watched folder."""
    index, listed = db.resolve(), quarantine.resolve()
    return str(index), str(listed), str(listed.parent / f".{listed.name}.")


def _changed(update: Update) -> bool:
    counts = update.changes or {}
    return bool(
        update.entered
        or update.left
        or any(counts.get(name) for name in ("added", "changed", "removed", "moved", "measured"))
    )


def _format(update: Update, watch: WatchOptions) -> str:
    return json.dumps(update.to_dict(), sort_keys=True) if watch.json_lines else update.line()


def _next_wait(due: float | None, next_walk: float, now: float) -> float:
    soonest = min(next_walk, due if due is not None else next_walk)
    return max(0.0, min(_CHECK_ROOT_EVERY, soonest - now))


class _Events:
    """watchfiles in a thread: sets a flag on every change that may concern an image file."""

    def __init__(self, root: Path, ignored: tuple[str, ...]) -> None:
        self.root = root
        self.ignored = ignored
        self.queue: queue.SimpleQueue[set[str]] = queue.SimpleQueue()
        self.thread: threading.Thread | None = None
        self.stop = threading.Event()

    def ensure_running(self) -> bool:
        """Start the thread when it is not running; True when it had to be (re)started."""
        if self.thread is None or not self.thread.is_alive():
            self.restart()
            return True
        return False

    def restart(self) -> None:
        self.close()
        self.stop = threading.Event()
        self.thread = threading.Thread(
            target=self._run, args=(self.stop,), name="datalint-watch", daemon=True
        )
        self.thread.start()

    def close(self) -> None:
        self.stop.set()
        if self.thread is not None:
            self.thread.join(timeout=5)
        self.thread = None

    def drain(self, timeout: float) -> set[str]:
        """The paths of the relevant changes that arrived within `timeout` seconds (empty: none)."""
        paths: set[str] = set()
        with contextlib.suppress(queue.Empty):
            paths |= self.queue.get(timeout=timeout) if timeout > 0 else self.queue.get_nowait()
            while True:
                paths |= self.queue.get_nowait()
        return paths

    def _run(self, stop: threading.Event) -> None:
        import watchfiles

        with contextlib.suppress(Exception):  # a vanished root ends the thread; the loop notices
            for changes in watchfiles.watch(
                self.root,
                watch_filter=self._relevant,
                debounce=200,
                step=50,
                stop_event=stop,
                rust_timeout=1000,
                yield_on_timeout=True,
                raise_interrupt=False,
            ):
                if changes:
                    self.queue.put({path for _, path in changes})

    def _relevant(self, change: Any, path: str) -> bool:
        # The index and the list may live inside the watched folder: their writes are no change.
        return not path.startswith(self.ignored) and not path.endswith(_QUIET_FILES)


# ----------------------------------------------------------------------------------------------
# Datasets


def watch_dataset(
    description: SourceDescription,
    options: api.ScanOptions,
    watch: WatchOptions,
    *,
    db: Path,
    quarantine: Path,
    log: Log,
    warn: Log,
    stop: threading.Event | None = None,
) -> None:
    """Poll a dataset spec's length and keys every `watch.poll` seconds and scan what changed."""
    stop = stop or threading.Event()
    scan_options = dataclasses.replace(options, vanished_fraction=watch.vanished_fraction, progress="none")
    lister = _Lister(quarantine)
    first = True
    while not stop.is_set():
        try:
            update = _update(description, scan_options, db, lister, _scan_in_fresh_interpreter)
        except api.SourceVanishedError as exc:
            warn(f"paused: {exc}")
        except _ChildFailed as exc:
            warn(f"this poll failed, the last list is kept: {exc}")
        else:
            if first or _changed(update):
                log(_format(update, watch))
            scan_options = dataclasses.replace(scan_options, rescan=False)  # --rescan: the first poll only
        first = False
        stop.wait(watch.poll)


class _ChildFailed(Exception):
    pass


def _scan_in_fresh_interpreter(
    description: SourceDescription, options: api.ScanOptions, db: Path, quarantine: Path
) -> dict[str, Any]:
    # A spawned child imports the dataset's module again: a module-level dataset built at import
    # time would otherwise never show its new records to a long-running watch.
    context = multiprocessing.get_context("spawn")
    receive, send = context.Pipe(duplex=False)
    child = context.Process(
        target=_child_scan, args=(description, options, db, quarantine, send), daemon=True
    )
    child.start()
    send.close()
    try:
        kind, payload = receive.recv()
    except EOFError:
        child.join()
        raise _ChildFailed(f"the scanning process died (exit code {child.exitcode})") from None
    except BaseException:  # Ctrl-C or SIGTERM: the child flushes what it measured and stops
        child.terminate()
        child.join()
        raise
    child.join()
    if kind == "vanished":
        raise api.SourceVanishedError(payload)
    if kind == "error":
        raise _ChildFailed(payload)
    result: dict[str, Any] = payload
    return result


def _child_scan(
    description: SourceDescription, options: api.ScanOptions, db: Path, quarantine: Path, send: Any
) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when to stop
    try:
        send.send(("ok", scan_once(description, options, db, quarantine).to_dict()))
    except api.SourceVanishedError as exc:
        send.send(("vanished", str(exc)))
    except Exception as exc:  # one poll's failure (the user's module raised): reported, watch goes on
        send.send(("error", f"{type(exc).__name__}: {exc}"))
