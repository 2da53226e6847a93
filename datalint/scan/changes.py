"""What changed since the index: the samples an incremental scan, and `datalint watch`, measure.

A sample's identity is its key (a file path, `datalint_key(i)`, an ImageFolder `samples` path); its
position is an attribute that moves when files are inserted before it. The current source is
loaded into a temporary table (key, position, and for files the stat: size, mtime_ns, inode,
ctime_ns, and with `verify_content` a sha256), and SQLite joins it with the index, so a million
samples cost one pass and no Python set of a million keys:

- added: a key no scan has measured (this also resumes an interrupted scan);
- changed: a file whose stat (or content hash) differs from the one recorded when it was measured;
  the ctime is compared too, as no write, and no `utime`, leaves it as it was;
- removed: a key the source no longer has; its row moves to `sample_history`;
- moved: a kept sample at another position (its row stays as it is: the stored order says where
  it is now; it is not measured);
- re-measured: samples a changed option can judge differently (`option_effects`).

Population findings are re-derived over the whole index afterwards by the caller, as after any scan.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import stat
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from datalint.index import changes as index
from datalint.index import positions, store

# The index's, under the names a scan calls them by (statements with nothing to decide around them).
from datalint.index.changes import compact as compact
from datalint.index.changes import drop_current as drop_current
from datalint.index.changes import record_added_files as record_added_files
from datalint.index.changes import record_files as record_files
from datalint.scan import summaries

_BATCH = 5000
_READ_PIECE = 1 << 20


@dataclass(frozen=True)
class FileState:
    """A file as the stat walk saw it; `content` only with `verify_content`."""

    size: int
    mtime_ns: int
    inode: int
    content: str | None = None
    ctime_ns: int | None = None


@dataclass(frozen=True)
class Changes:
    """What an incremental scan found different from its index, and which positions to measure."""

    added: int = 0
    changed: int = 0
    removed: int = 0
    moved: int = 0
    remeasured: int = 0
    todo: tuple[int, ...] = ()  # positions to measure, sorted
    deferred: int = 0  # changed files still being written (`settle`), left for a later scan
    reasons: tuple[str, ...] = ()  # why samples are re-measured for changed options

    @property
    def any(self) -> bool:
        return bool(self.todo or self.removed or self.moved or self.deferred)

    def ranges(self) -> list[range]:
        """`todo` as runs of consecutive positions, the shape the engine takes."""
        runs: list[range] = []
        start = previous = None
        for position in self.todo:
            if previous is not None and position == previous + 1:
                previous = position
                continue
            if start is not None and previous is not None:
                runs.append(range(start, previous + 1))
            start = previous = position
        if start is not None and previous is not None:
            runs.append(range(start, previous + 1))
        return runs

    def to_dict(self) -> dict[str, Any]:
        return {
            "added": self.added,
            "changed": self.changed,
            "removed": self.removed,
            "moved": self.moved,
            "remeasured": self.remeasured,
            "measured": len(self.todo),
            "deferred": self.deferred,
            "reasons": list(self.reasons),
        }

    def describe(self) -> str:
        """One line: `3 added, 1 changed, 2 removed, 40 moved; 4 measured`."""
        parts = [
            f"{count:,} {name}"
            for name, count in (
                ("added", self.added),
                ("changed", self.changed),
                ("removed", self.removed),
                ("moved", self.moved),
                ("re-measured for changed options", self.remeasured),
            )
            if count
        ]
        waiting = f", {self.deferred:,} still being written" if self.deferred else ""
        return f"{', '.join(parts) or 'nothing changed'}; {len(self.todo):,} measured{waiting}"


# ----------------------------------------------------------------------------------------------
# The stat walk


def file_state(path: Path, verify_content: bool = False) -> FileState | None:
    """The stat of the file a sample reads (symlinks followed), or None when it cannot be stat'ed."""
    try:
        info = os.stat(path)
    except (OSError, ValueError):  # ValueError: a NUL byte in a listed path
        return None
    content = content_hash(path) if verify_content and stat.S_ISREG(info.st_mode) else None
    return FileState(info.st_size, info.st_mtime_ns, info.st_ino, content, info.st_ctime_ns)


def content_hash(path: Path) -> str | None:
    """sha256 of the file's bytes, read in pieces (the scan's `info.sha256` is the same digest)."""
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as handle:
            while piece := handle.read(_READ_PIECE):
                digest.update(piece)
    except OSError:
        return None
    return digest.hexdigest()


def file_root(source: Any) -> Path | None:
    """The folder a source's keys are file paths in, or None when its keys are not files.

    Image sources name files relative to their root; a dataset keyed by ImageFolder-style
    `samples` / `imgs` names them as given (relative ones to the current directory).
    """
    if source.description.kind == "images":
        return Path(source.root)
    dataset = getattr(source, "dataset", None)
    if dataset is None or callable(getattr(dataset, "datalint_key", None)):
        return None
    from datalint.scan.images import dataset_file_paths

    return Path.cwd() if dataset_file_paths(dataset) is not None else None


def current_rows(
    keys: Iterable[str | None],
    root: Path | None,
    verify_content: bool = False,
    stat_only: frozenset[str] | None = None,
) -> Iterator[tuple[Any, ...]]:
    """(key, position, size, mtime_ns, inode, ctime_ns, content, stated) per sample, stat'ed when its key is
    a file.

    `stat_only`: the keys whose files are stat'ed (a watch update names the paths events touched);
    the others are left unstated (`stated` 0) and take the state recorded when they were measured
    (`take_recorded_states`). Plain strings and `os.stat`: this runs once per file of the dataset
    on every incremental scan. The key is as the index stores it (`store.stored_key`: a name that
    is not UTF-8 is its bytes).
    """
    if root is None:
        for position, key in enumerate(keys):
            yield store.stored_key(key), position, None, None, None, None, None, 1
        return
    base = os.fspath(root)
    if verify_content or stat_only is not None:
        for position, key in enumerate(keys):
            if key is None:
                yield key, position, None, None, None, None, None, 1
            elif stat_only is not None and key not in stat_only:
                yield store.stored_key(key), position, None, None, None, None, None, 0
            else:
                yield store.stored_key(key), position, *_stat_row(base, key, verify_content), 1
        return
    # The plain walk, the one every incremental scan of a folder makes: one string and one stat
    # per file, nothing else (a third of the time os.path.join and a helper per file cost).
    prefix, stat_file = os.path.join(base, ""), os.stat
    for position, key in enumerate(keys):
        if key is None:
            yield key, position, None, None, None, None, None, 1
            continue
        stored = key if key.isascii() else store.stored_key(key)
        try:
            info = stat_file(key if key.startswith(os.sep) else prefix + key)  # as os.path.join does
        except (OSError, ValueError):  # gone since the listing, a broken link, a NUL in a listed path
            yield stored, position, None, None, None, None, None, 1
            continue
        mtime = info.st_mtime_ns
        if mtime >= _INT64:  # past 2262: SQLite's integers end there
            mtime = as_int64(mtime)
        yield stored, position, info.st_size, mtime, info.st_ino, info.st_ctime_ns, None, 1


def _stat_row(base: str, key: str, verify_content: bool) -> tuple[Any, ...]:
    """(size, mtime_ns, inode, ctime_ns, content) of the file `key` names, all None when it cannot be
    stat'ed."""
    path = os.path.join(base, key)
    try:
        info = os.stat(path)
    except (OSError, ValueError):  # gone since the listing, a broken link, a NUL in a listed path
        return None, None, None, None, None
    content = content_hash(Path(path)) if verify_content and stat.S_ISREG(info.st_mode) else None
    return info.st_size, as_int64(info.st_mtime_ns), info.st_ino, info.st_ctime_ns, content


_INT64 = 1 << 63


def as_int64(nanoseconds: int) -> int:
    """A time in ns as a 64-bit integer SQLite can hold, wrapped: a file dated past 2262 (ext4 and
    XFS keep dates to 2446 and beyond) crashed the scan with an OverflowError. Only equality is
    compared, and two dates 584 years apart are the one case wrapping makes equal."""
    return nanoseconds if -_INT64 <= nanoseconds < _INT64 else (nanoseconds + _INT64) % (1 << 64) - _INT64


def take_recorded_states(db: Any, root: Path, verify_content: bool = False) -> int:
    """Give the unstated current samples the state recorded when they were measured, so only the
    stat'ed ones can differ; a file with no recorded state is stat'ed now. Returns how many were."""
    missing = index.take_recorded_states(db)
    base = os.fspath(root)
    states = ((*_stat_row(base, str(store.read_key(key)), verify_content), key) for key in missing)
    for batch in _batches(states):
        index.set_states(db, batch)
    return len(missing)


# ----------------------------------------------------------------------------------------------
# Loading the current source and comparing it with the index


def load_current(db: Any, rows: Iterable[tuple[Any, ...]]) -> str | None:
    """Fill the temporary table of current samples; returns why the keys cannot be followed, or None."""
    index.create_current(db)
    total = 0
    for batch in _batches(rows):  # one transaction per batch: the stat walk never holds the lock long
        if any(row[0] is None for row in batch):
            return "some samples have no key"
        index.add_current(db, batch)
        total += len(batch)
    kept = index.count_current(db)
    if kept != total:
        return f"{total - kept:,} key(s) name more than one sample"
    duplicated = index.duplicated_key(db)
    if duplicated is not None:
        return f"the index has several samples with key {duplicated!r}"
    if index.any_unkeyed(db):
        return "the index holds samples measured without keys"
    return None


def _batches(rows: Iterable[tuple[Any, ...]]) -> Iterator[list[tuple[Any, ...]]]:
    batch: list[tuple[Any, ...]] = []
    for row in rows:
        batch.append(row)
        if len(batch) >= _BATCH:
            yield batch
            batch = []
    if batch:
        yield batch


def compare(db: Any, *, files: bool, option_clauses: Iterable[tuple[str, list[Any]]] = ()) -> Changes:
    """The changes between the loaded current samples and the index (nothing is written)."""
    added = index.added(db)
    changed = index.changed(db) if files else []
    removed = index.removed_count(db)
    moved = index.moved_count(db)
    already = set(added) | set(changed)
    options: set[int] = set()
    for where, params in option_clauses:
        options.update(index.selected(db, where, params))
    options -= already
    return Changes(
        added=len(added),
        changed=len(changed),
        removed=removed,
        moved=moved,
        remeasured=len(options),
        todo=tuple(sorted(already | options)),
    )


def without_unsettled(db: Any, found: Changes, settle: float) -> Changes:
    """`found` without the files modified less than `settle` seconds ago: they are still being
    written, and wait for a later scan (an added one has no row meanwhile, a changed one keeps its
    old row and state, so the next scan measures it)."""
    cutoff = time.time_ns() - int(settle * 1e9)
    # By the ctime where known: the kernel's clock sets it, so a file whose mtime lies in the future
    # (a skewed clock, an archive's dates) is not held back for ever.
    written = "coalesce(ctime_ns, mtime_ns)"
    recent = index.written_after(db, written, cutoff)
    if not recent:
        return found
    todo = tuple(position for position in found.todo if position not in recent)
    return dataclasses.replace(found, todo=todo, deferred=len(found.todo) - len(todo))


# ----------------------------------------------------------------------------------------------
# Applying them to the index


def apply(db: Any, run_id: int) -> positions.Positions:
    """In one transaction: removed samples go to `sample_history`, and the current order is stored
    (kept rows stay as they are: a sample's row is known by its key, its position derived from the
    order); the index's population summary loses the removed rows with them. Returns the order, by
    which the rows measured next take their ids (`Positions.id_at`)."""
    return index.apply(db, run_id, summaries.take_away)


# ----------------------------------------------------------------------------------------------
# Options that changed since a sample was measured


Effect = Callable[[Any, Any], tuple[str, list[Any]] | None]


def _image_fact(name: str) -> str:
    """SQL for one fact of a row's image: at the top of its info (an image file, a Parquet value, a
    webdataset sample's first image member) or under `image`, where webdataset samples measured
    before their image facts became their info keep them."""
    return f"coalesce(json_extract(s.info, '$.{name}'), json_extract(s.info, '$.image.{name}'))"


def _pixels_effect(old: Any, new: Any) -> tuple[str, list[Any]]:
    # Only images whose pixel count lies above the lower of the two limits can change verdict.
    if old is None or new is None:
        return _EVERY_SAMPLE
    low = min(int(old), int(new))
    return (
        f"({_image_fact('width')} * {_image_fact('height')} > ? OR s.reported LIKE '%decompression_bomb%')",
        [low],
    )


def _timeout_effect(old: Any, new: Any) -> tuple[str, list[Any]]:
    # A timeout may pass under a longer limit; a sample slower than a shorter one now times out.
    if old is None or new is None:
        return _EVERY_SAMPLE
    return "(s.status = 'timeout' OR s.duration > ?)", [min(float(old), float(new))]


_EVERY_SAMPLE: tuple[str, list[Any]] = ("1", [])

# Option -> which samples a change of it can judge differently. Options absent here that change
# verdicts re-measure every sample; policy options (kinds, thresholds) are re-derived from the
# index after every scan and need no entry; listing options (`extensions`) show up as added and
# removed files.
OPTION_EFFECTS: dict[str, Effect] = {
    "max_pixels": _pixels_effect,
    "all_frames": lambda old, new: (f"COALESCE({_image_fact('frames')}, 1) > 1", []),
    "timeout": _timeout_effect,
    "labels": lambda old, new: _EVERY_SAMPLE,
    "extensions": lambda old, new: None,
}


def option_clauses(
    db: Any, asked: dict[str, Any], measured_with: Callable[[dict[str, Any]], dict[str, Any]]
) -> tuple[list[tuple[str, list[Any]]], list[str]]:
    """Per run that measured rows of the index: the clauses selecting the rows its options affect.

    Comparing each run's options (not only the last run's) means a scan stopped halfway after an
    option changed still re-measures the rest next time.
    """
    clauses: list[tuple[str, list[Any]]] = []
    reasons: list[str] = []
    for run_id, text in index.measured_runs(db):
        before = measured_with(json.loads(text or "{}"))
        for name in sorted(set(before) | set(asked)):
            old, new = before.get(name), asked.get(name)
            if old == new:
                continue
            effect = OPTION_EFFECTS.get(name, lambda old, new: _EVERY_SAMPLE)(old, new)
            if effect is None:
                continue
            where, params = effect
            clauses.append((f"s.run_id = ? AND {where}", [run_id, *params]))
            reasons.append(f"{name} {_shown(old)} -> {_shown(new)}")
    return clauses, sorted(set(reasons))


def _shown(value: Any) -> str:
    if isinstance(value, list):
        return ",".join(map(str, value)) or "(none)"
    return "(none)" if value is None else str(value)
