"""Training jobs as the service's clients: lists by URL (cached), guard failures from DataLoader workers."""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path
from typing import Any

import pytest
from service_data import Failing, bad_indices, make
from service_server import HERE, Server, dataset_table, environment

from datalint.index import store
from datalint.torch import QuarantineSampler
from datalint.training import remote
from datalint.training.quarantine import load_quarantine


def training(
    server: Server, url: str, n: int, start: int, step: int, delay: float, tmp: Path
) -> subprocess.Popen[str]:
    env = environment()
    env["DATALINT_TOKEN"] = server.tokens["writer"]
    env["DATALINT_SPOOL_DIR"] = str(tmp / "spool")
    command = [
        sys.executable,
        str(HERE / "service_training.py"),
        url,
        str(n),
        str(start),
        str(step),
        str(delay),
    ]
    return subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def guard_rows(server: Server, name: str) -> list[tuple[int, str]]:
    db = store.open_index(server.folder / "state" / "datasets" / name / "index.db", create=False)
    try:
        return [
            tuple(r)
            for r in db.execute(
                "SELECT idx, info FROM samples"
                " WHERE run_id IN (SELECT id FROM runs WHERE kind = 'guard') ORDER BY idx"
            )
        ]
    finally:
        db.close()


def ingested(server: Server, name: str) -> int:
    for line in server.request("GET", "/metrics", token="reader").text.splitlines():
        if line.startswith(f'datalint_failures_ingested_total{{dataset="{name}"}}'):
            return int(line.split()[-1])
    raise AssertionError("no ingest counter")


@pytest.mark.slow
def test_failures_from_two_training_processes_with_two_workers_each_all_arrive_once(tmp_path: Path) -> None:
    server = Server(tmp_path, dataset_table("train")).start()
    try:
        url = f"{server.base}/v1/datasets/train"
        jobs = [
            training(server, url, 200, 0, 7, 0.0, tmp_path / "a"),
            training(server, url, 200, 3, 11, 0.0, tmp_path / "b"),
        ]
        for job in jobs:
            out, err = job.communicate(timeout=120)
            assert job.returncode == 0, err
            assert int(out) == 25  # 200 samples in batches of 8: every batch kept its size (substitutes)
        # A loaded machine may make a sender spool a batch the service did not answer in time; the
        # spool is how such a batch arrives, once, when replayed (as `datalint guard replay` does).
        for spool in (tmp_path / d / "spool" for d in ("a", "b")):
            if spool.exists() and any(spool.glob("*.jsonl")):
                remote.replay(spool, url, token=server.tokens["writer"])
        expected = sorted(set(range(0, 200, 7)) | set(range(3, 200, 11)))
        rows = guard_rows(server, "train")
        assert [idx for idx, _ in rows] == expected
        sent = len(range(0, 200, 7)) + len(range(3, 200, 11))
        # Three indices fail in both processes; the counter may count such a pair once or twice,
        # depending on whether they meet in one group commit. Never more than sent, never fewer
        # than the distinct rows.
        assert len(expected) <= ingested(server, "train") <= sent
        hosts = {json.loads(info)["pid"] for _, info in rows}
        assert len(hosts) == 4, "two processes x two DataLoader workers, each its own sender"
        spooled = [f for d in ("a", "b") for f in (tmp_path / d / "spool").glob("*.jsonl")]
        assert spooled == [], "every batch was taken, directly or replayed from the spool"
        listed = server.request("GET", "/v1/datasets/train/quarantine", token="reader").json()
        assert [s["index"] for s in listed["samples"]] == expected
    finally:
        server.stop()


def test_an_answer_cut_off_mid_response_is_an_oserror_so_the_batch_is_spooled(tmp_path: Path) -> None:
    """A service killed while it answers leaves a response shorter than its Content-Length; the
    client must see a network error (OSError), not http.client's own exception, so a sender that
    spools on network errors keeps the batch."""
    import socket

    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def answer_half() -> None:
        connection, _ = listener.accept()
        with connection:
            received = b""
            while b"\r\n\r\n" not in received:
                received += connection.recv(65536)
            head, _, body = received.partition(b"\r\n\r\n")
            fields = dict(line.lower().split(b":", 1) for line in head.split(b"\r\n")[1:])
            length = int(fields[b"content-length"])
            while len(body) < length:  # the whole request read: the close below is a clean end
                body += connection.recv(65536)
            connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 32\r\n\r\n{")  # then gone
            connection.shutdown(socket.SHUT_WR)

    thread = threading.Thread(target=answer_half)
    thread.start()
    spool = remote.Spool(tmp_path / "spool.jsonl")
    batch = [{"index": 1, "key": "k1", "error_type": "OSError", "message": "m", "id": "f1"}]
    try:
        remote.post_failures(f"http://127.0.0.1:{port}/v1/datasets/train", batch, token=None, timeout=5)
    except OSError as exc:
        assert "the answer broke off" in str(exc)
        spool.append(batch)
    finally:
        thread.join(timeout=10)
        listener.close()
    assert spool.pending(), "the cut-off answer was taken for an acknowledgement"


@pytest.mark.slow
def test_the_service_sigkilled_mid_ingest_loses_no_acknowledged_failure_and_the_spool_replays_the_rest(
    tmp_path: Path,
) -> None:
    server = Server(tmp_path, dataset_table("train")).start()
    url = f"{server.base}/v1/datasets/train"
    spool = remote.Spool(tmp_path / "spool" / "client.jsonl")
    acknowledged: list[int] = []
    stop = threading.Event()

    def sender() -> None:  # a client posting batches of 20 as fast as the service takes them
        for start in range(0, 4000, 20):
            batch = [
                {"index": i, "key": f"k{i}", "error_type": "OSError", "message": "m", "id": f"f{i}"}
                for i in range(start, start + 20)
            ]
            try:
                remote.post_failures(url, batch, token=server.tokens["writer"], timeout=5)
                acknowledged.extend(d["index"] for d in batch)
            except OSError:
                spool.append(batch)
            if stop.is_set():
                return

    thread = threading.Thread(target=sender)
    thread.start()
    deadline = time.monotonic() + 30
    while len(acknowledged) < 400 and time.monotonic() < deadline:
        time.sleep(0.01)
    server.kill()
    thread.join(timeout=120)
    assert len(acknowledged) >= 400 and spool.pending(), "the kill landed mid-ingest"

    server.start()
    try:
        committed = {idx for idx, _ in guard_rows(server, "train")}
        assert set(acknowledged) <= committed, "an acknowledged failure was lost"
        spooled = sum(1 for _ in spool.path.open())
        assert (
            len(set(acknowledged)) + spooled >= 4000 - 20
        )  # at most the batch in flight at the kill is in both
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "datalint",
                "guard",
                "replay",
                str(spool.path.parent),
                url,
                "--token",
                server.tokens["writer"],
            ],
            capture_output=True,
            text=True,
            env=environment(),
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        assert f"{spooled} failures sent" in done.stderr
        rows = guard_rows(server, "train")
        assert [idx for idx, _ in rows] == list(range(4000)), "every failure there exactly once"
        # replaying the same failures again (a spool replayed twice) changes nothing
        again = remote.Spool(tmp_path / "spool2" / "again.jsonl")
        again.append(
            {"index": i, "key": f"k{i}", "error_type": "OSError", "message": "m"} for i in range(0, 4000, 3)
        )
        assert remote.replay(again.path, url, token=server.tokens["writer"]) == len(range(0, 4000, 3))
        assert [idx for idx, _ in guard_rows(server, "train")] == list(range(4000))
        assert not again.path.exists() and not spool.path.exists()
    finally:
        stop.set()
        server.stop()


@pytest.mark.slow
def test_a_guard_whose_service_is_down_spools_and_replays_when_it_is_back(tmp_path: Path) -> None:
    server = Server(tmp_path, dataset_table("train"))  # not started yet: the job starts with it down
    url = f"{server.base}/v1/datasets/train"
    job = training(server, url, 120, 0, 5, 0.01, tmp_path)
    _, err = job.communicate(timeout=120)
    assert job.returncode == 0, err
    files = list((tmp_path / "spool").glob("*.jsonl"))
    assert len(files) == 2, "one spool file per DataLoader worker"
    spooled = sorted(json.loads(line)["index"] for f in files for line in f.read_text().splitlines())
    assert spooled == list(range(0, 120, 5))
    server.start()
    try:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "datalint",
                "guard",
                "replay",
                str(tmp_path / "spool"),
                url,
                "--token",
                server.tokens["writer"],
            ],
            capture_output=True,
            text=True,
            env=environment(),
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        assert [idx for idx, _ in guard_rows(server, "train")] == spooled
    finally:
        server.stop()


@pytest.mark.slow
def test_a_sampler_takes_a_url_and_uses_the_cached_list_when_the_service_is_down(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = Server(tmp_path, dataset_table("train")).start()
    url = f"{server.base}/v1/datasets/train"
    monkeypatch.setenv("DATALINT_TOKEN", server.tokens["reader"])
    dataset = make()
    good = [i for i in range(60) if i not in set(bad_indices())]
    try:
        job = server.request("POST", "/v1/datasets/train/scans").json()
        assert server.wait_job(job["id"])["state"] == "succeeded"
        assert list(QuarantineSampler(dataset, url)) == good
        assert list(load_quarantine(url + "/quarantine")) == bad_indices()
    finally:
        server.stop()

    # the service is down when the next job starts: the cached copy, with a warning
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sampler = QuarantineSampler(dataset, url)
    assert list(sampler) == good
    messages = [str(w.message) for w in caught if issubclass(w.category, remote.RemoteListWarning)]
    assert len(messages) == 1 and f"{url}/quarantine unreachable" in messages[0]
    assert "using the cached list" in messages[0]

    # and with no cached copy: a clear error naming the URL
    monkeypatch.setenv("DATALINT_CACHE_DIR", str(tmp_path / "empty-cache"))
    with pytest.raises(remote.RemoteListError) as error:
        QuarantineSampler(dataset, url)
    assert f"{url}/quarantine: cannot reach the datalint service" in str(error.value)


def test_a_wrong_token_or_unknown_dataset_is_an_error_not_the_cache(scanned_service: Server) -> None:
    url = f"{scanned_service.base}/v1/datasets/train"
    with pytest.raises(remote.RemoteListError, match="HTTP 401"):
        load_quarantine(url, token="dl_wrong")
    with pytest.raises(remote.RemoteListError, match="HTTP 404"):
        load_quarantine(f"{scanned_service.base}/v1/datasets/absent", token=scanned_service.tokens["reader"])


def test_a_stale_list_from_the_service_is_refused_as_a_file_would_be(
    scanned_service: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    from datalint.torch import StaleQuarantineError

    monkeypatch.setenv("DATALINT_TOKEN", scanned_service.tokens["reader"])
    url = f"{scanned_service.base}/v1/datasets/train"
    with pytest.raises(StaleQuarantineError, match="length 60 in the list, 50 in the dataset"):
        QuarantineSampler(Failing(50, set()), url)


def _rank_reads_the_list(init_file: str, rank: int, url: str, cache: str, results: Any) -> None:
    import torch.distributed as dist

    from datalint.torch import DistributedQuarantineSampler

    os.environ["DATALINT_CACHE_DIR"] = cache
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=2)
    dist.barrier()
    try:
        sampler = DistributedQuarantineSampler(make(), url)
        results.put((rank, list(sampler.quarantine), sampler.quarantine.source))
    finally:
        dist.destroy_process_group()


@pytest.mark.slow
def test_every_rank_of_a_distributed_job_gets_the_list_rank_0_fetched(
    scanned_service: Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DATALINT_TOKEN", scanned_service.tokens["reader"])
    url = f"{scanned_service.base}/v1/datasets/train"
    context = multiprocessing.get_context("fork")
    results = context.Queue()
    caches = [tmp_path / f"cache-{rank}" for rank in range(2)]
    ranks = [
        context.Process(target=_rank_reads_the_list,
                        args=(str(tmp_path / "rendezvous"), rank, url, str(caches[rank]), results))
        for rank in range(2)
    ]  # fmt: skip
    for process in ranks:
        process.start()
    answers = sorted(results.get(timeout=90) for _ in ranks)
    for process in ranks:
        process.join(timeout=30)
    assert answers[0][1:] == answers[1][1:] and answers[0][1] == bad_indices()
    assert list(caches[0].glob("*.json")), "rank 0 fetched (and cached) the list"
    assert not caches[1].exists(), "rank 1 did not fetch: it got rank 0's bytes"


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="reads /proc")
def test_the_guards_sender_thread_is_named_in_the_os(tmp_path: Path) -> None:
    # `top -H` / `ps -L` show it by name, and benchmarks/service_guard.py reads its CPU time by name
    sender = remote.FailureSender(
        "http://127.0.0.1:9/v1/datasets/train", token=None, spool=tmp_path / "spool.jsonl", run=None
    )
    assert sender._thread.native_id is not None
    comm = Path(f"/proc/self/task/{sender._thread.native_id}/comm")
    deadline = time.monotonic() + 60  # late on a loaded machine; only a missing name waits it out
    while comm.read_text().strip() != remote.SENDER_THREAD:
        assert time.monotonic() < deadline, comm.read_text()
        time.sleep(0.01)
