"""The service's datasets and their files: `<data-dir>/datasets/<name>/index.db` and `quarantine.json`.

Both are today's formats (`datalint docs index`), so `datalint report`, `datalint quarantine`, datasette
and `load_quarantine()` work on them directly. The list the service serves is derived from the index
the way `load_quarantine(index.db)` reads it (every finding marked for quarantine, the guard's
failures included), in the `datalint-quarantine/1` document of `quarantine.json`; it is built inside
SQLite (JSON1), cached by the index's state and tagged with the SHA-256 of its bytes (the ETag).

Guard failures ingested into a built list are appended to it instead of rebuilding it (a full build of a
1M-entry list costs seconds): the new entries are read from the index by their keys, appended to the
cached body, fed to the gzip stream kept open for that purpose, and the ETag is chained from the old
one and the appended bytes. A failure for a sample already listed, or a list that was stale before the
commit, falls back to a rebuild in the background.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sqlite3
import threading
import time
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from datalint.scan import store
from datalint.service.config import ConfigError, DatasetConfig, ServiceConfig, parse_dataset, valid_name

logger = logging.getLogger("datalint.service")

REGISTERED_FILE = "datasets.json"  # datasets registered through the API, beside the config's


@dataclass(frozen=True)
class ServedList:
    etag: str  # quoted, as the header carries it
    body: bytes
    entries: int
    gzipped: bytes  # the same body gzip-compressed once (lists compress ~15x), for Accept-Encoding: gzip


@dataclass(frozen=True)
class DatasetStats:
    samples: int
    quarantined: int
    last_scan: dict[str, Any] | None
    guard_failures: int


def _severity_case() -> str:
    from datalint.scan.policy import SEVERITY

    arms = " ".join(f"WHEN '{kind}' THEN {rank}" for rank, kind in enumerate(SEVERITY))
    return f"CASE kind {arms} ELSE {len(SEVERITY)} END"


class Registry:
    """Datasets by name, their folders, and the cached list each one serves."""

    def __init__(self, config: ServiceConfig) -> None:
        self.config = config
        self.root = config.data_dir / "datasets"
        self._lock = threading.Lock()
        self._datasets: dict[str, DatasetConfig] = {d.name: d for d in config.datasets}
        self._registered_path = config.data_dir / REGISTERED_FILE
        for dataset in self._load_registered():
            self._datasets.setdefault(dataset.name, dataset)
        self._lists: dict[str, tuple[tuple[Any, ...], ServedList]] = {}
        self._appendable: dict[str, _Appendable] = {}
        self._generation: dict[str, int] = {}
        self._building: dict[str, threading.Lock] = {}

    # ---- datasets ----------------------------------------------------------------------------

    def names(self) -> list[str]:
        return sorted(self._datasets)

    def get(self, name: str) -> DatasetConfig | None:
        return self._datasets.get(name) if valid_name(name) else None

    def register(self, entry: dict[str, Any]) -> DatasetConfig:
        """Add a dataset (an API request's body, the keys of a [[datasets]] table); persisted."""
        dataset = parse_dataset(entry, "request", Path.cwd())
        with self._lock:
            if dataset.name in self._datasets:
                raise ConfigError(f"dataset {dataset.name!r} is registered already")
            self._datasets[dataset.name] = dataset
            registered = [d for d in self._load_registered()] + [dataset]
            self._write_registered(registered)
        return dataset

    def _load_registered(self) -> list[DatasetConfig]:
        if not self._registered_path.is_file():
            return []
        try:
            entries = json.loads(self._registered_path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ConfigError(
                f"{self._registered_path}: cannot read the registered datasets: {exc}"
            ) from None
        if not isinstance(entries, list):
            raise ConfigError(f"{self._registered_path}: expected a list of datasets")
        return [parse_dataset(_as_table(e), str(self._registered_path), Path("/")) for e in entries]

    def _write_registered(self, datasets: list[DatasetConfig]) -> None:
        from datalint.scan.api import write_json_atomically

        write_json_atomically(self._registered_path, [d.to_dict() for d in datasets])

    # ---- files --------------------------------------------------------------------------------

    def folder(self, name: str) -> Path:
        # Names are validated (one safe path segment); the check here keeps that true for any caller.
        if not valid_name(name):
            raise ValueError(f"not a dataset name: {name!r}")
        return self.root / name

    def index_path(self, name: str) -> Path:
        return self.folder(name) / "index.db"

    def quarantine_path(self, name: str) -> Path:
        return self.folder(name) / "quarantine.json"

    def changed(self, name: str, *, rebuild: bool = False) -> None:
        """Something this process wrote changed the dataset's list (an ingest, a finished scan).

        With `rebuild`, the list is rebuilt now in the background, so the next GET finds it built
        (a GET that comes first waits for that build rather than starting its own)."""
        with self._lock:
            self._generation[name] = self._generation.get(name, 0) + 1
        if rebuild:
            self.warm([name])

    def list_state(self, name: str) -> tuple[Any, ...] | None:
        """The state the dataset's cached list is checked against (taken by the ingest writer before a
        commit, so that `appended()` knows whether the cached list was current before it)."""
        return self._state(name, self.index_path(name))

    def appended(self, name: str, indexes: list[int], before: tuple[Any, ...] | None) -> None:
        """Guard failures for `indexes` were committed to the index (its state was `before`): append their
        entries to the cached list, or, where that cannot be done, rebuild it in the background."""
        path = self.index_path(name)
        with self._lock:
            building = self._building.setdefault(name, threading.Lock())
        if not building.acquire(blocking=False):  # a build is running: it or the next one has these rows
            self.changed(name, rebuild=True)
            return
        try:
            cached = self._lists.get(name)
            tail = self._appendable.get(name)
            state = self._state(name, path)
            fits = (
                cached is not None
                and tail is not None
                and state is not None
                and cached[0] == before
                and not any(tail.listed(i) for i in indexes)
            )
            if fits:
                assert cached is not None and tail is not None and state is not None
                served = tail.append(cached[1], list_entries(path, indexes))
                self._lists[name] = (state, served)
                logger.info("list of %s: %d entries appended", name, len(indexes))
                return
        finally:
            building.release()
        self.changed(name, rebuild=True)

    def warm(self, names: list[str] | None = None) -> None:
        """Build the lists of `names` (default: all) in a background thread."""

        def build() -> None:
            for name in names if names is not None else self.names():
                try:
                    self.served_list(name)
                except Exception as exc:  # a broken index is reported to whoever asks for its list
                    logger.warning("list of %s not prebuilt: %s", name, exc)

        threading.Thread(target=build, name="datalint-lists", daemon=True).start()

    # ---- the served list ----------------------------------------------------------------------

    def served_list(self, name: str) -> ServedList | None:
        """The list as the service serves it, or None when the dataset has no index yet."""
        path = self.index_path(name)
        with self._lock:
            building = self._building.setdefault(name, threading.Lock())
        with building:  # one build per dataset at a time; the others wait for it and share it
            state = self._state(name, path)
            if state is None:
                return None
            cached = self._lists.get(name)
            if cached is not None and cached[0] == state:
                return cached[1]
            started = time.monotonic()
            body, entries, content = build_list(path)
            tail = _Appendable.of(body, listed_indexes(path))
            served = ServedList('"' + content + '"', body, entries, tail.gzipped())
            self._lists[name] = (state, served)
            self._appendable[name] = tail
            logger.info("list of %s built: %d entries in %.2f s", name, entries, time.monotonic() - started)
            return served

    def _state(self, name: str, path: Path) -> tuple[Any, ...] | None:
        try:
            main = path.stat()
        except FileNotFoundError:
            return None
        try:
            wal = os.stat(f"{path}-wal")
            # An empty WAL holds nothing (a reader's open creates one): only a WAL with frames counts.
            wal_state: tuple[int, int] = (wal.st_mtime_ns, wal.st_size) if wal.st_size else (0, 0)
        except FileNotFoundError:
            wal_state = (0, 0)
        return (main.st_mtime_ns, main.st_size, wal_state, self._generation.get(name, 0))

    def stats(self, name: str) -> DatasetStats:
        path = self.index_path(name)
        if not path.is_file():
            return DatasetStats(0, 0, None, 0)
        with _read_only(path) as connection:
            samples = connection.execute("SELECT count(*) FROM samples").fetchone()[0]
            quarantined = connection.execute(
                "SELECT count(DISTINCT idx) FROM findings WHERE quarantine = 1"
            ).fetchone()[0]
            guard = connection.execute(
                "SELECT count(*) FROM samples WHERE run_id IN (SELECT id FROM runs WHERE kind = 'guard')"
            ).fetchone()[0]
            run = store.latest_run(connection)
        last = None
        if run is not None:
            last = {
                "id": run.id,
                "kind": run.kind,
                "started": run.started,
                "finished": run.finished,
                "length": run.length,
            }
        return DatasetStats(int(samples), int(quarantined), last, int(guard))


def _as_table(entry: Any) -> Any:
    """A saved DatasetConfig.to_dict() back as the keys of a [[datasets]] table."""
    if not isinstance(entry, dict):
        return entry
    table = {"name": entry.get("name")}
    for key in ("images", "dataset"):
        if entry.get(key):
            table[key] = entry[key]
    for key, value in (entry.get("scan_options") or {}).items():
        table[key.replace("_", "-")] = value
    if entry.get("watch"):
        table["watch"] = True
    if entry.get("interval"):
        table["interval"] = entry["interval"]
    return table


class _read_only:
    """A read-only connection to an index (never creates or changes it)."""

    def __init__(self, path: Path) -> None:
        self.connection = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=10)

    def __enter__(self) -> sqlite3.Connection:
        return self.connection

    def __exit__(self, *exc: object) -> None:
        self.connection.close()


class _Appendable:
    """What appending to a built list needs: the gzip stream of its body up to the samples array's
    closing `]}` (flushed, kept open), and which sample indexes the list holds (a bitmap)."""

    LIMIT = 1 << 31  # larger (or negative) indexes are not tracked: a list holding one is rebuilt instead

    def __init__(self, compressed: bytes, compressor: Any, bitmap: bytearray, empty: bool) -> None:
        self.compressed = compressed
        self.compressor = compressor
        self.bitmap = bitmap
        self.empty = empty

    @classmethod
    def of(cls, body: bytes, indexes: list[int]) -> _Appendable:
        compressor = zlib.compressobj(1, zlib.DEFLATED, 31)  # 31: a gzip header and trailer
        compressed = compressor.compress(body[:-2]) + compressor.flush(zlib.Z_SYNC_FLUSH)
        tail = cls(compressed, compressor, bytearray(), body.endswith(b"[]}"))
        tail.mark(indexes)
        return tail

    def listed(self, index: int) -> bool:
        if not 0 <= index < self.LIMIT:
            return True  # untracked: treated as listed, so the caller rebuilds
        byte = index >> 3
        return byte < len(self.bitmap) and bool(self.bitmap[byte] & (1 << (index & 7)))

    def mark(self, indexes: list[int]) -> None:
        for index in indexes:
            if 0 <= index < self.LIMIT:
                byte = index >> 3
                if byte >= len(self.bitmap):
                    self.bitmap.extend(bytes(byte + 1 - len(self.bitmap) + len(self.bitmap) // 2))
                self.bitmap[byte] |= 1 << (index & 7)

    def gzipped(self) -> bytes:
        closing = self.compressor.copy()
        return self.compressed + closing.compress(b"]}") + closing.flush()

    def append(self, served: ServedList, entries: list[tuple[int, str]]) -> ServedList:
        if not entries:
            return served
        added = ",".join(entry for _, entry in entries).encode()
        joined = added if self.empty else b"," + added
        self.compressed += self.compressor.compress(joined) + self.compressor.flush(zlib.Z_SYNC_FLUSH)
        self.empty = False
        self.mark([index for index, _ in entries])
        etag = hashlib.sha256(served.etag.encode() + added).hexdigest()[:32]
        return ServedList(
            f'"{etag}"', served.body[:-2] + joined + b"]}", served.entries + len(entries), self.gzipped()
        )


def _entries_query(where: str) -> str:
    """One JSON object per quarantined sample (compact, as json_group_array writes them), by index."""
    return f"""
        SELECT f.idx, json_object('index', f.idx, 'key', s.key, 'kinds', json_group_array(f.kind),
                                  'detail', group_concat(f.detail, '; ')) AS entry
        FROM (SELECT idx, kind, detail FROM findings WHERE quarantine = 1 {where}
              ORDER BY idx, {_severity_case()}) AS f
        LEFT JOIN samples s ON s.idx = f.idx
        GROUP BY f.idx ORDER BY f.idx
    """


def list_entries(path: Path, indexes: list[int]) -> list[tuple[int, str]]:
    """The list's entries for `indexes` (those quarantined), read by key: cheap for a batch of failures."""
    found: list[tuple[int, str]] = []
    with _read_only(path) as connection:
        for start in range(0, len(indexes), 500):
            part = indexes[start : start + 500]
            marks = ", ".join("?" for _ in part)
            found += connection.execute(_entries_query(f"AND idx IN ({marks})"), part).fetchall()
    return found


def listed_indexes(path: Path) -> list[int]:
    with _read_only(path) as connection:
        rows = connection.execute("SELECT DISTINCT idx FROM findings WHERE quarantine = 1")
        return [row[0] for row in rows]


def build_list(path: Path) -> tuple[bytes, int, str]:
    """The `datalint-quarantine/1` document of the index at `path` as bytes, its entry count, and a hash
    of everything in it but `created` (the ETag: an unchanged list keeps it across rebuilds and restarts).

    The samples array is assembled by SQLite's JSON functions: a million entries in well under a
    second, where building a million Python dicts and dumping them takes several.
    """
    from datalint.scan.policy import QUARANTINE_FORMAT

    query = f"SELECT count(*), coalesce(json_group_array(json(entry)), '[]') FROM ({_entries_query('')})"
    with _read_only(path) as connection:
        count, samples = connection.execute(query).fetchone()
        run = store.latest_run(connection)
        policy_options = run.options.get("policy") if run is not None else None
        policy_kinds = policy_options.get("kinds") if isinstance(policy_options, dict) else None
    head = {
        "format": QUARANTINE_FORMAT,
        "dataset": run.spec if run else None,
        "length": run.length if run else None,
        "fingerprint": run.fingerprint if run else None,
        "created": store.utc_now(),
        "policy": policy_kinds if isinstance(policy_kinds, list) else None,
    }
    prefix = json.dumps(head, separators=(", ", ": "))[:-1]
    content = hashlib.sha256(json.dumps({**head, "created": None}).encode())
    content.update(samples.encode())
    return f'{prefix}, "samples": {samples}}}'.encode(), int(count), content.hexdigest()[:32]
