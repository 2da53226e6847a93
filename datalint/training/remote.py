"""Quarantine lists from a `datalint serve` URL, and guard failures sent to one.

Lists: `load_quarantine("http://host:8765/v1/datasets/train")` GETs `.../quarantine` with the ETag
of the last good copy, which is kept on local disk (`DATALINT_CACHE_DIR`, default
`~/.cache/datalint/lists`). A fetch has a total deadline (`DATALINT_LIST_DEADLINE`, default 30 s):
a service that cannot be reached, answers 5xx, or sends a slow, cut-off, oversized or unreadable body
means the cached copy, with a `RemoteListWarning`; no cached copy means a `RemoteListError` naming the
URL. A list is validated exactly like a file, and fitted to the dataset where one is at hand, before
it replaces the cached copy: a list that fails is never cached, and with `strict=False` the job
trains on the last good copy instead. In a `torch.distributed` job rank 0 fetches, checks and
broadcasts the bytes, so every rank trains on the same list.

Failures: `GuardedDataset(ds, record="http://...")` hands each failure to this process's
`FailureSender` (one per process: each DataLoader worker starts its own), a background thread that
posts batches and never blocks `__getitem__`. A batch the service did not answer for goes to an
append-only spool file (`DATALINT_SPOOL_DIR`, default `.datalint/spool`), replayed when the service
answers again, at exit, or by hand with `datalint guard replay SPOOL URL`. Replays are idempotent:
the service keys failures by sample index. Failures the service refused (per item, or a whole batch
refused by its status) go to the spool file's rejects file (`NAME.rejects.jsonl`) and are never sent
again.
"""

from __future__ import annotations

import contextlib
import datetime
import hashlib
import http.client
import json
import logging
import math
import os
import queue
import socket
import threading
import time
import urllib.error
import urllib.request
import uuid
import zlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from datalint.errors import DatalintError, UsageError
from datalint.files import write_atomically

logger = logging.getLogger("datalint.remote")

TIMEOUT_S = 10.0
BATCH = 500  # failures per POST
SENDER_THREAD = "datalint-send"  # the sender's thread name, in Python and in the OS
LINGER_S = 0.2  # how long the sender waits to fill a batch
RETRY_S = 5.0  # how often a sender with a spool tries the service again


class RemoteListError(DatalintError):
    """A list URL that gives no list: the service is unreachable and nothing is cached, or it refused."""


class RemoteListWarning(UserWarning):
    """The service gave no usable list (unreachable, or a list that failed the checks); training uses
    the last good copy, cached."""


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

DEADLINE_S = 30.0  # a list fetch's whole time, from connect to the body's last byte
MAX_LIST_BYTES = 1 << 30  # an answer past this (as sent, or unzipped) is no list: a broken or hostile server
_CHUNK = 1 << 16


def cache_dir() -> Path:
    configured = os.environ.get("DATALINT_CACHE_DIR")
    return Path(configured) if configured else Path.home() / ".cache" / "datalint" / "lists"


def list_deadline(deadline: float | None = None) -> float:
    """The seconds a list fetch may take in all: `deadline`, else `DATALINT_LIST_DEADLINE`, else 30."""
    where = "deadline"
    if deadline is None:
        configured = os.environ.get("DATALINT_LIST_DEADLINE", "").strip()
        if not configured:
            return DEADLINE_S
        where = "DATALINT_LIST_DEADLINE"
        try:
            deadline = float(configured)
        except ValueError:
            deadline = math.nan
    if not 0 < deadline < math.inf:
        raise UsageError(f"{where}: expected a positive number of seconds (e.g. 30), got {deadline!r}")
    return deadline


@dataclass(frozen=True)
class Chosen:
    """The list a job trains on: its bytes, where they came from, and the warning to give about them."""

    body: bytes
    source: str
    warning: str | None = None
    quarantine: Any = None  # the `Quarantine` made from `body`, where it was made (rank 0)


def load_remote_quarantine(
    url: str,
    *,
    token: str | None = None,
    dataset: Any = None,
    strict: bool = True,
    deadline: float | None = None,
) -> Any:
    """`load_quarantine()` for a URL: the same validated `Quarantine`, on every rank the same one.

    With `dataset`, the list comes back fitted to it (`fit_quarantine`), and a fresh list that does not
    fit is refused before it can replace the cached one: `strict=False` then trains on the cached list
    (with a `RemoteListWarning`), `strict=True` raises.
    """
    seconds = list_deadline(deadline)
    chosen = _same_on_every_rank(lambda: _choose(url, token, dataset, strict, seconds))
    if chosen.warning:
        _warn_user(chosen.warning)
    if chosen.quarantine is not None:
        return chosen.quarantine
    return _fitted(_parsed(chosen.body, chosen.source), dataset, strict)


def _choose(url: str, token: str | None, dataset: Any, strict: bool, seconds: float) -> Chosen:
    """Fetch, check, and cache only what passed; on any failure, the last good copy or an error."""
    from datalint.training.fit import StaleQuarantineError
    from datalint.training.quarantine import QuarantineFormatError

    target = list_url(url)
    cached, etag = _read_cache(target)
    try:
        body, new_etag = _download(target, token, etag if cached is not None else None, seconds)
    except _NoList as exc:
        return _fall_back(target, cached, exc, dataset, strict)
    fresh = body is not None
    body = body if body is not None else cached
    assert body is not None  # a 304 answers only the If-None-Match sent with a cached copy
    try:
        parsed = _parsed(body, target)
        checked = _fitted(parsed, dataset, strict=True)
    except _NoList as exc:  # bytes that are no JSON: a transfer gone wrong, like a cut-off one
        return _fall_back(target, cached if fresh else None, exc, dataset, strict)
    except (QuarantineFormatError, StaleQuarantineError) as exc:
        if strict:
            raise
        if fresh and cached is not None:
            return _fall_back(target, cached, _Refused(str(exc)), dataset, strict)
        if isinstance(exc, QuarantineFormatError):
            raise
        checked = _fitted(parsed, dataset, strict=False)  # no other list to use: as for a file
    else:
        if fresh:
            _write_cache(target, body, new_etag)
    return Chosen(body, target, quarantine=checked)


def _fall_back(target: str, cached: bytes | None, problem: _NoList, dataset: Any, strict: bool) -> Chosen:
    if cached is None:
        raise RemoteListError(
            f"{target}: {problem.said} ({problem}) and no copy of this list is cached in {cache_dir()}; start"
            " or fix the service, or pass a quarantine.json path instead of the URL"
        )
    try:
        quarantine = _fitted(_parsed(cached, target), dataset, strict)
    except _NoList as exc:
        raise RemoteListError(
            f"{target}: {problem.said} ({problem}) and the cached copy {_cache_path(target)} is unreadable"
            f" ({exc}); delete it"
        ) from None
    cache = _cache_path(target)
    message = f"datalint: {target} {problem.said_short} ({problem}); using the cached list from {cache}"
    return Chosen(cached, target, warning=message, quarantine=quarantine)


class _NoList(Exception):
    """No usable answer: no connection, or an error status from the service's side."""

    said_short = "unreachable"
    said = "cannot reach the datalint service"


class _BadAnswer(_NoList):
    """An answer that broke off, ran past the deadline or the size limit, or is no JSON."""

    said_short = "sent no usable list"
    said = "the datalint service sent no usable list"


class _Refused(_NoList):
    """A list that fails the format check, or does not fit the dataset."""

    said_short = "served a list that failed the checks"
    said = "the datalint service served a list that failed the checks"


Downloaded = tuple[bytes | None, str | None]


def _download(target: str, token: str | None, etag: str | None, seconds: float) -> Downloaded:
    """The list's bytes and ETag (None for 304: the cached copy is current), all within `seconds`.

    urllib's timeout bounds each socket operation, not the whole: a name lookup that hangs, or headers
    or a body trickled a byte at a time, never hit it. So the fetch runs in a thread the caller stops
    waiting for at the deadline, and reads the body a chunk at a time against that deadline, which
    ends the thread soon after.
    """
    outcome: list[Downloaded | BaseException] = []

    def fetch() -> None:
        try:
            outcome.append(_fetch(target, token, etag, seconds))
        except BaseException as exc:  # handed to the caller's thread, raised there
            outcome.append(exc)

    worker = threading.Thread(target=fetch, name="datalint-fetch", daemon=True)
    worker.start()
    worker.join(seconds)
    if not outcome:
        raise _BadAnswer(_late(seconds))
    if isinstance(outcome[0], BaseException):
        raise outcome[0]
    return outcome[0]


def _fetch(target: str, token: str | None, etag: str | None, seconds: float) -> Downloaded:
    headers = {**_headers(token), "Accept-Encoding": "gzip"}
    if etag is not None:
        headers["If-None-Match"] = etag
    ends = time.monotonic() + seconds
    request = urllib.request.Request(target, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=min(TIMEOUT_S, seconds)) as response:
            raw = _read_body(response, ends)
            new_etag = response.headers.get("ETag")
            zipped = response.headers.get("Content-Encoding") == "gzip"
    except urllib.error.HTTPError as exc:
        if exc.code == 304 and etag is not None:
            return None, etag
        if exc.code < 500:
            raise RemoteListError(
                f"{target}: the service refused the list: HTTP {exc.code} {_detail(exc)}"
            ) from None
        raise _NoList(f"HTTP {exc.code} {_detail(exc)}".strip()) from None
    except TimeoutError:
        if time.monotonic() >= ends:
            raise _BadAnswer(_late(seconds)) from None
        raise _NoList("timed out") from None
    except urllib.error.URLError as exc:
        raise _NoList(str(exc.reason)) from None
    except http.client.HTTPException as exc:  # IncompleteRead, a bad status line
        raise _BadAnswer(f"{type(exc).__name__}: {exc}") from None
    except OSError as exc:  # refused, reset
        raise _NoList(f"{type(exc).__name__}: {exc}") from None
    return (_gunzip(raw) if zipped else raw), new_etag


def _read_body(response: Any, ends: float) -> bytes:
    sock = _socket_of(response)
    chunks: list[bytes] = []
    size = 0
    while True:
        left = ends - time.monotonic()
        if left <= 0:
            raise TimeoutError
        if sock is not None:
            sock.settimeout(min(TIMEOUT_S, left))
        chunk = response.read1(_CHUNK)  # whatever has arrived: read() would wait for the whole chunk
        if not chunk:
            break
        size += len(chunk)
        if size > MAX_LIST_BYTES:
            raise _BadAnswer(f"the answer is over {MAX_LIST_BYTES} bytes")
        chunks.append(chunk)
    declared = response.headers.get("Content-Length")
    if declared is not None and declared.strip().isdigit() and int(declared) != size:
        # http.client ends a Content-Length body cut short without a word: the count tells
        raise _BadAnswer(f"the answer broke off after {size} of {int(declared)} bytes")
    return b"".join(chunks)


def _socket_of(response: Any) -> socket.socket | None:
    """The response's socket (CPython's SocketIO keeps it as `_sock`), to shrink its timeout to the
    time left; without it each read still ends within TIMEOUT_S."""
    found = getattr(getattr(response.fp, "raw", None), "_sock", None)
    return found if isinstance(found, socket.socket) else None


def _late(seconds: float) -> str:
    return f"no complete answer within {seconds:g} s (the deadline: DATALINT_LIST_DEADLINE or deadline=)"


def _gunzip(raw: bytes) -> bytes:
    unzip = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        body = unzip.decompress(raw, MAX_LIST_BYTES + 1)
    except zlib.error as exc:
        raise _BadAnswer(f"a broken gzip body ({exc})") from None
    if len(body) > MAX_LIST_BYTES:
        raise _BadAnswer(f"the list unzips to over {MAX_LIST_BYTES} bytes")
    if not unzip.eof:
        raise _BadAnswer("a gzip body cut short")
    return body


def _parsed(body: bytes, source: str) -> Any:
    """The bytes as a `Quarantine`, checked as `load_quarantine` checks a file; _BadAnswer for bytes
    that are no JSON document at all, QuarantineFormatError for a document that is no list."""
    from datalint.training.quarantine import parse_quarantine

    try:
        document = json.loads(body.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise _BadAnswer(f"not UTF-8 text (byte {exc.start}: {exc.reason})") from None
    except json.JSONDecodeError as exc:
        raise _BadAnswer(f"not valid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}") from None
    except RecursionError:
        raise _BadAnswer("nested too deeply to read as JSON") from None
    return parse_quarantine(document, source=source)


def _fitted(quarantine: Any, dataset: Any, strict: bool) -> Any:
    if dataset is None:
        return quarantine
    from datalint.training.fit import fit_quarantine

    return fit_quarantine(quarantine, dataset, strict=strict)


def _warn_user(message: str) -> None:
    """Warn once, at the user's line. Only a warning: logging it too printed it twice, as the warning
    and through logging's last-resort handler."""
    from datalint.training.fit import warn_at_caller

    warn_at_caller(message, RemoteListWarning)


def _same_on_every_rank(choose: Callable[[], Chosen]) -> Chosen:
    """Rank 0 fetches and broadcasts: ranks never train on different lists (nor race on the cache)."""
    try:
        import torch.distributed as distributed
    except ImportError:
        return choose()
    if not distributed.is_available() or not distributed.is_initialized():
        return choose()
    box: list[Any] = [None]
    chosen: Chosen | None = None
    if distributed.get_rank() == 0:
        try:
            chosen = choose()
            box[0] = replace(chosen, quarantine=None)  # the bytes travel; each rank parses its own
        except DatalintError as exc:  # every rank raises it, rather than wait for a broadcast forever
            box[0] = exc
    distributed.broadcast_object_list(box, src=0)
    if isinstance(box[0], DatalintError):
        raise box[0]
    return chosen if chosen is not None else box[0]


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
    """Keep a list that passed every check as the last good copy, atomically; a cache error only warns."""
    path = _cache_path(target)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        for name, data in ((path, body), (path.with_suffix(".etag"), (etag or "").encode())):
            write_atomically(name, data, durable=False)
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


# Statuses that say nothing against the failures themselves: the service is busy, restarting or behind
# a proxy that is, the token or URL is wrong (fix it, then `datalint guard replay`), or it failed on its
# own side (a 5xx: the service answers no input with one, so it is never the failures' fault). They stay
# spooled. Any other error status (a 4xx) is the service refusing the batch: it would be refused again.
KEEP_STATUSES = frozenset({401, 403, 404, 408, 425, 429, *range(500, 600)})


@dataclass(frozen=True)
class Refusal:
    position: int  # the failure's position in the batch posted
    reason: str


@dataclass(frozen=True)
class Delivery:
    """The service's answer to one batch: the failures it committed and those it refused."""

    accepted: int
    refused: tuple[Refusal, ...] = ()
    status: int = 200

    def then(self, other: Delivery, offset: int) -> Delivery:
        """This answer followed by `other`'s, for a batch posted in two halves (`other` from `offset`)."""
        moved = tuple(Refusal(r.position + offset, r.reason) for r in other.refused)
        return Delivery(self.accepted + other.accepted, self.refused + moved, max(self.status, other.status))


def post_failures(
    url: str, documents: Sequence[dict[str, Any]], *, token: str | None, timeout: float = TIMEOUT_S
) -> Delivery:
    """POST one batch and return what the service committed and refused. Raises OSError when it did
    not answer for the batch (a response cut off by a service that died while answering included:
    http.client raises those as its own errors, which a caller catching network errors would miss)
    or answered a status in KEEP_STATUSES: the caller keeps the batch. A batch over the service's size
    limit (413) is posted again in halves."""
    body = json.dumps({"failures": list(documents)}).encode()
    headers = {**_headers(token), "Content-Type": "application/json"}
    request = urllib.request.Request(failures_url(url), data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            answer = _json_or_none(response.read())
        if isinstance(answer, dict) and answer.get("committed") is False:
            raise ConnectionError(f"{failures_url(url)}: the service did not commit the batch")
        return _delivery(200, answer, len(documents))
    except urllib.error.HTTPError as exc:
        if exc.code in KEEP_STATUSES:
            raise
        if exc.code == 413 and len(documents) > 1:
            half = len(documents) // 2
            first = post_failures(url, documents[:half], token=token, timeout=timeout)
            return first.then(post_failures(url, documents[half:], token=token, timeout=timeout), half)
        return _delivery(exc.code, _json_or_none(exc.read()), len(documents))
    except http.client.HTTPException as exc:  # IncompleteRead, BadStatusLine: the answer broke off
        broke = f"{type(exc).__name__}: {exc}"
        raise ConnectionError(f"{failures_url(url)}: the answer broke off ({broke})") from exc


def _json_or_none(data: bytes) -> Any:
    try:
        return json.loads(data)
    except (ValueError, RecursionError):
        return None


def _delivery(status: int, answer: Any, count: int) -> Delivery:
    """200: the items listed in `refused` were refused, the rest committed. An error status: every item
    refused, for the reason given per item in `refused` (422) or for the status (an older service's 422,
    a 400, a 500)."""
    answer = answer if isinstance(answer, dict) else {}
    listed = answer.get("refused") if isinstance(answer.get("refused"), list) else []
    reasons: dict[int, str] = {}
    for item in listed:
        position = item.get("position") if isinstance(item, dict) else None
        if isinstance(position, int) and not isinstance(position, bool) and 0 <= position < count:
            reasons.setdefault(position, str(item.get("reason") or "refused")[:1000])
    if status >= 300:
        whole = f"HTTP {status}" + (f": {str(answer['detail'])[:1000]}" if answer.get("detail") else "")
        reasons = {position: reasons.get(position, whole) for position in range(count)}
    refused = tuple(Refusal(position, reason) for position, reason in sorted(reasons.items()))
    return Delivery(count - len(refused), refused, status)


REJECTS_SUFFIX = ".rejects.jsonl"


def rejects_path(spool: Path) -> Path:
    """Where the failures the service refused from `spool` are kept: beside it, never replayed."""
    return spool.with_name(spool.name.removesuffix(".jsonl") + REJECTS_SUFFIX)


def keep_refused(delivery: Delivery, documents: Sequence[dict[str, Any]], url: str, rejects: Path) -> None:
    """Write each refused failure, with the service's reason, to `rejects`; log one line for the batch."""
    if not delivery.refused:
        return
    at = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    target = failures_url(url)
    lines = (
        {
            "failure": documents[r.position],
            "reason": r.reason,
            "status": delivery.status,
            "url": target,
            "time": at,
        }
        for r in delivery.refused
    )
    try:
        Spool(rejects).append(lines)
        kept = f"kept in {rejects}"
    except OSError as exc:
        kept = f"and could not be kept in {rejects} ({exc})"
    logger.warning(
        "datalint guard: %s refused %d of %d failures (first: %s); %s, not sent again",
        target,
        len(delivery.refused),
        len(documents),
        delivery.refused[0].reason,
        kept,
    )


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


@dataclass(frozen=True)
class Replayed:
    sent: int  # committed by the service
    refused: int  # refused, and kept in the rejects files
    rejects: tuple[Path, ...] = ()


def replay(spool: Path, url: str, *, token: str | None = None, batch: int = BATCH) -> int:
    """`replay_spool()`, returning how many failures the service committed."""
    return replay_spool(spool, url, token=token, batch=batch).sent


def replay_spool(spool: Path, url: str, *, token: str | None = None, batch: int = BATCH) -> Replayed:
    """Send every failure in `spool` (a file, or a folder of `*.jsonl`); remove each file once the service
    answered for all of it. What it refused goes to the file's rejects file, never back to the spool.
    Raises on the first batch it did not answer for: what was not answered for stays in the file
    (sending it again later duplicates nothing)."""
    if spool.name.endswith(REJECTS_SUFFIX):
        raise UsageError(f"{spool}: failures the service refused (with its reasons); they are not sent again")
    files = (
        sorted(p for p in spool.glob("*.jsonl") if not p.name.endswith(REJECTS_SUFFIX))
        if spool.is_dir()
        else [spool]
    )
    sent = refused = 0
    rejects: list[Path] = []
    for path in files:
        claimed = path.with_name(path.name + f".replaying-{os.getpid()}")
        try:
            os.replace(path, claimed)  # appends from now on go to a new file; this one is ours
        except FileNotFoundError:
            continue
        documents = list(_read_spool(claimed))
        done = 0
        try:
            for done in range(0, len(documents), batch):
                part = documents[done : done + batch]
                delivery = post_failures(url, part, token=token)
                keep_refused(delivery, part, url, rejects_path(path))
                sent, refused = sent + delivery.accepted, refused + len(delivery.refused)
                if delivery.refused and rejects_path(path) not in rejects:
                    rejects.append(rejects_path(path))
            done = len(documents)
        except BaseException:
            Spool(path).append(documents[done:])  # back in the spool (a replay sends them again, harmlessly)
            claimed.unlink(missing_ok=True)
            raise
        claimed.unlink(missing_ok=True)
    return Replayed(sent, refused, tuple(rejects))


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
        self.rejects = rejects_path(spool)
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
            delivery = post_failures(self.url, batch, token=self.token)
        except Exception as exc:  # the service did not answer for them: nothing is lost, it is in the spool
            self.spool.append(batch)
            logger.warning(
                "datalint guard: %s did not take the batch (%s); %d failures spooled to %s",
                failures_url(self.url),
                exc,
                len(batch),
                self.spool.path,
            )
            return
        keep_refused(delivery, batch, self.url, self.rejects)
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
