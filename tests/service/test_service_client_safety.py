"""A training job is never poisoned, stalled or fooled by the service it reads lists from and sends
failures to: lists are checked before they are cached, fetches have a deadline, refused failures are
kept aside instead of replayed forever. Hostile servers are small stand-ins on 127.0.0.1."""

from __future__ import annotations

import hashlib
import json
import logging
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from service_server import Server, dataset_table, environment
from torch.utils.data import SequentialSampler

from datalint.torch import (
    DistributedQuarantineSampler,
    GuardedDataset,
    QuarantineFormatError,
    QuarantineSampler,
    StaleQuarantineError,
    quarantine_filter,
)
from datalint.training import remote
from datalint.training.quarantine import load_quarantine

GOOD = [1, 5, 7]


class Samples:
    def __init__(self, n: int = 300) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: int) -> int:
        return index


def listing(indices: list[int], length: int | None = 300) -> bytes:
    samples = [{"index": i, "kinds": ["error"]} for i in indices]
    return json.dumps({"format": "datalint-quarantine/1", "length": length, "samples": samples}).encode()


class _Handler(BaseHTTPRequestHandler):
    server: _Stub

    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self.server.serve_list(self)

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.batches.append(body["failures"])
        status, answer = self.server.answer(body["failures"])
        data = json.dumps(answer).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class _Stub(ThreadingHTTPServer):
    """A list service stand-in: serves `body` the way `mode` says; answers POSTs with `answer`."""

    daemon_threads = True

    def __init__(self, port: int = 0) -> None:
        super().__init__(("127.0.0.1", port), _Handler)
        self.body = listing(GOOD)
        self.mode = "normal"
        self.stopping = threading.Event()
        self.batches: list[list[dict[str, Any]]] = []
        self.answer: Callable[[list[dict[str, Any]]], tuple[int, Any]] = lambda batch: (
            200,
            {"accepted": len(batch), "committed": True},
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1/datasets/train"

    def serve_list(self, request: _Handler) -> None:
        if self.mode == "slow-headers":  # the status line and headers, one byte a second
            self.drip(
                request, b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Padding: " + b"x" * 40
            )
            return
        etag = '"' + hashlib.sha256(self.body).hexdigest()[:16] + '"'
        if self.mode == "normal" and request.headers.get("If-None-Match") == etag:
            request.send_response(304)
            request.end_headers()
            return
        body = self.body if self.mode != "not-json" else b"<html>proxy error</html>"
        request.send_response(200)
        request.send_header("Content-Type", "application/json")
        request.send_header("ETag", etag)
        if self.mode == "broken-gzip":
            request.send_header("Content-Encoding", "gzip")
            body = b"\x1f\x8b\x08\x00not really gzip"
        declared = len(body) + (1000 if self.mode in ("slow", "cut-off") else 0)
        request.send_header("Content-Length", str(declared))
        request.end_headers()
        if self.mode == "slow":
            self.drip(request, body)
        elif self.mode == "cut-off":
            request.wfile.write(body[:10])  # then the connection closes, 1000 bytes short
        else:
            request.wfile.write(body)

    def drip(self, request: _Handler, data: bytes) -> None:
        """Send `data` one byte a second, for at most 40 s."""
        try:
            for byte in data[:40]:
                request.wfile.write(bytes([byte]))
                request.wfile.flush()
                if self.stopping.wait(1.0):
                    return
        except OSError:
            return  # the client gave up

    def close(self) -> None:
        self.stopping.set()
        self.shutdown()
        self.server_close()


@pytest.fixture
def stub() -> Iterator[_Stub]:
    server = _Stub()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.close()
        thread.join(timeout=10)


def cached_lists(tmp_path: Path) -> list[bytes]:
    return [path.read_bytes() for path in sorted((tmp_path / "client-cache").glob("*.json"))]


def remote_warnings(caught: list[warnings.WarningMessage]) -> list[str]:
    return [str(w.message) for w in caught if issubclass(w.category, remote.RemoteListWarning)]


# ---- lists: never poisoned -------------------------------------------------------------------------

POISONED = {
    "an index past its own length": listing([1, 5000], length=300),
    "an index past the dataset": listing([1, 5000], length=None),
    "a list for a longer dataset": listing([1, 2], length=6000),
    "no list at all": json.dumps({"format": "something-else/1", "samples": []}).encode(),
}


@pytest.mark.parametrize("poison", list(POISONED), ids=list(POISONED))
def test_a_poisoned_list_is_not_cached_and_strict_false_trains_on_the_last_good_one(
    stub: _Stub, tmp_path: Path, poison: str
) -> None:
    dataset = Samples()
    assert list(QuarantineSampler(dataset, stub.url)) == [i for i in range(300) if i not in GOOD]
    good_cache = cached_lists(tmp_path)
    assert good_cache == [listing(GOOD)]

    stub.body = POISONED[poison]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sampler = QuarantineSampler(dataset, stub.url, strict=False)
    assert list(sampler.quarantine) == GOOD
    assert len(sampler) == 297
    messages = remote_warnings(caught)
    assert len(messages) == 1 and f"{stub.url}/quarantine served a list that failed the checks" in messages[0]
    assert "using the cached list" in messages[0]
    assert cached_lists(tmp_path) == good_cache, "the refused list replaced the good one"

    with pytest.raises((QuarantineFormatError, StaleQuarantineError), match=stub.url):
        QuarantineSampler(dataset, stub.url, strict=True)
    assert cached_lists(tmp_path) == good_cache

    stub.close()  # and when the service is down later, the cache still holds the good list
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert list(QuarantineSampler(dataset, stub.url).quarantine) == GOOD
    assert len(remote_warnings(caught)) == 1


def _sampler(dataset: Samples, url: str) -> list[int]:
    return list(QuarantineSampler(dataset, url, strict=False))


def _distributed(dataset: Samples, url: str) -> list[int]:
    return list(
        DistributedQuarantineSampler(dataset, url, num_replicas=1, rank=0, shuffle=False, strict=False)
    )


def _filter(dataset: Samples, url: str) -> list[int]:
    return list(quarantine_filter(SequentialSampler(dataset), url, strict=False))


def _guard(dataset: Samples, url: str) -> list[int]:
    avoided = GuardedDataset(dataset, quarantine=url, strict=False)._avoid
    return [i for i in range(len(dataset)) if i not in avoided]


@pytest.mark.parametrize("consumer", [_sampler, _distributed, _filter, _guard], ids=lambda f: f.__name__[1:])
def test_every_place_a_list_url_is_accepted_falls_back_to_the_good_list(
    stub: _Stub, tmp_path: Path, consumer: Callable[[Samples, str], list[int]]
) -> None:
    dataset = Samples()
    good = [i for i in range(300) if i not in GOOD]
    assert consumer(dataset, stub.url) == good
    stub.body = POISONED["an index past the dataset"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert consumer(dataset, stub.url) == good
    assert len(remote_warnings(caught)) == 1
    assert cached_lists(tmp_path) == [listing(GOOD)]


def test_with_no_good_copy_cached_a_list_that_does_not_fit_is_applied_as_a_file_would_be(
    stub: _Stub, tmp_path: Path
) -> None:
    from datalint.torch import StaleQuarantineWarning

    stub.body = POISONED["an index past the dataset"]
    with pytest.warns(StaleQuarantineWarning, match="index 5000 is past the end"):
        sampler = QuarantineSampler(Samples(), stub.url, strict=False)
    assert list(sampler.quarantine) == [1]
    assert cached_lists(tmp_path) == [], "a list that failed the check is never cached"
    stub.body = POISONED["an index past its own length"]
    with pytest.raises(QuarantineFormatError, match="index 5000 is past the end of a dataset of length 300"):
        QuarantineSampler(Samples(), stub.url, strict=False)


@pytest.mark.slow
def test_a_list_the_real_service_served_survives_a_hostile_server_on_its_address(tmp_path: Path) -> None:
    server = Server(tmp_path, dataset_table("train")).start()
    url = f"{server.base}/v1/datasets/train"
    try:
        job = server.request("POST", "/v1/datasets/train/scans").json()
        assert server.wait_job(job["id"])["state"] == "succeeded"
        good = list(load_quarantine(url, token=server.tokens["reader"]))
        assert good and cached_lists(tmp_path)
    finally:
        server.stop()
    hostile = _Stub(server.port)  # the service's address, now answering with a list for another dataset
    hostile.body = listing([3, 4000], length=None)
    thread = threading.Thread(target=hostile.serve_forever, daemon=True)
    thread.start()
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            sampler = QuarantineSampler(Samples(60), url, strict=False)
        assert list(sampler.quarantine) == good
        assert len(remote_warnings(caught)) == 1
        assert json.loads(cached_lists(tmp_path)[0])["samples"][0]["index"] == good[0]
    finally:
        hostile.close()
        thread.join(timeout=10)


# ---- lists: a deadline, and broken answers ---------------------------------------------------------


@pytest.mark.parametrize("mode", ["slow", "slow-headers", "cut-off", "not-json", "broken-gzip"])
def test_a_broken_answer_is_a_remote_list_error_and_the_cached_list_is_used(
    stub: _Stub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    monkeypatch.setenv("DATALINT_LIST_DEADLINE", "2")
    dataset = Samples()
    QuarantineSampler(dataset, stub.url)
    stub.body = listing([2, 3])  # a new list, so the service does not answer 304
    stub.mode = mode
    started = time.monotonic()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sampler = QuarantineSampler(dataset, stub.url)
    assert time.monotonic() - started < 20
    assert list(sampler.quarantine) == GOOD
    messages = remote_warnings(caught)
    assert len(messages) == 1 and "using the cached list" in messages[0], messages
    assert cached_lists(tmp_path) == [listing(GOOD)]

    monkeypatch.setenv("DATALINT_CACHE_DIR", str(tmp_path / "empty-cache"))
    started = time.monotonic()
    with pytest.raises(
        remote.RemoteListError,
        match=f"{stub.url}/quarantine: (the datalint service sent no usable list|cannot reach)",
    ):
        QuarantineSampler(dataset, stub.url)
    assert time.monotonic() - started < 20


@pytest.mark.parametrize("mode", ["slow", "slow-headers"])
def test_the_deadline_covers_the_whole_answer_and_is_named_in_the_error(stub: _Stub, mode: str) -> None:
    stub.mode = mode
    started = time.monotonic()
    with pytest.raises(remote.RemoteListError, match=r"no complete answer within 2 s"):
        load_quarantine(stub.url, deadline=2)
    assert time.monotonic() - started < 20


def test_an_answer_over_the_size_limit_is_refused(
    stub: _Stub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(remote, "MAX_LIST_BYTES", 100)
    stub.body = listing(list(range(50)))
    with pytest.raises(remote.RemoteListError, match="over 100 bytes"):
        load_quarantine(stub.url)
    assert cached_lists(tmp_path) == []


def test_a_deadline_that_is_not_a_number_of_seconds_is_a_usage_error(
    stub: _Stub, monkeypatch: pytest.MonkeyPatch
) -> None:
    from datalint.errors import UsageError

    monkeypatch.setenv("DATALINT_LIST_DEADLINE", "soon")
    with pytest.raises(UsageError, match="DATALINT_LIST_DEADLINE"):
        QuarantineSampler(Samples(), stub.url)


_DOWN_SCRIPT = """
import sys
sys.path.insert(0, sys.argv[2])
from test_service_client_safety import Samples
from datalint.torch import QuarantineSampler
print(len(QuarantineSampler(Samples(), sys.argv[1])))
"""


def test_the_unreachable_warning_is_printed_once(stub: _Stub, tmp_path: Path) -> None:
    QuarantineSampler(Samples(), stub.url)
    url = stub.url
    stub.close()
    env = environment()
    env["DATALINT_CACHE_DIR"] = str(tmp_path / "client-cache")
    done = subprocess.run(
        [sys.executable, "-c", _DOWN_SCRIPT, url, str(Path(__file__).parent)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "297"
    assert done.stderr.count(f"{url}/quarantine unreachable") == 1, done.stderr


# ---- failures: what the service refuses is kept aside, never replayed ------------------------------


def failure(index: int) -> dict[str, Any]:
    return {"id": f"f{index}", "index": index, "key": None, "error_type": "OSError", "message": "m"}


class _Failure:
    def __init__(self, index: int) -> None:
        self.index, self.key, self.error_type, self.message = index, None, "OSError", "read error"
        self.traceback, self.worker, self.at, self.duration = "", None, "2026-01-01T00:00:00Z", 0.0


def _refuse_second(batch: list[dict[str, Any]]) -> tuple[int, Any]:
    refused = [{"position": 1, "index": batch[1]["index"], "key": None, "reason": "index past the dataset"}]
    return 200, {"accepted": len(batch) - 1, "committed": True, "refused": refused}


def _refuse_all(batch: list[dict[str, Any]]) -> tuple[int, Any]:
    refused = [
        {"position": p, "index": d["index"], "key": None, "reason": f"bad item {p}"}
        for p, d in enumerate(batch)
    ]
    return 422, {"detail": "no valid failure in the batch", "refused": refused}


def _old_422(batch: list[dict[str, Any]]) -> tuple[int, Any]:
    return 422, {"detail": [{"loc": ["body", "failures", 0, "index"], "msg": "must be >= 0"}]}


ANSWERS = {
    "200 with refused": (_refuse_second, {"index past the dataset": [11]}),
    "422 with refused": (_refuse_all, {"bad item 0": [10], "bad item 1": [11], "bad item 2": [12]}),
    "422 of an older service": (_old_422, {"HTTP 422": [10, 11, 12]}),
}


def read_rejects(path: Path) -> dict[str, list[int]]:
    found: dict[str, list[int]] = {}
    for line in path.read_text().splitlines():
        entry = json.loads(line)
        assert entry["url"].endswith("/v1/datasets/train/failures") and entry["time"]
        reason = entry["reason"] if not entry["reason"].startswith("HTTP 422") else "HTTP 422"
        found.setdefault(reason, []).append(entry["failure"]["index"])
    return found


@pytest.mark.parametrize("answer", list(ANSWERS), ids=list(ANSWERS))
def test_the_sender_keeps_refused_failures_in_a_rejects_file_and_never_spools_them(
    stub: _Stub, tmp_path: Path, caplog: pytest.LogCaptureFixture, answer: str
) -> None:
    stub.answer, expected = ANSWERS[answer]
    spool = tmp_path / "spool" / "worker.jsonl"
    sender = remote.FailureSender(stub.url, token=None, spool=spool, run=None)
    with caplog.at_level(logging.WARNING, logger="datalint.remote"):
        for index in (10, 11, 12):
            sender.send(_Failure(index))
        sender.flush(timeout=30)
    assert len(stub.batches) == 1, "posted once, never again"
    assert not spool.exists() or spool.stat().st_size == 0, "a refused failure was spooled for a replay"
    rejects = tmp_path / "spool" / "worker.rejects.jsonl"
    assert read_rejects(rejects) == expected
    refused = sum(len(v) for v in expected.values())
    lines = [r.getMessage() for r in caplog.records if "refused" in r.getMessage()]
    assert len(lines) == 1 and f"refused {refused} of 3 failures" in lines[0] and str(rejects) in lines[0]


@pytest.mark.parametrize("answer", ["422 with refused", "422 of an older service"])
def test_guard_replay_keeps_refused_failures_aside_and_empties_the_spool(
    stub: _Stub, tmp_path: Path, answer: str
) -> None:
    stub.answer, expected = ANSWERS[answer]
    folder = tmp_path / "spool"
    remote.Spool(folder / "host-1.jsonl").append(failure(i) for i in (10, 11, 12))
    for _attempt in range(2):  # a second replay finds nothing left to send
        done = subprocess.run(
            [sys.executable, "-m", "datalint", "guard", "replay", str(folder), stub.url],
            capture_output=True,
            text=True,
            env=environment(),
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
    assert len(stub.batches) == 1, "the refused batch was sent again"
    assert not (folder / "host-1.jsonl").exists()
    assert read_rejects(folder / "host-1.rejects.jsonl") == expected
    done = subprocess.run(
        [sys.executable, "-m", "datalint", "guard", "replay", str(folder / "host-1.rejects.jsonl"), stub.url],
        capture_output=True,
        text=True,
        env=environment(),
        timeout=120,
    )
    assert done.returncode == 2 and "not sent again" in done.stderr


def test_guard_replay_reports_what_was_refused(stub: _Stub, tmp_path: Path) -> None:
    stub.answer = _refuse_second
    folder = tmp_path / "spool"
    remote.Spool(folder / "host-1.jsonl").append(failure(i) for i in (10, 11, 12))
    done = subprocess.run(
        [sys.executable, "-m", "datalint", "guard", "replay", str(folder), stub.url],
        capture_output=True,
        text=True,
        env=environment(),
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    rejects = folder / "host-1.rejects.jsonl"
    assert (
        f"2 failures sent to {stub.url}/failures; 1 refused by the service, kept in {rejects}" in done.stderr
    )


def _refuse_eleven(batch: list[dict[str, Any]]) -> tuple[int, Any]:
    refused = [{"position": p, "reason": "no such sample"} for p, d in enumerate(batch) if d["index"] == 11]
    return 200, {"accepted": len(batch) - len(refused), "committed": True, "refused": refused}


@pytest.mark.parametrize("status", [503, 401, 500])  # a 500 is the service's fault, never the failures'
def test_a_batch_the_service_did_not_answer_for_is_spooled_and_its_refusals_set_aside_on_replay(
    stub: _Stub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, status: int
) -> None:
    answers = iter([(status, {"detail": "busy, or not allowed"})])
    stub.answer = lambda batch: next(answers, None) or _refuse_eleven(batch)
    monkeypatch.setattr(remote, "RETRY_S", 0.0)
    spool = tmp_path / "spool" / "worker.jsonl"
    rejects = tmp_path / "spool" / "worker.rejects.jsonl"
    sender = remote.FailureSender(stub.url, token=None, spool=spool, run=None)
    for index in (10, 11):
        sender.send(_Failure(index))
    sender.flush(timeout=30)
    assert [json.loads(line)["index"] for line in spool.read_text().splitlines()] == [10, 11]
    assert not rejects.exists(), "a busy or wrongly configured service refused nothing"

    sender.send(_Failure(12))  # the service answers again: the spool is replayed after this batch
    sender.flush(timeout=30)
    assert [[d["index"] for d in batch] for batch in stub.batches] == [[10, 11], [12], [10, 11]]
    assert not spool.exists() or spool.stat().st_size == 0
    assert read_rejects(rejects) == {"no such sample": [11]}


def test_a_batch_over_the_services_size_limit_is_sent_in_halves(stub: _Stub) -> None:
    def at_most_two(batch: list[dict[str, Any]]) -> tuple[int, Any]:
        if len(batch) > 2:
            return 413, {"detail": "request body over the limit"}
        if batch[0]["index"] == 13:
            return 200, {"accepted": 0, "committed": True, "refused": [{"position": 0, "reason": "no"}]}
        return 200, {"accepted": len(batch), "committed": True}

    stub.answer = at_most_two
    documents = [failure(i) for i in range(10, 17)]
    delivery = remote.post_failures(stub.url, documents, token=None)
    assert delivery.accepted == 6 and delivery.refused == (remote.Refusal(3, "no"),)
    assert sorted(d["index"] for batch in stub.batches if len(batch) <= 2 for d in batch) == list(
        range(10, 17)
    )


@pytest.mark.slow
def test_the_real_service_refusing_an_invalid_failure_never_sees_it_again(tmp_path: Path) -> None:
    """With the real service: a failure it cannot take (an index past 2**62) goes to the rejects file;
    the valid ones are committed (a service that answers per item) or kept beside it (one that refuses
    the whole batch with 422); the spool is empty either way."""
    server = Server(tmp_path, dataset_table("train")).start()
    url = f"{server.base}/v1/datasets/train"
    spool = tmp_path / "spool" / "worker.jsonl"
    try:
        sender = remote.FailureSender(url, token=server.tokens["writer"], spool=spool, run=None)
        for index in (3, 2**63, 4):
            sender.send(_Failure(index))
        sender.flush(timeout=60)
    finally:
        server.stop()
    assert not spool.exists() or spool.stat().st_size == 0
    refused = [
        json.loads(line) for line in (tmp_path / "spool" / "worker.rejects.jsonl").read_text().splitlines()
    ]
    assert 2**63 in [entry["failure"]["index"] for entry in refused]
    assert all(entry["reason"] for entry in refused)


def test_a_webdataset_stage_given_a_list_url_reads_it_as_every_list_url_is_read(
    stub: _Stub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from datalint.webdataset import QuarantineStage, load_list

    keyed = {
        "format": "datalint-quarantine/1",
        "samples": [{"index": 0, "key": "shard-0.tar/a", "kinds": ["error"]}],
    }
    stub.body = json.dumps(keyed).encode()
    assert (
        QuarantineStage(load_list(stub.url)).keep({"__key__": "a", "__url__": "/data/shard-0.tar"}) is False
    )
    stub.mode = "slow"  # the service now trickles its answer: the stage uses the copy it cached
    stub.body = json.dumps({**keyed, "samples": []}).encode()
    monkeypatch.setenv("DATALINT_LIST_DEADLINE", "2")
    started = time.monotonic()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        stage = QuarantineStage(load_list(stub.url))
    assert time.monotonic() - started < 20  # not the minute a per-read timeout allowed
    assert stage.keep({"__key__": "a", "__url__": "/data/shard-0.tar"}) is False
    assert len(remote_warnings(caught)) == 1


def test_a_sampler_following_a_list_url_takes_the_new_list_at_the_next_epoch(stub: _Stub) -> None:
    dataset = Samples()
    sampler = QuarantineSampler(dataset, stub.url, refresh=True)
    assert list(sampler.quarantine) == GOOD
    sampler.set_epoch(1)  # the service answers 304: the same list
    assert list(sampler.quarantine) == GOOD and sampler.refresh() is False
    stub.body = listing([*GOOD, 9])  # a failure was acknowledged since
    sampler.set_epoch(2)
    assert list(sampler.quarantine) == [*GOOD, 9] and 9 not in set(sampler)
