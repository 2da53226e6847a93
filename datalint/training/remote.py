"""Quarantine lists from a `datalint serve` URL, and guard failures sent to one.

Lists: `load_quarantine("http://host:8765/v1/datasets/train")` GETs `.../quarantine` with the ETag
of the last good copy, which is kept on local disk (`DATALINT_CACHE_DIR`, default
`~/.cache/datalint/lists`). A service that cannot be reached means the cached copy, with a warning;
no cached copy means a `RemoteListError` naming the URL. The list is validated exactly like a file,
and staleness is checked against the dataset as for a file. In a `torch.distributed` job rank 0
fetches and broadcasts the bytes, so every rank trains on the same list.

Failures: `GuardedDataset(ds, record="http://...")` hands each failure to this process's
`FailureSender` (one per process: each DataLoader worker starts its own), a background thread that
posts batches and never blocks `__getitem__`. A batch the service did not acknowledge goes to an
append-only spool file (`DATALINT_SPOOL_DIR`, default `.datalint/spool`), replayed when the service
answers again, at exit, or by hand with `datalint guard replay SPOOL URL`. Replays are idempotent:
the service keys failures by sample index.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import http.client
import json
import logging
import os
import queue
import socket
import threading
import time
import urllib.error
import urllib.request
import uuid
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from datalint.errors import DatalintError

logger = logging.getLogger("datalint.remote")

TIMEOUT_S = 10.0
BATCH = 500  # failures per POST
SENDER_THREAD = "datalint-send"  # the sender's thread name, in Python and in the OS
LINGER_S = 0.2  # how long the sender waits to fill a batch
RETRY_S = 5.0  # how often a sender with a spool tries the service again


class RemoteListError(DatalintError):
    """A list URL that gives no list: the service is unreachable and nothing is cached, or it refused."""


class RemoteListWarning(UserWarning):
    """The service could not be reached; training uses the cached copy of its list."""


def is_url(value: object) -> bool:
    return isinstance(value, str) and value.startswith(("http://", "https://"))


def list_url(url: str) -> str:
    """`.../v1/datasets/NAME` or `.../v1/datasets/NAME/quarantine` -> the list's URL."""
    url = url.rstrip("/")
    return url if url.endswith("/quarantine") else url + "/quarantine"


def failures_url(url: str) -> str:
    url = url.rstrip("/")
    for suffix in ("/quarantine", "/failures"):
        url = url.removesuffix(suffix)
    return url + "/failures"


def token_for(token: str | None) -> str | None:
    return token if token is not None else os.environ.get("DATALINT_TOKEN") or None


def _headers(token: str | None) -> dict[str, str]:
    headers = {"Accept": "application/json", "User-Agent": "datalint"}
    token = token_for(token)
    if token:
        headers["Authorization"] = f"Bearer {token}"
    return headers


# ---- lists --------------------------------------------------------------------------------------


def cache_dir() -> Path:
    configured = os.environ.get("DATALINT_CACHE_DIR")
    return Path(configured) if configured else Path.home() / ".cache" / "datalint" / "lists"


@dataclass(frozen=True)
class Fetched:
    body: bytes
    source: str  # what the Quarantine's `source` says: the URL, or the cache file it came from
    warning: str | None = None


def fetch_list(url: str, *, token: str | None = None, timeout: float = TIMEOUT_S) -> Fetched:
    """The list's bytes: fresh from the service, or the cached copy when the service is unreachable."""
    target = list_url(url)
    cached_body, cached_etag = _read_cache(target)
    headers = {**_headers(token), "Accept-Encoding": "gzip"}
    if cached_etag is not None and cached_body is not None:
        headers["If-None-Match"] = cached_etag
    request = urllib.request.Request(target, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            body = response.read()
            etag = response.headers.get("ETag")
            if response.headers.get("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
        _write_cache(target, body, etag)
        return Fetched(body, target)
    except urllib.error.HTTPError as exc:
        if exc.code == 304 and cached_body is not None:
            return Fetched(cached_body, target)
        if exc.code < 500:
            raise RemoteListError(
                f"{target}: the service refused the list: HTTP {exc.code} {_detail(exc)}"
            ) from None
        reason = f"HTTP {exc.code} {_detail(exc)}"
    except (urllib.error.URLError, OSError, TimeoutError) as exc:
        reason = str(getattr(exc, "reason", exc))
    if cached_body is None:
        raise RemoteListError(
            f"{target}: cannot reach the datalint service ({reason}) and no copy of this list is cached in "
            f"{cache_dir()}; start the service, or pass a quarantine.json path instead of the URL"
        )
    message = f"datalint: {target} unreachable ({reason}); using the cached list from {_cache_path(target)}"
    return Fetched(cached_body, target, warning=message)


def load_remote_quarantine(url: str, *, token: str | None = None) -> Any:
    """`load_quarantine()` for a URL: the same validated `Quarantine`, on every rank the same one."""
    from datalint.training.quarantine import QuarantineFormatError, parse_quarantine

    fetched = _same_on_every_rank(lambda: fetch_list(url, token=token))
    if fetched.warning:
        warnings.warn(fetched.warning, RemoteListWarning, stacklevel=3)
        logger.warning(fetched.warning)
    try:
        document = json.loads(fetched.body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise QuarantineFormatError(f"{fetched.source}: not valid JSON: {exc}") from None
    return parse_quarantine(document, source=fetched.source)


def _same_on_every_rank(fetch: Any) -> Fetched:
    """Rank 0 fetches and broadcasts: ranks never train on different lists (nor race on the cache)."""
    try:
        import torch.distributed as distributed
    except ImportError:
        return fetch()
    if not distributed.is_available() or not distributed.is_initialized():
        return fetch()
    box: list[Any] = [None]
    if distributed.get_rank() == 0:
        try:
            box[0] = fetch()
        except RemoteListError as exc:
            box[0] = exc
    distributed.broadcast_object_list(box, src=0)
    if isinstance(box[0], RemoteListError):
        raise box[0]
    return box[0]


def _cache_path(target: str) -> Path:
    return cache_dir() / (hashlib.sha256(target.encode()).hexdigest()[:24] + ".json")


def _read_cache(target: str) -> tuple[bytes | None, str | None]:
    path = _cache_path(target)
    try:
        body = path.read_bytes()
    except OSError:
        return None, None
    try:
        etag = path.with_suffix(".etag").read_text(encoding="utf-8").strip() or None
    except OSError:
        etag = None
    return body, etag


def _write_cache(target: str, body: bytes, etag: str | None) -> None:
    """Keep the last good copy (only a body that parses as JSON), atomically; a cache error only warns."""
    try:
        json.loads(body)
    except ValueError:
        return
    path = _cache_path(target)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        for name, data in ((path, body), (path.with_suffix(".etag"), (etag or "").encode())):
            temporary = name.with_name(f".{name.name}.{os.getpid()}.tmp")
            temporary.write_bytes(data)
            os.replace(temporary, name)
    except OSError as exc:
        logger.warning("datalint: could not cache the list of %s in %s: %s", target, path, exc)


def _detail(exc: urllib.error.HTTPError) -> str:
    try:
        return str(json.loads(exc.read()).get("detail", ""))[:300]
    except Exception:  # an error body that is not our JSON: the status says enough
        return ""


# ---- failures ---------------------------------------------------------------------------------------


def failure_document(failure: Any, run: str | None) -> dict[str, Any]:
    """The JSON a failure is posted as (`datalint.training.record.Failure` -> POST .../failures)."""
    return {
        "id": uuid.uuid4().hex,
        "index": failure.index,
        "key": failure.key,
        "error_type": failure.error_type[:256] or "Exception",
        "message": failure.message[:16_384],
        "traceback": failure.traceback[-65_536:],
        "host": socket.gethostname()[:256],
        "pid": os.getpid(),
        "worker": failure.worker,
        "time": failure.at,
        "run": run,
        "duration": failure.duration,
    }


def post_failures(
    url: str, documents: Sequence[dict[str, Any]], *, token: str | None, timeout: float = TIMEOUT_S
) -> None:
    """POST one batch; returns only when the service acknowledged it (committed), raises OSError
    otherwise (a response cut off by a service that died while answering included: http.client
    raises those as its own errors, which a caller catching network errors would miss)."""
    body = json.dumps({"failures": list(documents)}).encode()
    headers = {**_headers(token), "Content-Type": "application/json"}
    request = urllib.request.Request(failures_url(url), data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            response.read()
    except http.client.HTTPException as exc:  # IncompleteRead, BadStatusLine: the answer broke off
        broke = f"{type(exc).__name__}: {exc}"
        raise ConnectionError(f"{failures_url(url)}: the answer broke off ({broke})") from exc


class Spool:
    """An append-only file of failures not yet acknowledged: one JSON document a line."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()

    def append(self, documents: Iterable[dict[str, Any]]) -> None:
        lines = "".join(json.dumps(d, separators=(",", ":")) + "\n" for d in documents)
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a", encoding="utf-8") as handle:
                handle.write(lines)
                handle.flush()
                os.fsync(handle.fileno())

    def pending(self) -> bool:
        return self.path.is_file() and self.path.stat().st_size > 0


def replay(spool: Path, url: str, *, token: str | None = None, batch: int = BATCH) -> int:
    """Send every failure in `spool` (a file, or a folder of `*.jsonl`); remove each file once all of it
    was acknowledged. Returns how many were sent. Raises on the first batch the service refuses: what
    was not acknowledged stays in the file (sending it again later duplicates nothing)."""
    files = sorted(spool.glob("*.jsonl")) if spool.is_dir() else [spool]
    sent = 0
    for path in files:
        claimed = path.with_name(path.name + f".replaying-{os.getpid()}")
        try:
            os.replace(path, claimed)  # appends from now on go to a new file; this one is ours
        except FileNotFoundError:
            continue
        documents = list(_read_spool(claimed))
        try:
            for start in range(0, len(documents), batch):
                post_failures(url, documents[start : start + batch], token=token)
                sent += len(documents[start : start + batch])
        except BaseException:
            Spool(path).append(documents)  # back in the spool (a replay sends them again, harmlessly)
            claimed.unlink(missing_ok=True)
            raise
        claimed.unlink(missing_ok=True)
    return sent


def _read_spool(path: Path) -> Iterable[dict[str, Any]]:
    with path.open(encoding="utf-8", errors="replace") as handle:
        for line in handle:
            line = line.strip()
            if not line:
                continue
            try:
                document = json.loads(line)
            except ValueError:
                continue  # a line cut short by a crash mid-write: the rest of the file is good
            if isinstance(document, dict):
                yield document


class FailureSender:
    """This process's background sender: batches failures, posts them, spools what is not acknowledged."""

    def __init__(self, url: str, *, token: str | None, spool: Path, run: str | None) -> None:
        self.url = url
        self.token = token_for(token)
        self.run = run
        self.spool = Spool(spool)
        self._queue: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self._idle = threading.Event()
        self._idle.set()
        self._thread = threading.Thread(target=self._loop, name=SENDER_THREAD, daemon=True)
        self._thread.start()
        self._last_try = 0.0

    def send(self, failure: Any) -> None:
        """Queue one failure; returns at once (the caller is a DataLoader worker's __getitem__)."""
        self._idle.clear()
        self._queue.put(failure_document(failure, self.run))

    def flush(self, timeout: float = 5.0) -> None:
        """Wait (up to `timeout`) for what is queued to be acknowledged or spooled; then spool the rest."""
        self._queue.put(None)
        if not self._idle.wait(timeout):
            leftovers = []
            while True:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is not None:
                    leftovers.append(item)
            if leftovers:
                self.spool.append(leftovers)

    def _loop(self) -> None:
        name_os_thread(SENDER_THREAD)
        while True:
            first = self._queue.get()
            batch = [first] if first is not None else []
            deadline = time.monotonic() + LINGER_S
            while first is not None and len(batch) < BATCH:
                try:
                    item = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
                except queue.Empty:
                    break
                if item is None:
                    break
                batch.append(item)
            if batch:
                self._deliver(batch)
            if self._queue.empty():
                self._idle.set()

    def _deliver(self, batch: list[dict[str, Any]]) -> None:
        if self.spool.pending() and time.monotonic() - self._last_try < RETRY_S:
            self.spool.append(batch)  # the service was down moments ago: keep the order, try later
            return
        self._last_try = time.monotonic()
        try:
            post_failures(self.url, batch, token=self.token)
        except Exception as exc:  # the service is down or refused: nothing is lost, it is in the spool
            self.spool.append(batch)
            logger.warning(
                "datalint guard: %s unreachable (%s); %d failures spooled to %s",
                failures_url(self.url),
                exc,
                len(batch),
                self.spool.path,
            )
            return
        if self.spool.pending():
            try:
                replay(self.spool.path, self.url, token=self.token)
            except Exception as exc:  # still down for the replay: the spool keeps them
                logger.warning("datalint guard: replaying %s failed (%s); will retry", self.spool.path, exc)


def name_os_thread(name: str) -> None:
    """Give the calling thread its name in the OS too (`top -H`, `ps -L`, /proc/PID/task/TID/comm), so
    the guard's sender can be told from the DataLoader's own threads and its CPU time read. Linux only;
    elsewhere the name stays Python's."""
    with contextlib.suppress(OSError):
        Path(f"/proc/self/task/{threading.get_native_id()}/comm").write_text(name[:15])


_senders: dict[tuple[int, str], FailureSender] = {}
_senders_lock = threading.Lock()


def spool_dir() -> Path:
    configured = os.environ.get("DATALINT_SPOOL_DIR")
    return Path(configured) if configured else Path(".datalint") / "spool"


def sender_for(url: str, *, token: str | None, spool: Path | None, run: str | None) -> FailureSender:
    """This process's sender for `url` (a forked DataLoader worker gets its own, with its own spool file)."""
    key = (os.getpid(), url)
    with _senders_lock:
        sender = _senders.get(key)
        if sender is None:
            folder = spool if spool is not None else spool_dir()
            path = folder / f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}.jsonl"
            sender = FailureSender(url, token=token, spool=path, run=run)
            _senders[key] = sender
            _flush_at_exit(sender)
        return sender


def _flush_at_exit(sender: FailureSender) -> None:
    # DataLoader workers leave through multiprocessing, which skips atexit but runs its Finalize hooks.
    import atexit
    import multiprocessing.util

    atexit.register(sender.flush)
    multiprocessing.util.Finalize(sender, sender.flush, exitpriority=10)
