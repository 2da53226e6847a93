"""The quarantine lists the service serves: published snapshots, kept current in the background.

A dataset's served list is a *published snapshot*: the `datalint-quarantine/1` bytes of its index (as
`load_quarantine(index.db)` reads it), gzip-compressed once, tagged with the SHA-256 of its content
(everything but `created`, so an unchanged list keeps its ETag across rebuilds and restarts). A GET
reads the published snapshot from a dict and never waits for a build: building a 1M-entry list costs
seconds (SQLite assembling 90 MB of JSON, then gzip and SHA-256), so it is done off the request path,
and until a new snapshot is published the previous one is served with its own ETag (what HTTP caches
call stale-while-revalidate). Only a dataset that has never had a list waits for its first build.

Who publishes:
- guard failures ingested by the service are appended to the published snapshot before their POST is
  answered (their entries read from the index by key, fed to the gzip stream and the SHA-256 kept open
  for that purpose), so an acknowledged failure is on every list served from then on;
- a finished scan job: the job is marked finished once the list of its index is published;
- anything else that changes the index (a watcher, a `datalint` command run by hand) is noticed by the
  keeper thread, which compares the index's file state every `poll` seconds and rebuilds.

Each full build is also written beside the index (`<dataset>/served/`: the body, its gzip, the listed
indexes and the ETag), so a restarted service serves its last list at once, reconciles it with the
guard failures committed since (appended, as at ingest), and rebuilds in the background only if the
index changed.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import threading
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from datalint.files import write_atomically
from datalint.index import failures, positions, quarantine, read, store

logger = logging.getLogger("datalint.service")

SNAPSHOT_DIR = "served"  # beside index.db: the last full build, for a restarted service
SAVE_GRACE_S = 60.0  # at stop, how long a snapshot being written may take to finish
_SAMPLES = b', "samples": '
State = tuple[Any, ...]


@dataclass(frozen=True)
class ServedList:
    """A published list. Its bytes are kept in parts (the body as built, then what each append added,
    then the closing `]}`), so an append costs what it adds and not a copy of 90 MB; a response sends
    the parts one after the other."""

    etag: str  # quoted, as the header carries it
    parts: tuple[bytes, ...]
    entries: int
    # the same body gzip-compressed (lists compress ~15x), for Accept-Encoding: gzip, in parts too:
    # the build's stream, each append's sync-flushed block, the end of the stream; () = none
    gzip_parts: tuple[bytes, ...]

    @property
    def body(self) -> bytes:
        return b"".join(self.parts)

    @property
    def gzipped(self) -> bytes:
        return b"".join(self.gzip_parts)


def index_state(path: Path) -> State | None:
    """The index's file state (main file and WAL); None when there is no index. Two stats, no SQLite."""
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
    return (main.st_mtime_ns, main.st_size, *wal_state)


class ListKeeper:
    """The published list of every dataset, and the thread that keeps them current."""

    def __init__(self, index_path: Callable[[str], Path], names: Callable[[], list[str]], poll: float = 0.25):
        self.index_path = index_path
        self.names = names
        self.poll = poll
        self._lock = threading.Lock()  # guards the dicts below; never held across I/O
        self._published: dict[str, ServedList] = {}
        self._tails: dict[str, _Appendable] = {}
        self._basis: dict[str, State] = {}  # the index state the published list reflects
        self._stale: set[str] = set()  # a rebuild is wanted whatever the state says
        self._held: set[str] = set()  # a scan job is writing the index: its end publishes
        self._provisionals: set[str] = set()  # published from the scan's quarantine.json, until built
        self._chain: dict[str, State | None] = {}  # during a build: the state our own commits lead to
        self._since: dict[str, list[int]] = {}  # during a build: indexes appended meanwhile
        self._building: dict[str, threading.Lock] = {}
        self._seen: dict[str, State | None] = {}
        self._stop = threading.Event()
        self._restored = threading.Event()  # set once the saved lists are published (or none saved)
        self._saving = threading.Lock()  # one writer of the saved files
        self._thread: threading.Thread | None = None

    # ---- reading -------------------------------------------------------------------------------

    def current(self, name: str) -> ServedList | None:
        """The published list: a dict lookup, whatever is being built (None: none published yet)."""
        return self._published.get(name)

    def served_list(self, name: str) -> ServedList | None:
        """The list of the index as it is now, built if the published one is not current (blocks);
        None when the dataset has no index."""
        if self._thread is not None:
            self._restored.wait(timeout=60)  # a saved list about to be published beats a build
        state = index_state(self.index_path(name))
        if state is None:
            return None
        with self._lock:
            if name in self._provisionals:  # the scan's list, published at start while this one builds
                return self._published.get(name)
            fresh = name in self._published and self._basis.get(name) == state and name not in self._stale
        if not fresh:
            self.rebuild(name)
        return self._published.get(name)

    # ---- the keeper thread -----------------------------------------------------------------------

    def start(self) -> None:
        """Load the lists saved by the last run, then keep every list current in the background."""
        self._thread = threading.Thread(target=self._loop, name="datalint-lists", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop keeping the lists; a snapshot being saved is finished first."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        # A save cut short leaves the previous snapshot, and a restart must then build the list again
        # before its first GET (seconds for 1M entries): wait for the one under way, if any.
        if self._saving.acquire(timeout=SAVE_GRACE_S):
            self._saving.release()

    def _loop(self) -> None:
        for name in self.names():
            self._guarded(self._restore, name)
            self._guarded(self._provisional, name)
        self._restored.set()
        # the restored lists' gzip streams and hashes, for their next append: a second or two for
        # 90 MB, done here rather than before the first GET is answered (an append does it if first)
        for name in self.names():
            self._guarded(self._reopen, name)
        while not self._stop.is_set():
            for name in self.names():
                if self._stop.is_set():
                    break
                self._guarded(self._check, name)
            self._stop.wait(self.poll)

    def _guarded(self, step: Callable[[str], None], name: str) -> None:
        try:
            step(name)
        except Exception as exc:  # a broken index is reported to whoever asks for its list
            logger.warning("list of %s: %s", name, exc)

    def _check(self, name: str) -> None:
        state = index_state(self.index_path(name))
        previous, self._seen[name] = self._seen.get(name), state
        if state is None:
            with self._lock:
                self._published.pop(name, None)  # the index was removed: so is its list
                self._basis.pop(name, None)
            return
        with self._lock:
            if name in self._held:
                return
            wanted = name in self._stale or self._basis.get(name) != state
        # Rebuild once the index has held still for one poll (a writer mid-update would make the
        # build stale at once), or at once for a list never published or asked for explicitly.
        if wanted and (state == previous or name not in self._published or name in self._stale):
            self.rebuild(name)

    # ---- writers of the index tell the keeper ------------------------------------------------------

    def hold(self, name: str) -> None:
        """A scan job writes the index: no background rebuilds until `publish_after()`."""
        with self._lock:
            self._held.add(name)

    def publish_after(self, name: str) -> None:
        """The scan is over: rebuild now (blocks), and let the keeper watch the index again."""
        try:
            with self._lock:
                self._stale.add(name)
            self.rebuild(name)
        finally:
            with self._lock:
                self._held.discard(name)

    def invalidate(self, name: str) -> None:
        """Rebuild in the background soon (the keeper's next poll)."""
        with self._lock:
            self._stale.add(name)

    def appended(self, name: str, indexes: list[int], before: State | None) -> None:
        """Guard failures for `indexes` were committed to the index by this service (whose state was
        `before`): add the ones not listed yet to the published list, now; a rebuild follows where the
        list holds some of them already (their kinds and detail change) or was not current."""
        path = self.index_path(name)
        after = index_state(path)
        with self._lock:
            if name in self._provisionals:
                # the scan's file cannot take appends: withdrawn, so the next GET waits for the build
                # (which reads these failures) rather than being served a list without them
                self._provisionals.discard(name)
                self._published.pop(name, None)
                self._stale.add(name)
                return
            tail = self._tails.get(name)
            new = [i for i in indexes if tail is None or not tail.listed(i)]
        entries = list_entries(path, new) if tail is not None and new else []
        with self._lock:
            if name in self._since:  # a build is reading the index: it re-applies these when it ends
                self._since[name] += indexes
                chain = self._chain.get(name)
                self._chain[name] = after if chain is not None and chain == before else None
            tail = self._tails.get(name)
            served = self._published.get(name)
            if tail is None or served is None:
                self._stale.add(name)
                return
            entries = [e for e in entries if not tail.listed(e[0])]
            if entries:
                self._published[name] = tail.append(served, entries)
                logger.info("list of %s: %d entries appended", name, len(entries))
            if len(new) < len(indexes):
                self._stale.add(name)
            elif self._basis.get(name) == before and after is not None:
                self._basis[name] = after

    # ---- building ----------------------------------------------------------------------------------

    def rebuild(self, name: str) -> None:
        """Build the list from the index and publish it (one build per dataset at a time; a caller that
        finds one running waits for it, then builds again only if the index changed since)."""
        path = self.index_path(name)
        with self._lock:
            building = self._building.setdefault(name, threading.Lock())
        with building:
            state = index_state(path)
            if state is None:
                return
            with self._lock:
                if name in self._published and self._basis.get(name) == state and name not in self._stale:
                    return
                self._stale.discard(name)
                self._since[name] = []
                self._chain[name] = state
            try:
                started = time.monotonic()
                built = build_list(path)
                extra: dict[int, str] = {}
                handled: set[int] = set()
                while True:  # failures appended to the old list while this one was read are kept
                    with self._lock:
                        pending = {i for i in self._since[name] if not built.tail.listed(i)} - handled
                        if not pending:
                            self._publish(name, built, sorted(extra.items()))
                            break
                    extra.update(list_entries(path, sorted(pending)))
                    handled |= pending
            finally:
                with self._lock:
                    self._since.pop(name, None)
                    self._chain.pop(name, None)
            logger.info(
                "list of %s built: %d entries in %.2f s", name, built.entries, time.monotonic() - started
            )
        self._save(name)

    def _publish(self, name: str, built: _Built, missing: list[tuple[int, str]]) -> None:
        """Under the lock: make `built` (plus the failures appended while it was read) the served list."""
        chain = self._chain.get(name)
        served = built.served
        tail = built.tail
        if missing:
            served = tail.append(served, sorted(missing))
        current = self._published.get(name)
        if current is not None and current.etag == served.etag:
            served, tail = current, self._tails[name]  # same content: keep its bytes and `created`
        self._published[name] = served
        self._tails[name] = tail
        self._provisionals.discard(name)
        basis = chain if chain is not None else built.state
        if basis is not None:
            self._basis[name] = basis

    # ---- the saved snapshot ----------------------------------------------------------------------------

    def _folder(self, name: str) -> Path:
        return self.index_path(name).parent / SNAPSHOT_DIR

    def _save(self, name: str) -> None:
        with self._saving:
            self._save_now(name)

    def _save_now(self, name: str) -> None:
        with self._lock:
            served, tail, basis = self._published.get(name), self._tails.get(name), self._basis.get(name)
        if served is None or tail is None:
            return
        folder = self._folder(name)
        meta = folder / "list.meta.json"
        with contextlib.suppress(OSError, ValueError):
            if json.loads(meta.read_text(encoding="utf-8")).get("etag") == served.etag:
                return  # saved already
        folder.mkdir(exist_ok=True)
        write_atomically(folder / "list.json", served.parts)
        write_atomically(folder / "list.json.gz", served.gzip_parts)
        write_atomically(folder / "list.listed", (bytes(tail.bitmap),))
        document = {
            "etag": served.etag,
            "entries": served.entries,
            "bytes": sum(map(len, served.parts)),
            "gzip_bytes": sum(map(len, served.gzip_parts)),
            "basis": list(basis) if basis is not None else None,
        }
        write_atomically(meta, (json.dumps(document).encode(),))  # last: it vouches for the others

    def _restore(self, name: str) -> None:
        """Publish the snapshot the last run saved, plus the guard failures committed after it."""
        path = self.index_path(name)
        if name in self._published or index_state(path) is None:
            return
        folder = self._folder(name)
        try:
            meta = json.loads((folder / "list.meta.json").read_text(encoding="utf-8"))
            body = (folder / "list.json").read_bytes()
            gzipped = (folder / "list.json.gz").read_bytes()
            bitmap = bytearray((folder / "list.listed").read_bytes())
        except (OSError, ValueError):
            return  # none saved (or half of one): the keeper builds it
        if len(body) != meta.get("bytes") or len(gzipped) != meta.get("gzip_bytes"):
            return
        served = ServedList(str(meta["etag"]), (body,), int(meta["entries"]), (gzipped,))
        tail = _Appendable.restored(body, bitmap)
        basis = tuple(meta["basis"]) if isinstance(meta.get("basis"), list) else None
        with self._lock:
            if name in self._published:
                return
            self._published[name], self._tails[name] = served, tail
            if basis is not None:
                self._basis[name] = basis
        logger.info("list of %s restored: %d entries (%s)", name, served.entries, served.etag)
        if basis is not None and index_state(path) == basis:
            return  # the index is as the saved list found it: no failure committed since
        late = [i for i in guard_failures(path) if not tail.listed(i)]
        if late:
            self.appended(name, late, None)

    def _reopen(self, name: str) -> None:
        with self._lock:
            tail = self._tails.get(name)
        if tail is not None:
            tail.reopen()

    def _provisional(self, name: str) -> None:
        """A dataset with no saved list (never listed by a service): until its first build (seconds for
        a million entries) is published, serve the list the scan wrote beside the index, when it was
        made from this index's last scan and no guard failure could be missing from it."""
        path = self.index_path(name)
        if name in self._published or index_state(path) is None:
            return
        served = scan_list(path)
        if served is None:
            return
        with self._lock:
            if name in self._published:
                return
            self._published[name] = served
            self._provisionals.add(name)
            self._stale.add(name)  # built at once, not after a poll
        logger.info("list of %s: the scan's quarantine.json served until the first build", name)


SCAN_LIST = "quarantine.json"  # beside index.db: the list the scan wrote


def scan_list(path: Path) -> ServedList | None:
    """The scan's own `quarantine.json` beside the index at `path` as a list to serve, or None where it
    may not be the index's: another format, another run (dataset, length, fingerprint), or guard failures
    in the index (the file is written by scans, which know nothing of them). Its ETag is the SHA-256 of
    the file's bytes (another serialization than a build's, so another ETag for the same entries); it
    is served uncompressed (compressing 90 MB would cost what waiting does)."""
    try:
        body = (path.parent / SCAN_LIST).read_bytes()
        start = body.index(b'"samples": [')
        head = json.loads(body[:start] + b'"samples": []}')
    except (OSError, ValueError):
        return None
    with read.reading(path) as connection:
        run = store.latest_run(connection)
        guarded = bool(failures.active(connection))  # the failures kept, not a pass over the samples
    made_by = (head.get("format"), head.get("dataset"), head.get("length"), head.get("fingerprint"))
    if run is None or made_by != (quarantine.FORMAT, run.spec, run.length, run.fingerprint):
        return None
    if head.get("policy") != policy_kinds(run):  # `datalint quarantine --kinds` wrote another list
        return None
    if guarded:
        return None
    digest: list[str] = []  # hashed on a thread of its own (hashlib lets go of the GIL) while counting
    hashing = threading.Thread(target=lambda: digest.append(hashlib.sha256(body).hexdigest()))
    hashing.start()
    entries = body.count(b'"index": ', start)
    hashing.join()
    return ServedList(f'"{digest[0][:32]}"', (body,), entries, ())


# ---- the list's bytes --------------------------------------------------------------------------------


class _Appendable:
    """What appending to a published list needs: its body's parts up to the samples array's closing
    `]}`, the gzip stream of them (sync-flushed, kept open) and its parts, the SHA-256 of its content up
    to the same point, and which sample indexes the list holds (a bitmap)."""

    LIMIT = 1 << 31  # larger (or negative) indexes are not tracked: a list holding one is rebuilt instead
    MERGE_AT = 256  # parts: past this many appended, they are joined into one (what they hold, not 90 MB)

    def __init__(self, body: bytes, bitmap: bytearray) -> None:
        self.parts = [body[:-2]]  # the body without its closing `]}`
        self.compressed: list[bytes] = []
        self.compressor: Any = None
        self.hasher: Any = None
        self.bitmap = bitmap
        self.empty = body.endswith(b"[]}")
        self._opening = threading.Lock()  # reopen() runs once, whichever thread needs it first

    @classmethod
    def of(cls, body: bytes, indexes: list[int]) -> _Appendable:
        tail = cls(body, bytearray())
        tail.reopen()
        tail.mark(indexes)
        return tail

    @classmethod
    def restored(cls, body: bytes, bitmap: bytearray) -> _Appendable:
        return cls(body, bitmap)

    def reopen(self) -> None:
        """Compress and hash the body up to its closing `]}` (a second each for 90 MB): done once."""
        with self._opening:
            if self.compressor is not None:
                return
            compressor = zlib.compressobj(1, zlib.DEFLATED, 31)  # 31: a gzip header and trailer
            self.compressed = [compressor.compress(self.parts[0]) + compressor.flush(zlib.Z_SYNC_FLUSH)]
            self.hasher = content_hasher(self.parts[0])
            self.compressor = compressor

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

    def gzip_parts(self) -> tuple[bytes, ...]:
        closing = self.compressor.copy()
        return (*self.compressed, closing.compress(b"]}") + closing.flush())

    def etag(self) -> str:
        closing = self.hasher.copy()
        closing.update(b"]")
        return f'"{closing.hexdigest()[:32]}"'

    def served(self, entries: int) -> ServedList:
        return ServedList(self.etag(), (*self.parts, b"]}"), entries, self.gzip_parts())

    def append(self, served: ServedList, entries: list[tuple[int, str]]) -> ServedList:
        if not entries:
            return served
        self.reopen()
        added = ",".join(entry for _, entry in entries).encode()
        joined = added if self.empty else b"," + added
        self.compressed.append(self.compressor.compress(joined) + self.compressor.flush(zlib.Z_SYNC_FLUSH))
        self.hasher.update(joined)
        self.empty = False
        self.mark([index for index, _ in entries])
        self.parts.append(joined)
        for parts in (self.parts, self.compressed):
            if len(parts) > self.MERGE_AT:
                parts[1:] = [b"".join(parts[1:])]
        return self.served(served.entries + len(entries))


def content_hasher(opened: bytes) -> Any:
    """SHA-256 over the list's content up to the samples array's closing `]`: the head with `created`
    set to null (so a rebuild of the same entries keeps the ETag), then the samples array's bytes.
    `opened` is the body without its closing `]}`."""
    start = opened.index(_SAMPLES)
    head = json.loads(opened[:start] + b"}")
    hasher = hashlib.sha256(json.dumps({**head, "created": None}).encode())
    hasher.update(memoryview(opened)[start + len(_SAMPLES) :])
    return hasher


def list_entries(path: Path, indexes: list[int]) -> list[tuple[int, str]]:
    """The list's entries for `indexes` (those quarantined), read by key: cheap for a batch of failures."""
    with read.reading(path) as connection:
        return quarantine.entries_of(connection, indexes)


def guard_failures(path: Path) -> list[int]:
    """The positions of the quarantined samples whose row the guard wrote (the service's ingest or a
    local recorder)."""
    with read.reading(path) as connection:
        order = positions.read(connection)
        return [order.shown(failure.index) for failure in failures.active(connection)]


@dataclass(frozen=True)
class _Built:
    served: ServedList
    tail: _Appendable
    state: State | None  # the index state before the read

    @property
    def entries(self) -> int:
        return self.served.entries


def policy_kinds(run: Any) -> list[str] | None:
    """The kinds the scan's policy quarantined (the list's `policy`), as the run recorded them."""
    options = run.options.get("policy") if run is not None else None
    kinds = options.get("kinds") if isinstance(options, dict) else None
    return kinds if isinstance(kinds, list) else None


def build_list(path: Path) -> _Built:
    """The `datalint-quarantine/1` document of the index at `path`, read in one transaction.

    The samples array is assembled by SQLite's JSON functions: a million entries in seconds, where
    building a million Python dicts and dumping them takes several times that. SQLite's group_concat
    keeps the order of the rows it is given (ordered by index here), as json_group_array does.
    """
    state = index_state(path)
    # The entries joined as they are (each is json_object's compact text already: json_group_array
    # would parse each one again), and the listed indexes from the same pass.
    query = f"""SELECT count(*), '[' || coalesce(group_concat(entry, ','), '') || ']',
                       coalesce(group_concat(position, ','), '')
                FROM ({quarantine.entries_json_sql()})"""
    with read.reading(path) as connection:
        connection.execute("BEGIN")  # one snapshot of the index for every query below (WAL)
        count, samples, indexes = connection.execute(query).fetchone()
        run = store.latest_run(connection)
        connection.execute("COMMIT")
    listed = [int(index) for index in indexes.split(",")] if indexes else []
    head = {
        "format": quarantine.FORMAT,
        "dataset": run.spec if run else None,
        "length": run.length if run else None,
        "fingerprint": run.fingerprint if run else None,
        "created": store.utc_now(),
        "policy": policy_kinds(run),
    }
    prefix = json.dumps(head, separators=(", ", ": "))[:-1]
    body = f"{prefix}{_SAMPLES.decode()}{samples}}}".encode()
    tail = _Appendable.of(body, listed)
    return _Built(tail.served(int(count)), tail, state)
