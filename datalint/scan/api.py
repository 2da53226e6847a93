"""`datalint.scan()`: spec -> isolated workers -> SQLite rows -> findings -> quarantine.json.

    summary = datalint.scan("mymod:ds", timeout=30, label=["target"], num_classes=10)
    summary.quarantined, summary.index_path, summary.quarantine_path

The CLI (`datalint scan`) is a thin face over `scan_source()`; both return a `ScanSummary`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import itertools
import json
import os
import platform
import re
import signal
import stat as stat_module
import threading
import time
from collections.abc import Generator, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from datalint.errors import DatalintError, UsageError
from datalint.extras import require as require_extra
from datalint.files import Content, json_parts, write_atomically
from datalint.host.cpus import effective_cpu_count
from datalint.host.memory import memory_left_now
from datalint.index import binary_list, failures, positions, read, store
from datalint.index.quarantine import FORMAT as LIST_FORMAT
from datalint.scan import changes as changes_
from datalint.scan import dask_backend, policy, preflight, runner, shard_writers, summaries, summary_findings
from datalint.scan.dataset_readers import adopt_dataset
from datalint.scan.policy import PolicyOptions, QuarantineEntry
from datalint.scan.progress import Progress
from datalint.scan.shards import shard_starts_of
from datalint.scan.sources import (
    SourceDescription,
    build_source,
    fingerprint,
    forget_source,
    is_built,
)

DEFAULT_INDEX_DIR = Path(".datalint")
WORST_SHOWN = 10


class SourceVanishedError(DatalintError):
    """An incremental scan would remove most samples and add none: a lost mount, not a change."""


@dataclass(frozen=True)
class ScanOptions:
    """Everything a scan needs besides the source, read once at the edge (CLI or API)."""

    workers: int | None = None  # None: the effective CPU count; 0: in-process, isolates nothing
    timeout: float = 60.0
    labels: tuple[str, ...] = ()
    policy: PolicyOptions = field(default_factory=PolicyOptions)
    rescan: bool = False
    incremental: bool = True  # an index of the same source: measure only what changed (docs/scan.md)
    verify_content: bool = False  # also hash stat-unchanged files (bytes no stat field shows changed)
    settle: float = 0.0  # a file written less than this many seconds ago waits for a later scan
    # Keys whose files an incremental scan stats; the others keep their recorded state (a watch
    # update after events, which named every path that changed). None: stat every file.
    stat_only: frozenset[str] | None = None
    vanished_fraction: float | None = None  # refuse to remove more than this share of the samples at once
    chunk_size: int | None = None
    progress: str = "none"
    progress_interval: float = 30.0
    backend: str = "local"  # "dask": shards on a dask cluster (docs/distributed.md)
    setup_timeout: float = preflight.DEFAULT_SETUP_TIMEOUT  # building the dataset, len(), the keys
    scheduler: str | None = None  # dask scheduler address; None: a LocalCluster of `workers` processes
    shard_index: str = "auto"  # per-shard index files written by the workers: auto|on|off (shard_writers)

    def __post_init__(self) -> None:
        dask_backend.check_options(self.backend, self.scheduler, self.workers)

    def worker_count(self) -> int:
        if self.workers is None and self.scheduler is not None:
            return 1  # an existing cluster: wait for at least one of its workers
        return effective_cpu_count() if self.workers is None else max(0, self.workers)


@dataclass(frozen=True)
class ScanSummary:
    """What a scan found, where it wrote it, and how long it took."""

    dataset: str
    length: int | None
    index_path: str
    quarantine_path: str
    statuses: dict[str, int]  # the engine's outcome per sample: ok (it loaded), error, crash, timeout
    findings: dict[str, int]  # kind -> samples with that finding
    quarantined: int
    policy: tuple[str, ...]
    worst: tuple[QuarantineEntry, ...]  # the worst quarantined samples, worst first
    scanned: int  # samples measured by this call
    resumed: int  # samples already in the index before it
    elapsed: float
    workers: int
    notes: tuple[str, ...] = ()
    # What the headline counts: damaged and undecodable files are not "ok" although they loaded.
    outcomes: dict[str, int] = field(default_factory=dict)
    changes: dict[str, Any] | None = None  # what an incremental scan found changed since the index
    # A stream's own __len__ where it differs from what iterating it yielded (None: no such stream).
    declared_length: int | None = None
    capped: int | None = None  # --limit N: the stream was stopped after N samples

    @property
    def exit_code(self) -> int:
        """1 when the list holds samples, or when a stream yields another count than its __len__
        says (each is something to fix before training); else 0."""
        return 1 if self.quarantined or self.declared_length is not None else 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "dataset": self.dataset,
            "length": self.length,
            "index": self.index_path,
            "quarantine": self.quarantine_path,
            "outcomes": self.outcomes or dict(self.statuses),
            "statuses": self.statuses,
            "findings": self.findings,
            "quarantined": self.quarantined,
            "policy": list(self.policy),
            "worst": [entry.to_dict() for entry in self.worst],
            "scanned": self.scanned,
            "resumed": self.resumed,
            "elapsed": round(self.elapsed, 3),
            "workers": self.workers,
            "notes": list(self.notes),
            "changes": self.changes,
            "declared_length": self.declared_length,
            "capped": self.capped,
        }


def scan(
    dataset: Any,
    *,
    db: str | os.PathLike[str] | None = None,
    quarantine: str | os.PathLike[str] | None = None,
    config: str | os.PathLike[str] | bool = False,
    kinds: str | Sequence[str] | None = None,
    timeout: float | None = None,
    setup_timeout: float | None = None,
    workers: int | None = None,
    max_bytes: int | str | None = None,
    max_pixels: int | None = None,
    num_classes: int | None = None,
    ignore_index: int | None = None,
    require: str | Sequence[str] | None = None,
    label: str | Sequence[str] | None = None,
    ext: str | Sequence[str] | None = None,
    all_frames: bool | None = None,
    scores: bool | None = None,
    verify_content: bool | None = None,
    incremental: bool | None = None,
    thresholds: Mapping[str, float] | None = None,
    against: str | os.PathLike[str] | None = None,
    rescan: bool = False,
    progress: str = "none",
    backend: str = "local",
    scheduler: str | None = None,
    shard_index: str = "auto",
    limit: int | None = None,
) -> ScanSummary:
    """Scan every sample of a dataset (a spec string such as "mymod:ds", a dataset object, or a
    source description such as `images_description(folder=...)`) in isolated workers; write the
    index and the quarantine list; return the summary.

    The settings between `kinds` and `thresholds` are the keys of `[tool.datalint.scan]` (with `_`
    for `-`), checked as the file's are; None is "not given": the file's value with `config`, else
    the default (`datalint docs config`). `config=True` reads the nearest configuration above the
    current directory, as `datalint scan` does, `config=PATH` that file; by default none is read.
    `ext`, `max_pixels`, `all_frames` and `scores` apply to image files (an image folder, webdataset
    shards, Parquet images) and replace the description's own values when given.

    With an index of the same source, only what changed since is measured (`incremental=False`
    refuses a changed dataset instead); `summary.changes` says what changed. `limit=N` stops a
    stream (an IterableDataset) after N samples, `summary.capped` says so. A setting neither a
    keyword nor the file gives is the one the index's last scan of this dataset ran with (its
    `runs.options`), then the default; `rescan=True` starts over from the defaults."""
    from datalint.scan import settings as settings_

    keywords = {
        "kinds": kinds, "timeout": timeout, "setup_timeout": setup_timeout, "workers": workers,
        "max_bytes": max_bytes, "max_pixels": max_pixels, "num_classes": num_classes,
        "ignore_index": ignore_index, "require": require, "label": label, "ext": ext,
        "all_frames": all_frames, "scores": scores, "verify_content": verify_content,
        "incremental": incremental,
    }  # fmt: skip
    first = _description_of(dataset, ())  # its kind and spec name the index, whatever the labels
    index = db if db is not None else default_index_path(first.spec, first.kind)
    stored = None if rescan else settings_.stored_layer(index, (first.kind, first.spec))
    chosen = settings_.keyword_settings(keywords, thresholds, config, stored=stored)
    options = options_from_settings(
        chosen.values,
        chosen.thresholds,
        against=_against_index(against),
        rescan=rescan,
        progress=progress,
        backend=backend,
        scheduler=scheduler,
        shard_index=shard_index,
    )
    same = first.option("labels", ()) == options.labels
    source = first if same else _description_of(dataset, options.labels)
    description = _with_limit(_with_image_settings(source, chosen.values, chosen.origins), limit)
    summary = scan_source(description, options, db=db, quarantine=quarantine)
    notes = [settings_.from_file_note(chosen, hint=""), settings_.from_index_note(chosen)]
    said = tuple(note for note in notes if note is not None)
    return dataclasses.replace(summary, notes=(*said, *summary.notes)) if said else summary


def options_from_settings(
    values: Mapping[str, Any],
    thresholds: tuple[tuple[str, float], ...],
    *,
    against: str | None = None,
    **engine: Any,
) -> ScanOptions:
    """The ScanOptions of the effective `[tool.datalint.scan]` settings (`ScanSettings.values`: key ->
    value) and limits; `engine` holds the rest (rescan, progress, backend, ...). `datalint.scan()` and
    the `scan` and `watch` commands all build their options here."""
    timeout = values["timeout"]
    return ScanOptions(
        workers=values["workers"],
        timeout=timeout,
        setup_timeout=values["setup-timeout"],
        labels=tuple(values["label"]),
        policy=PolicyOptions(
            kinds=policy.parse_kinds(values["kinds"]),
            timeout=timeout,
            num_classes=values["num-classes"],
            ignore_index=values["ignore-index"],
            require=tuple(values["require"]),
            max_bytes=values["max-bytes"],
            thresholds=thresholds,
            against=against,
        ),
        incremental=values["incremental"],
        verify_content=values["verify-content"],
        **engine,
    )


def _description_of(dataset: Any, labels: tuple[str, ...]) -> SourceDescription:
    if isinstance(dataset, SourceDescription):
        return dataset
    if isinstance(dataset, str):
        return SourceDescription.make("dataset", dataset, labels=labels)
    return adopt_dataset(dataset, labels)


# The image settings and the description option each sets, by the source kinds that read it.
_IMAGE_SETTINGS: dict[str, tuple[str, frozenset[str]]] = {
    "max-pixels": ("max_pixels", frozenset({"images", "webdataset", "parquet"})),
    "all-frames": ("all_frames", frozenset({"images", "webdataset", "parquet"})),
    "scores": ("scores", frozenset({"images", "dataset"})),  # a dataset's first image-like tensor
    "ext": ("extensions", frozenset({"images"})),
}


def _with_image_settings(
    description: SourceDescription, values: Mapping[str, Any], origins: Mapping[str, str]
) -> SourceDescription:
    """The description with the image settings a keyword or the file gave (`datalint scan --images
    DIR --ext png`); of them a dataset takes only `scores` (its samples are not image files)."""
    from datalint.scan.settings import DEFAULT

    options = dict(description.options)
    for name, (option, kinds) in _IMAGE_SETTINGS.items():
        if origins[name] == DEFAULT or description.kind not in kinds:
            continue
        if description.kind == "dataset" and values[name] is True:
            continue  # scoring is a dataset's default: its description (and the index's) stays as it was
        if option != "extensions":
            options[option] = values[name]
        elif "extensions" in options:  # not for a file list or a dataset's files: each named file is scanned
            from datalint.scan.images import normalize_extensions

            options[option] = normalize_extensions(values[name])
    if options == dict(description.options):
        return description
    return SourceDescription.make(description.kind, description.spec, **options)


def _with_limit(description: SourceDescription, limit: int | None) -> SourceDescription:
    """The description of a dataset whose stream stops after `limit` samples (None: all of it)."""
    if limit is None:
        return description
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise UsageError(f"datalint.scan(): limit must be a whole number of 1 or more, got {limit!r}")
    if description.kind != "dataset":
        raise UsageError(f"limit caps a dataset's stream (an IterableDataset), not {description.kind} files")
    options = {**dict(description.options), "limit": limit}
    return SourceDescription.make(description.kind, description.spec, **options)


def _against_index(path: str | os.PathLike[str] | None) -> str | None:
    """The other split's index as an absolute path (stored with the run), checked to exist."""
    if path is None:
        return None
    if not Path(path).is_file():
        raise UsageError(f"against={str(path)!r}: no scan index there; scan the other split first")
    return str(Path(path).resolve())


def default_index_path(spec: str, kind: str = "dataset") -> Path:
    """`.datalint/<spec slug>.db`: one index per dataset, so rerunning the same command resumes it.

    Other source kinds (image files, also those behind a dataset) get their own index beside it.
    """
    named = spec if kind == "dataset" else f"{kind}-{spec}"
    slug = re.sub(r"[^A-Za-z0-9]+", "-", named).strip("-")[-80:] or "scan"
    return DEFAULT_INDEX_DIR / f"{slug}.db"


def default_quarantine_path(index_path: Path) -> Path:
    return index_path.with_name(index_path.stem + ".quarantine.json")


def scan_source(
    description: SourceDescription,
    options: ScanOptions,
    *,
    db: str | os.PathLike[str] | None = None,
    quarantine: str | os.PathLike[str] | None = None,
) -> ScanSummary:
    """Scan any registered source kind (datasets, image files) into an index and a quarantine list."""
    require_extra("scan", "datalint.scan()")  # the index, the decoders: named before any work
    shard_writers.check_mode(options.shard_index, description, options.worker_count())
    started = time.monotonic()
    # The dataset's own code runs in a watched child first: this process builds it only once that
    # is known to finish (docs/scan.md, "What a scan survives").
    facts = (
        preflight.inspect_source(description, options.setup_timeout)
        if options.setup_timeout > 0
        and preflight.runs_user_code(description)
        and _not_yet_proven(description)
        else None
    )
    source = build_source(description)
    stream = bool(getattr(source, "is_stream", False))
    if options.backend == "dask":
        dask_backend.check_source(description, stream)
    length = None if stream else len(source)
    print_ = facts.fingerprint if facts is not None else fingerprint(source)
    index_path = Path(db) if db is not None else default_index_path(description.spec, description.kind)
    quarantine_path = Path(quarantine) if quarantine is not None else default_quarantine_path(index_path)
    check_output_path(quarantine_path, "--quarantine")
    index = store.open_index(index_path)
    kept = lambda: _kept_rows(index_path)  # noqa: E731
    try:
        with contextlib.closing(index), store.index_errors(index_path, kept), store.scan_lock(index_path):
            return _scan_locked(
                index, index_path, quarantine_path, description, source, options, length, print_, stream,
                started,
            )
    finally:
        forget_source(description)  # a later scan in this process (watch, the API) sees the files anew


def _scan_locked(
    index: Any,
    index_path: Path,
    quarantine_path: Path,
    description: SourceDescription,
    source: Any,
    options: ScanOptions,
    length: int | None,
    print_: str | None,
    stream: bool,
    started: float,
) -> ScanSummary:
    """The scan proper, once this process holds the index's lock: plan, measure, judge, write the list."""
    workers = options.worker_count()
    # Shard files a killed scan left are merged first: their samples count as measured.
    recovered = shard_writers.recover(index_path, rescan=options.rescan)
    plan = _plan_changes(index, description, source, options, length, print_, stream, workers)
    todo, resumed = plan.todo, plan.resumed
    notes: list[str] = list(plan.notes)
    if recovered.files:
        notes.append(
            f"resumed: merged {recovered.samples:,} sample(s) from {recovered.files} shard file(s) an "
            "interrupted scan had finished"
        )
    if workers == 0:
        notes.append("--workers 0: samples ran in this process; nothing isolated, no timeout enforced")
    listed = getattr(source, "listing_notes", None)  # what a source's listing folded or left out
    if listed is not None:
        notes.extend(listed())
    scanned = 0
    if todo is not None:
        try:
            scanned, length, _merged = _measure(
                index, description, source, options, todo, length, print_, resumed, workers, plan.run_id,
                plan.order,
            )
        finally:
            _record_files(index, plan)
        if plan.follow is not None:  # the kept summary covers the index again, at the cost of the changes
            with store.transaction(index):
                summaries.finish_following(index.conn, plan.follow)
    changes_.drop_current(index)
    _settle_failures(index, length)
    kept = lambda: _kept_rows(index_path)  # noqa: E731
    with store.reading_index(index_path, kept):  # the policy reads what the index holds, as it is
        peers, warnings, findings = _judged(index, options.policy, workers)
    store.write_findings(index, (f.to_row() for f in findings))
    run = store.latest_run(index)
    if run is not None and run.finished is not None:  # nothing measured: the findings are re-judged
        _record_policy(index, run, options.policy)
    entries = _write_quarantine(
        index, findings, options.policy.kinds, description.spec, length, print_, quarantine_path
    )
    counts = _counts(index, findings)
    declared, capped, said = stream_length(source, length) if stream else (None, None, ())
    notes.extend(said)
    elapsed = time.monotonic() - started
    if run is not None and run.finished is None:
        # The whole command's time, as the summary line says it; the report shows the same figure
        # (started..finished covers only the measuring and the policy).
        store.finish_run(index, run.id, {**counts, "elapsed": round(elapsed, 3)}, length=length)
    return ScanSummary(
        dataset=description.spec,
        length=length,
        index_path=str(index_path),
        quarantine_path=str(quarantine_path),
        statuses={k: v for k, v in counts.items() if k != "findings"},
        findings=counts["findings"],
        quarantined=len(entries),
        policy=options.policy.kinds,
        worst=_worst(entries),
        scanned=scanned,
        resumed=resumed,
        elapsed=elapsed,
        workers=workers,
        notes=tuple(notes)
        + policy.absent_field_notes(index, peers, options.policy)
        + policy.dataset_notes(peers)
        + warnings,
        outcomes=outcome_counts(
            {k: v for k, v in counts.items() if k != "findings"},
            findings,
            files=description.kind == "images",
        ),
        changes=plan.changes.to_dict() if plan.changes is not None else None,
        declared_length=declared,
        capped=capped,
    )


def stream_length(source: Any, yielded: int | None) -> tuple[int | None, int | None, tuple[str, ...]]:
    """(the stream's __len__ where it disagrees with what it yielded, the --limit that stopped it,
    the summary's notes on either). A capped stream's length is not compared: it was not read whole."""
    limit, declared = getattr(source, "limit", None), getattr(source, "declared_length", None)
    if yielded is None:
        return None, None, ()
    if limit is not None and yielded >= limit:
        return None, limit, (
            f"capped: --limit {limit:,} stopped the stream after {limit:,} samples; it may hold more, and "
            "the index and the list cover only those",
        )
    if declared is not None and declared != yielded:
        return declared, None, (
            f"length: the dataset's __len__ says {declared:,} but iterating it yielded {yielded:,} "
            f"sample(s): len(loader), progress bars and learning-rate schedules count {declared:,}; make "
            "__len__ return what iteration yields (per worker shard too), or drop it",
        )
    return None, None, ()


def _judged(
    index: Any, options: PolicyOptions, workers: int = 0
) -> tuple[policy.Population, tuple[str, ...], list[policy.Finding]]:
    """(population, population warnings, findings): from the summary the index keeps while it
    covers every row (a sharded scan, resumed or not, or an incremental one since), judged part by
    part in `workers` processes (one part after the other for 0 or 1); from the index else."""
    for kept in _summaries_to_judge_by(index):
        try:
            limits, findings = summary_findings.findings(index, kept, options, workers=workers)
            return limits.peers, policy.limit_warnings(limits.quality_limits, options), findings
        except summaries.SummaryMismatch:  # rows of other scans, or changed since: read them,
            if not kept.overflow:  # and no later merge adds to a summary of other rows
                summaries.forget_summary(index.conn)
    peers = policy.population(index)
    # Before the findings: both read every image's scores, and the second read is free only
    # while nothing has written to the index (the findings update the stored image groups).
    warnings = policy.population_warnings(index, options)
    return peers, warnings, policy.derive_findings(index, options, peers, keep_groups=True)


def _settle_failures(index: Any, length: int | None) -> None:
    """Training failures follow their keys; those whose changed sample measured ok end (the rest stay
    listed, whatever the scan measured: docs/service.md, "Acknowledged means kept")."""
    run = store.latest_run(index)
    if run is None or not failures.active(index):
        return
    complete = length is not None and store.count_samples(index, scanned_only=True) >= length
    with store.transaction(index):
        failures.settle(index.conn, run.id, store.utc_now(), complete=complete)


# Judged whole, an index costs the scanner about this much memory a row: every image's scores and
# hashes are Python objects (~1.4 GB a million rows; from the summary ~0.2 GB: docs/distributed.md).
WHOLE_INDEX_BYTES_PER_ROW = 1500
# Up to this many rows an index without a summary is always judged whole (it is faster there);
# past it, only while that fits in a quarter of the memory left to this process.
JUDGED_BY_SUMMARY_FROM = shard_writers.AUTO_FROM_SAMPLES


def _summaries_to_judge_by(index: Any, *, keep: bool = True) -> Iterator[summaries.PopulationSummary]:
    """The summary the index keeps; then, for an index too large to judge whole whose summary is
    missing or was found stale, one counted from its rows now (one read of the index): kept for
    later scans, which an incremental scan keeps current, or (`keep` False: `datalint quarantine`,
    which writes nothing) held in memory for this judgement only."""
    kept = summaries.read_summary(index.conn)
    if kept is not None:
        yield kept
        if kept.overflow:  # too many distinct values to summarise: a count of the rows would drop them too
            return
    if _too_large_to_judge_whole(store.count_samples(index)):
        yield summaries.recount(index.conn) if keep else summaries.summarize(index.conn)


def _too_large_to_judge_whole(rows: int) -> bool:
    if rows < JUDGED_BY_SUMMARY_FROM:
        return False
    left = memory_left_now()
    return left is None or rows * WHOLE_INDEX_BYTES_PER_ROW > left // 4


def _findings_of(index: Any, options: PolicyOptions, workers: int = 0) -> list[policy.Finding]:
    """The findings under `options`, from the summary the index keeps while it covers every row
    (its parts judged in `workers` processes); for an index too large to judge whole without one,
    from a summary counted now (in memory: nothing is written to the index); from the index else."""
    for summary in _summaries_to_judge_by(index, keep=False):
        with contextlib.suppress(summaries.SummaryMismatch):
            return summary_findings.findings(index, summary, options, workers=workers)[1]
    return policy.derive_findings(index, options)


def _kept_rows(index_path: Path) -> str:
    """After a failed write: what the index still holds, read through a fresh connection."""
    with contextlib.closing(read.connect(index_path)) as db:
        rows = store.count_samples(db)
    return (
        f"The index holds {rows:,} complete sample row(s), all it had before the error; fix the cause "
        "and run the same command again to resume"
    )


# ----------------------------------------------------------------------------------------------
# Steps


def _not_yet_proven(description: SourceDescription) -> bool:
    # A source this process built already needs no second check (the CLI's image listing ran it
    # first; a dataset object handed to the API was built by the caller, its len() already read),
    # unless its keys are the dataset's own code (`datalint_key`): they are read next, for the
    # fingerprint.
    if not is_built(description):
        return True
    dataset = getattr(build_source(description), "dataset", None)
    return description.option("object_id") is not None and callable(getattr(dataset, "datalint_key", None))


def _plan(
    index: Any,
    description: SourceDescription,
    options: ScanOptions,
    length: int | None,
    print_: str | None,
    stream: bool,
) -> tuple[list[range] | None, int]:
    """(ranges still to measure, or None when the index is complete; samples already measured)."""
    previous = store.latest_run(index)
    measured = store.count_samples(index, scanned_only=True)
    full = [range(0, length)] if length is not None else []
    if options.rescan:
        store.clear_samples(index)
        return full, 0
    changes_.compact(index)  # a scan resumed by position finds each row at its position
    if previous is None or measured == 0:
        return full, 0  # rows the training guard wrote are replaced as their samples are measured
    _check_same_dataset(index, previous, description, options, length, print_)
    if stream:
        if previous.finished is not None:
            return None, measured
        store.clear_samples(index)  # a stream cannot be resumed in the middle: read it again
        return full, 0
    assert length is not None
    gaps = store.missing_ranges(index, length)
    if not gaps:
        return None, measured
    return gaps, length - sum(len(gap) for gap in gaps)


def _check_same_dataset(
    index: Any,
    previous: store.RunRecord,
    description: SourceDescription,
    options: ScanOptions,
    length: int | None,
    print_: str | None,
) -> None:
    path = store.index_path(index)
    if previous.spec != description.spec or (length is not None and previous.length != length):
        raise UsageError(
            f"the index {path} holds a scan of {previous.spec} ({previous.length} samples), not of "
            f"{description.spec} ({length} samples): pass --rescan to start over, or --db for another index"
        )
    if previous.fingerprint != print_:
        raise UsageError(
            f"the index {path} was made from different samples of {description.spec} (its keys changed): "
            "pass --rescan to scan it again"
        )
    recorded = previous.options
    measured_with = _verdict_options(recorded.get("source"), recorded.get("source_options", {}))
    asked_with = _verdict_options(description.kind, dict(description.options))
    if measured_with != asked_with:
        raise UsageError(
            f"the index {path} was measured with {_describe(measured_with)}; this scan asks for "
            f"{_describe(asked_with)}: pass --rescan to measure again with the new options, or --db for "
            "another index"
        )
    measured_labels = tuple(previous.options.get("labels", ()))
    if measured_labels != options.labels:
        raise UsageError(
            f"the index {path} measured --label {', '.join(measured_labels) or '(none)'}; this scan asks for "
            f"{', '.join(options.labels) or '(none)'}: pass --rescan to measure the new label fields"
        )


# Source options that do not change a sample's verdict: where the process ran, which object it was
# handed, and the label fields (compared on their own, with their own message).
_VERDICT_NEUTRAL_OPTIONS = frozenset({"root", "object_id", "labels", "file_list", "files"})


def _verdict_options(kind: Any, source_options: dict[str, Any]) -> dict[str, Any]:
    """The source kind and the options that decide verdicts, JSON-normalised (tuples become lists)."""
    kept = {k: v for k, v in source_options.items() if k not in _VERDICT_NEUTRAL_OPTIONS}
    return json.loads(json.dumps({"source": kind or "dataset", **kept}, sort_keys=True, default=str))


def _describe(options: dict[str, Any]) -> str:
    return ", ".join(f"{name}={value}" for name, value in options.items())


# ----------------------------------------------------------------------------------------------
# Incremental scans: what changed since the index (datalint/scan/changes.py does the comparing)


@dataclass(frozen=True)
class _Plan:
    """What a scan will measure: `todo` None when nothing; `run_id` when the run is already started."""

    todo: list[range] | None
    resumed: int
    run_id: int | None = None
    changes: changes_.Changes | None = None
    notes: tuple[str, ...] = ()
    files: bool = False  # the current samples (with file states) are loaded for `_record_files`
    follow: summaries.Followed | None = None  # the kept summary, less the rows measured again
    order: positions.Positions = positions.IDENTITY  # the row id of the sample at each position


def _plan_changes(
    index: Any,
    description: SourceDescription,
    source: Any,
    options: ScanOptions,
    length: int | None,
    print_: str | None,
    stream: bool,
    workers: int,
) -> _Plan:
    """The plan of a scan: incremental when an index of this source exists, else as before."""
    previous = store.latest_run(index)
    measured = 0 if previous is None else store.count_samples(index, scanned_only=True)
    if stream or options.rescan or not options.incremental or previous is None or measured == 0:
        todo, resumed = _plan(index, description, options, length, print_, stream)
        files = todo is not None and _load_current(index, source, options, print_)
        return _Plan(todo, resumed, files=files)
    assert length is not None
    _check_same_spec(index, previous, description, length)
    emptied = length == 0 and previous.fingerprint is not None  # no keys left to name: every one removed
    if print_ is None and not emptied:
        return _plan_unkeyed(index, description, source, options, previous, print_)
    root = changes_.file_root(source)
    stat_only = options.stat_only if root is not None and not options.verify_content else None
    reason = changes_.load_current(index, _current_rows(source, options, stat_only))
    if reason is not None:
        return _full_again(index, source, options, print_, f"{reason}, so changes cannot be followed by key")
    if stat_only is not None and root is not None:
        changes_.take_recorded_states(index, root)
    clauses, reasons = _option_clauses(index, description, options)
    found = changes_.compare(index, files=changes_.file_root(source) is not None, option_clauses=clauses)
    found = dataclasses.replace(found, reasons=tuple(reasons))
    _check_not_vanished(index, description, options, found, measured)
    if options.settle > 0:
        found = changes_.without_unsettled(index, found, options.settle)
    if not found.any:
        return _Plan(None, measured, changes=found, notes=(f"incremental: {found.describe()}",))
    run_id = _start_run(index, description, options, length, print_, workers, found)
    order = changes_.apply(index, run_id)
    # A scan killed from here on resumes without measuring the added files twice.
    changes_.record_added_files(index, found.todo)
    todo = found.ranges()
    return _Plan(
        todo or None,
        length - len(found.todo),
        run_id=run_id,
        changes=found,
        notes=(f"incremental: {found.describe()}",),
        files=True,
        follow=summaries.follow_changes(index.conn, _rows_at(order, found.todo)),
        order=order,
    )


def _rows_at(order: positions.Positions, todo: Iterable[int]) -> list[int]:
    """The row ids of the samples at these positions."""
    return [row for position in todo if (row := order.id_at(position)) is not None]


_VANISHED_AT_LEAST = 10


def _check_not_vanished(
    index: Any, description: SourceDescription, options: ScanOptions, found: changes_.Changes, measured: int
) -> None:
    if options.vanished_fraction is None or found.added or not found.removed:
        return
    # A handful of files gone from a small folder is a change; most of a folder, or all of it, is not.
    many = found.removed >= _VANISHED_AT_LEAST or found.removed == measured
    if many and found.removed >= options.vanished_fraction * measured:
        raise SourceVanishedError(
            f"{description.spec}: {found.removed:,} of the {measured:,} indexed samples are gone and none "
            f"were added (a lost mount?); the index {store.index_path(index)} and its list are kept as they "
            "were (run `datalint scan` once to accept the removal)"
        )


def _plan_unkeyed(
    index: Any,
    description: SourceDescription,
    source: Any,
    options: ScanOptions,
    previous: store.RunRecord,
    print_: str | None,
) -> _Plan:
    """A dataset that names no samples: the same length and options resume; anything else rescans."""
    same_options = _measured_with(previous.options) == _asked_with(description, options)
    if previous.length == len(source) and previous.fingerprint is None and same_options:
        todo, resumed = _plan(index, description, options, len(source), print_, False)
        return _Plan(todo, resumed)
    return _full_again(
        index,
        source,
        options,
        print_,
        f"{description.spec} names no samples (no datalint_key(i), samples or imgs), so changes cannot be "
        "followed",
    )


def _full_again(index: Any, source: Any, options: ScanOptions, print_: str | None, why: str) -> _Plan:
    """A source whose changes cannot be followed: say so once, and measure everything again."""
    store.clear_samples(index)
    files = _load_current(index, source, options, print_)
    return _Plan([range(0, len(source))], 0, notes=(f"{why}: measuring every sample again",), files=files)


def _check_same_spec(
    index: Any, previous: store.RunRecord, description: SourceDescription, length: int
) -> None:
    if previous.spec != description.spec or previous.kind != description.kind:
        path = store.index_path(index)
        raise UsageError(
            f"the index {path} holds a scan of {previous.spec} ({previous.length} samples), not of "
            f"{description.spec} ({length} samples): pass --rescan to start over, or --db for another index"
        )


def _current_rows(
    source: Any, options: ScanOptions, stat_only: frozenset[str] | None = None
) -> Iterator[tuple[Any, ...]]:
    keys = (source.key(position) for position in range(len(source)))
    return changes_.current_rows(keys, changes_.file_root(source), options.verify_content, stat_only)


def _load_current(index: Any, source: Any, options: ScanOptions, print_: str | None) -> bool:
    """Load the current samples before a full or resumed scan, so their file states are recorded."""
    if print_ is None or changes_.file_root(source) is None:
        return False
    if changes_.load_current(index, _current_rows(source, options)) is not None:
        changes_.drop_current(index)
        return False
    changes_.record_added_files(index)
    return True


def _record_files(index: Any, plan: _Plan) -> None:
    run = store.latest_run(index)
    if plan.files and run is not None:
        changes_.record_files(index, run.id)


def _option_clauses(
    index: Any, description: SourceDescription, options: ScanOptions
) -> tuple[list[tuple[str, list[Any]]], list[str]]:
    return changes_.option_clauses(index, _asked_with(description, options), _measured_with)


def _measured_with(run_options: dict[str, Any]) -> dict[str, Any]:
    """The options a run measured with that can decide a verdict (see changes.OPTION_EFFECTS)."""
    verdict = _verdict_options(run_options.get("source"), run_options.get("source_options", {}))
    return {**verdict, "labels": list(run_options.get("labels", ())), "timeout": run_options.get("timeout")}


def _asked_with(description: SourceDescription, options: ScanOptions) -> dict[str, Any]:
    return _measured_with(
        {
            "source": description.kind,
            "source_options": dict(description.options),
            "labels": list(options.labels),
            "timeout": options.timeout,
        }
    )


def _start_run(
    index: Any,
    description: SourceDescription,
    options: ScanOptions,
    length: int | None,
    print_: str | None,
    workers: int,
    found: changes_.Changes | None = None,
) -> int:
    run_options = _run_options(description, options, workers)
    if found is not None:
        run_options["changes"] = found.to_dict()
    return store.start_run(
        index,
        kind=description.kind,
        spec=description.spec,
        length=length,
        fingerprint=print_,
        options=run_options,
        environment=_environment(),
    )


def _measure(
    index: Any,
    description: SourceDescription,
    source: Any,
    options: ScanOptions,
    todo: list[range],
    length: int | None,
    print_: str | None,
    resumed: int,
    workers: int,
    run_id: int | None = None,
    order: positions.Positions = positions.IDENTITY,
) -> tuple[int, int | None, shard_writers.MergedFiles | None]:
    """Run the engine over `todo`, writing rows as they come; returns (measured, final length, the
    shard files merged, None without shard files).

    `run_id`: a run already started (an incremental scan starts its run before changing the index).
    `order`: the index's order, by which the sample measured at a position takes its row id."""
    if run_id is None:
        run_id = _start_run(index, description, options, length, print_, workers)
    progress = Progress(options.progress, interval=options.progress_interval)
    total = sum(len(r) for r in todo)
    progress.start(length, resumed, description.spec)
    engine = runner.RunnerOptions(workers=workers, timeout=options.timeout, chunk_size=options.chunk_size)
    highest = -1
    index_path = Path(store.index_path(index))
    starts = shard_starts_of(source)
    files = shard_writers.wanted(options.shard_index, description, workers, total, len(starts or ()))
    folder = shard_writers.folder_of(index_path) if files else None
    if folder is not None:
        folder.mkdir(parents=True, exist_ok=True)
    writer = store.SampleWriter(index, run_id, order)
    outcomes: Generator[list[Any], None, None]
    warm_up = getattr(source, "warm_up", None)
    if callable(warm_up) and total >= _WARM_UP_FROM * max(1, workers) and options.backend == "local":
        warm_up()  # the decoders' imports, once here rather than in every forked worker
    if options.backend == "dask":
        assert length is not None  # streams were refused by check_source
        outcomes = dask_backend.run(
            description, _indices(todo), total, engine,
            scheduler=options.scheduler, workers=workers, length=length,
            shard_folder=None if folder is None else str(folder), run_id=run_id,
        )  # fmt: skip
    elif folder is not None:
        assert starts is not None
        outcomes = shard_writers.run_local(description, _indices(todo), engine, folder, run_id, starts)
    else:
        outcomes = runner.run(description, _indices(todo), total, engine)
    merged: shard_writers.MergedFiles | None = None
    known: shard_writers.FilesSummary | None = None  # the files' summaries, reduced on the cluster
    try:
        with _terminate_as_interrupt(), contextlib.closing(outcomes):
            for batch in outcomes:  # closing: workers stop now
                rows = [row for row in batch if not isinstance(row, _NOT_ROWS)]
                if len(rows) < len(batch):
                    progress.count(f.outcomes for f in batch if isinstance(f, shard_writers.ShardFile))
                    known = next((s for s in batch if isinstance(s, shard_writers.FilesSummary)), known)
                if rows:
                    stamp = store.utc_now()
                    for row in rows:
                        if "key" not in row:  # workers key what they measure; the parent keys the rest
                            row["key"] = None if length is None else source.key(row["idx"])
                        row["measured_at"] = stamp
                        highest = max(highest, row["idx"])
                    writer.add(rows)
                else:
                    writer.add(())
                progress.update(rows)
    except BaseException:
        if folder is not None:  # what the writers finished goes in the index now; the rest resumes
            with contextlib.suppress(Exception):
                shard_writers.merge_finished(index_path, run_id=run_id)
        raise
    finally:
        writer.flush()
        progress.close()
    if folder is not None:
        merged = shard_writers.merge_finished(index_path, run_id=run_id, known=known)
    if length is None:
        length = highest + 1  # a stream's length is what it yielded
    return writer.written + (merged.samples if merged else 0), length, merged


_NOT_ROWS = (shard_writers.ShardFile, shard_writers.FilesSummary)


# Samples per worker from which the decoders are imported in the parent before the workers fork:
# that saves each worker its ~0.3 CPU-seconds of imports, but holds every worker back until the
# parent is done. For a few hundred files (an incremental scan, a watch update) the workers
# importing side by side finish sooner.
_WARM_UP_FROM = 1000


def _indices(todo: list[range]) -> Iterator[int]:
    for gap in todo:
        yield from gap


@contextlib.contextmanager
def _terminate_as_interrupt() -> Iterator[None]:
    # `kill <scanner>` stops the scan like Ctrl-C: what was measured is flushed, the workers are
    # stopped, and rerunning the command resumes. Only the main thread may set signal handlers.
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _write_quarantine(
    index: Any,
    findings: list[policy.Finding],
    kinds: Sequence[str],
    spec: str,
    length: int | None,
    print_: str | None,
    path: Path,
) -> list[QuarantineEntry]:
    keys = read.keys_at(index, sorted({f.idx for f in findings if f.kind in kinds}))
    entries = policy.quarantine_entries(findings, keys, kinds, positions.read(index))
    document = policy.quarantine_document(
        entries, dataset=spec, length=length, fingerprint=print_, created=store.utc_now(), kinds=kinds
    )
    write_json_atomically(path, document)
    binary_list.write_beside_if_large(path, document)
    return entries


def write_json_atomically(path: Path, document: Any) -> None:
    """`json.dumps(document, indent=1)` and a newline, written in parts (a 1e7-sample list is large)."""
    write_text_atomically(path, itertools.chain(json_parts(document, indent=1), ("\n",)))


def check_output_path(path: Path, flag: str) -> None:
    """Refuse, before any work, a file that cannot be written: a folder, or a folder nobody may write."""
    if path.is_dir():
        raise UsageError(f"{flag} {path} is a folder; give a file name, e.g. {path / 'quarantine.json'}")
    folder = path.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent  # the nearest existing folder: the rest is created
    if not folder.is_dir():
        raise UsageError(f"{flag} {path}: {folder} is a file, not a folder")
    if store.read_only_file_system(folder):
        raise UsageError(f"{flag} {path}: {folder} is on a read-only file system")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise UsageError(f"{flag} {path}: the folder {folder} is not writable for this user")
    why = _not_a_list(path)
    if why is not None:
        raise UsageError(
            f"{flag} {path} exists and is not a quarantine list ({why}); writing the list there would "
            "replace it. Give a new file name, or remove the file first if it is one you no longer need"
        )
    beside = binary_list.binary_path_beside(path)
    why = None if beside == path else _not_a_list(beside)
    if why is not None:  # a list of 1,000,000 samples or more also writes its binary form there
        raise UsageError(
            f"{flag} {path}: {beside} exists and is not a quarantine list ({why}); a large list writes "
            "its binary form there. Give another file name, or move that file away"
        )


# How each form datalint writes begins: JSON (`format` first), the binary list, the text form's line.
_JSON_LIST_HEAD = re.compile(rb'\A\{\s*"format":\s*"' + re.escape(LIST_FORMAT.encode()) + rb'"')
_TEXT_LIST_LINE = re.compile(rb"\A\d+\t[^\t\n]*\t[^\t\n]*\t[^\t\n]*\Z")


def _not_a_list(path: Path) -> str | None:
    """Why the file at `path` is not a list datalint wrote (None: missing, empty, or one of ours).

    A list is refused by what it holds, not by its name: `--quarantine train.py` replaced a dataset's
    own code with JSON."""
    try:
        info = path.stat()
    except FileNotFoundError:
        return None
    if not stat_module.S_ISREG(info.st_mode):
        return "it is not a regular file"
    if info.st_size == 0:
        return None
    try:
        with path.open("rb") as handle:
            head = handle.read(64 * 1024)
    except OSError as exc:
        return f"it cannot be read to check: {exc.strerror or exc}"
    if head.startswith(binary_list.MAGIC) or _JSON_LIST_HEAD.match(head):
        return None
    lines = head.split(b"\n")
    whole = lines if len(head) == info.st_size else lines[:-1]  # the last line may be cut at 64 KiB
    if all(_TEXT_LIST_LINE.match(line) for line in whole if line) and any(whole):
        return None
    first = head.split(b"\n", 1)[0][:60].decode("utf-8", "replace")
    return f"it begins {first!r}, not like a JSON, binary or text list datalint writes"


def write_text_atomically(path: Path, text: Content) -> None:
    """Write a list (or a summary) beside `path` and rename it over `path`: readers never see half.

    The file gets the mode a plain `open()` would give it (0666 less the umask), or keeps the mode
    of the file it replaces: a list that another user's training job must read stays readable.
    """
    if path.is_dir():
        raise IsADirectoryError(errno.EISDIR, "is a folder", str(path))
    store.create_parent(path)
    write_atomically(path, text)


def outcome_counts(
    statuses: Mapping[str, int], findings: Iterable[policy.Finding], *, files: bool = False
) -> dict[str, int]:
    """The headline: `ok` counts only samples that loaded and are neither damaged nor undecodable.

    A damaged image file loads (the probe measured it: engine status `ok`) but is no good sample;
    counting it as ok put "ok 200" above a table of 8 corrupt files. `files` (an image scan) shows
    `damaged` and `unsupported` even at 0.
    """
    from datalint.index.kinds import DAMAGE_KINDS, UNSUPPORTED_KIND

    listed = list(findings)
    damaged = {f.idx for f in listed if f.kind in DAMAGE_KINDS}
    unsupported = {f.idx for f in listed if f.kind == UNSUPPORTED_KIND} - damaged
    outcomes = {"ok": max(0, statuses.get("ok", 0) - len(damaged) - len(unsupported))}
    if files or damaged or unsupported:
        outcomes.update(damaged=len(damaged), unsupported=len(unsupported))
    outcomes.update((name, count) for name, count in statuses.items() if name != "ok")
    return outcomes


def _counts(index: Any, findings: list[policy.Finding]) -> dict[str, Any]:
    counts: dict[str, Any] = dict(store.status_counts(index))
    per_kind: dict[str, int] = {}
    for finding in findings:
        per_kind[finding.kind] = per_kind.get(finding.kind, 0) + 1
    counts["findings"] = per_kind
    return counts


def _worst(entries: list[QuarantineEntry]) -> tuple[QuarantineEntry, ...]:
    def rank(entry: QuarantineEntry) -> tuple[int, int]:
        return policy.severity_rank(entry.kinds[0] if entry.kinds else ""), entry.index

    return tuple(sorted(entries, key=rank)[:WORST_SHOWN])


def _record_policy(index: Any, run: store.RunRecord, options: PolicyOptions) -> None:
    """A scan that measured nothing still judged with its own policy (a changed `--threshold`, `--kinds`
    or [tool.datalint.scan]): the last run's options say so, for the report and `datalint quarantine`."""
    wanted = json.loads(json.dumps(options.to_dict(), default=str))
    if run.options.get("policy") == wanted:
        return
    updated = json.dumps({**run.options, "policy": wanted}, sort_keys=True, default=str)
    with store.transaction(index):
        index["runs"].update(run.id, {"options": updated})


def _run_options(description: SourceDescription, options: ScanOptions, workers: int) -> dict[str, Any]:
    return {
        "source": description.kind,
        "source_options": dict(description.options),
        "workers": workers,
        "timeout": options.timeout,
        "labels": list(options.labels),
        "chunk_size": options.chunk_size,
        "backend": options.backend,
        "policy": options.policy.to_dict(),
    }


def _environment() -> dict[str, Any]:
    from datalint import __version__

    # datalint's own version from the package: its distribution is torch-datalint, and a distribution
    # named "datalint" on the index is an unrelated project.
    versions: dict[str, str | None] = {"datalint": __version__}
    for package in (
        "torch",
        "numpy",
        "pillow",
        "opencv-python-headless",
        "sqlite-utils",
    ):
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            versions[package] = None
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "start_method": "fork",
        "cpus": effective_cpu_count(),
        "versions": versions,
    }


# ----------------------------------------------------------------------------------------------
# Re-deriving a list from an existing index (`datalint quarantine`)


def derive_quarantine(
    index_path: str | os.PathLike[str],
    *,
    kinds: str | Sequence[str] | None = None,
    workers: int = 0,
    **overrides: Any,
) -> dict[str, Any]:
    """The quarantine document for an index under another policy, without rescanning or writing to it.

    Thresholds default to those the last scan used; `overrides` replace any `PolicyOptions` field
    (num_classes, ignore_index, max_bytes, require, ...), except `thresholds`, laid over the scan's
    kind by kind. `workers`: the forked processes that judge an index judged from its population
    summary, part by part (0 or 1, the default: one part after the other, in this process).
    """
    index = store.open_index(Path(index_path), create=False)
    with contextlib.closing(index), store.reading_index(Path(index_path)):
        run = store.latest_run(index)
        if run is None and store.count_samples(index) == 0:
            raise UsageError(f"the index {index_path} holds no scan yet; run `datalint scan` first")
        options = _policy_over_scan(str(index_path), run, kinds, dict(overrides))
        findings = _findings_of(index, options, workers)
        keys = read.keys_at(index, sorted({f.idx for f in findings if f.kind in options.kinds}))
        entries = policy.quarantine_entries(findings, keys, options.kinds, positions.read(index))
        return policy.quarantine_document(
            entries,
            dataset=run.spec if run is not None else "?",
            length=run.length if run is not None else None,
            fingerprint=run.fingerprint if run is not None else None,
            created=store.utc_now(),
            kinds=options.kinds,
        )


def _policy_over_scan(
    index_path: str, run: store.RunRecord | None, kinds: Any, overrides: dict[str, Any]
) -> PolicyOptions:
    """The scan's policy with the verdict settings resolved over it by the one resolver
    (`settings.layered`: what the caller gave over what the index stored over the default); the
    policy's other fields (`against`, the factors) as given, else as the scan had them."""
    from datalint.scan import settings as settings_

    keys = settings_.verdict_keys()
    stored = None
    if run is not None:
        values, limits = settings_.stored_values(run.options, keys)
        stored = settings_.Stored(index_path, run.id, values, limits)
    given = {name: (overrides.pop(name.replace("-", "_")), "derive_quarantine()") for name in keys
             if overrides.get(name.replace("-", "_")) is not None}  # fmt: skip
    if kinds is not None:
        given["kinds"] = (kinds, "derive_quarantine()")
    limits_given = overrides.pop(settings_.THRESHOLDS_KEY, None) or ()
    chosen = settings_.layered(given, limits_given, "derive_quarantine()", None, keys, stored)
    base = dict(run.options.get("policy", {})) if run is not None else {}
    base.update({name: value for name, value in overrides.items() if value is not None})
    resolved = chosen.values
    return PolicyOptions.from_dict(
        {
            **base,
            "kinds": policy.parse_kinds(resolved["kinds"]),
            "num_classes": resolved["num-classes"],
            "ignore_index": resolved["ignore-index"],
            "max_bytes": resolved["max-bytes"],
            "require": tuple(resolved["require"]),
            "thresholds": chosen.thresholds,
        }
    )
