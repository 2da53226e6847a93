"""The service treats every request as hostile: the Host it names, the page it comes from, its body type
and every item of its body (docs/service.md, "Threat model"). Real uvicorn, real sockets."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from service_server import Server, dataset_table

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def open_service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """The default service: no tokens file, loopback only, one scanned dataset."""
    server = Server(tmp_path_factory.mktemp("open"), dataset_table("train", n=60), tokens=False).start()
    try:
        job = server.request("POST", "/v1/datasets/train/scans", token=None).json()
        assert server.wait_job(job["id"])["state"] == "succeeded"
        yield server
    finally:
        server.stop()


def _raw(server: Server, request: bytes) -> tuple[int, bytes]:
    """Send bytes as they are (no client fixes the Host) and read the status and body."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
        sock.sendall(request)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), body


def _post(path: str, host: str, body: bytes, extra: str = "") -> bytes:
    return (
        f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n{extra}\r\n"
    ).encode() + body


def _scans(server: Server) -> list[dict[str, object]]:
    return server.request("GET", "/v1/scans", token=None).json()["scans"]  # type: ignore[no-any-return]


def test_a_rebound_dns_name_gets_no_answer_and_registers_nothing(open_service: Server) -> None:
    before = len(_scans(open_service))
    evil = f"evil.example:{open_service.port}"
    spec = json.dumps({"name": "x", "dataset": "os:system('touch pwned')"}).encode()
    status, body = _raw(open_service, _post("/v1/datasets", evil, spec))
    assert status == 421 and b"allowed-hosts" in body
    status, _ = _raw(open_service, _post("/v1/datasets/train/scans", evil, b"{}"))
    assert status == 421
    status, _ = _raw(
        open_service, f"GET /v1/datasets HTTP/1.1\r\nHost: {evil}\r\nConnection: close\r\n\r\n".encode()
    )
    assert status == 421  # nor read: the page would read the lists through the user's browser
    names = [d["name"] for d in open_service.request("GET", "/v1/datasets", token=None).json()["datasets"]]
    assert names == ["train"] and len(_scans(open_service)) == before
    assert not (open_service.folder / "pwned").exists()


def test_the_names_a_user_types_are_served(open_service: Server) -> None:
    for host in (f"127.0.0.1:{open_service.port}", f"localhost:{open_service.port}", "127.0.0.1"):
        request = f"GET /healthz HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode()
        assert _raw(open_service, request)[0] == 200, host
    assert _raw(open_service, b"GET /healthz HTTP/1.0\r\n\r\n")[0] == 400  # no Host at all


def test_a_form_posted_from_another_site_is_refused_and_queues_nothing(open_service: Server) -> None:
    before = len(_scans(open_service))
    answer = httpx.post(
        f"{open_service.base}/v1/datasets/train/scans",
        headers={"Origin": "http://evil.example", "Content-Type": "application/x-www-form-urlencoded"},
    )
    assert answer.status_code == 403 and "allowed-origins" in answer.json()["detail"]
    referred = httpx.post(
        f"{open_service.base}/v1/datasets/train/scans", headers={"Referer": "http://evil.example/page.html"}
    )
    assert referred.status_code == 403
    same_site_form = httpx.post(
        f"{open_service.base}/v1/datasets/train/scans",
        headers={"Origin": open_service.base, "Content-Type": "text/plain"},
        content=b'{"mode": "full"}',
    )
    assert same_site_form.status_code == 415  # a form's body type: no page reaches a JSON endpoint
    assert len(_scans(open_service)) == before


def test_a_dataset_spec_is_code_and_the_api_does_not_take_it(open_service: Server) -> None:
    answer = open_service.request(
        "POST", "/v1/datasets", token=None, json={"name": "x", "dataset": "os:system('touch pwned')"}
    )
    assert answer.status_code == 403
    assert "config file" in answer.json()["detail"] and "--allow-code-specs" in answer.json()["detail"]
    data = open_service.request(
        "POST", "/v1/datasets", token=None, json={"name": "photos", "images": "/nowhere"}
    )
    assert data.status_code == 201, data.text  # data is welcome


def test_code_specs_need_the_opt_in_and_an_admin_token(tmp_path: Path) -> None:
    server = Server(tmp_path, dataset_table("train"), service="allow-code-specs = true").start()
    try:
        spec = {"name": "more", "dataset": "service_data.py:make(10, 0, 0.0)"}
        assert server.request("POST", "/v1/datasets", token="writer", json=spec).status_code == 403
        assert server.request("POST", "/v1/datasets", token="admin", json=spec).status_code == 201
    finally:
        server.stop()


def test_each_failure_is_judged_alone_and_one_bad_item_costs_nothing(open_service: Server) -> None:
    failures: list[object] = [
        {"index": n % 60, "key": None, "error_type": "OSError", "message": f"failure {n}"}
        for n in range(10_000)
    ]
    failures[4321] = {"index": 5000, "key": None, "error_type": "OSError", "message": "another dataset's"}
    answer = open_service.request(
        "POST", "/v1/datasets/train/failures", token=None, json={"failures": failures}
    )
    assert answer.status_code == 200, answer.text
    document = answer.json()
    assert document["accepted"] == 9_999 and document["committed"] is True
    assert [(r["position"], r["index"]) for r in document["refused"]] == [(4321, 5000)]
    assert "past the end of the dataset (60 samples" in document["refused"][0]["reason"]
    listed = open_service.request("GET", "/v1/datasets/train/quarantine", token=None).json()
    assert max(entry["index"] for entry in listed["samples"]) < 60


def test_a_batch_with_no_valid_item_is_a_422_naming_each(open_service: Server) -> None:
    body = (
        b'{"failures": [{"index": 1, "key": "caf\\udce9", "error_type": "E", "message": "m"},'
        b' {"index": NaN, "error_type": "E", "message": "m"}, "nope",'
        b' {"index": 1, "error_type": "E", "message": "m", "duration": Infinity}]}'
    )
    status, raw = _raw(
        open_service, _post("/v1/datasets/train/failures", f"127.0.0.1:{open_service.port}", body)
    )
    assert status == 422
    refused = json.loads(raw)["refused"]
    assert [item["position"] for item in refused] == [0, 1, 2, 3]
    assert refused[0]["reason"].startswith("key: ") and "unicode" in refused[0]["reason"]
    assert refused[0]["key"] is None  # not echoed: no client could read it back
    assert "duration" in refused[3]["reason"]


HOSTILE_BODIES = [
    b'{"name": "caf\\udce9", "images": "/tmp", "failures": [], "mode": "full", "indexes": [1],'
    b' "reason": "r"}',
    b'{"name": "x", "images": "/tmp", "timeout": NaN, "failures": [{"index": Infinity}], "indexes": [NaN]}',
    b'{"name": "x", "images": "/tmp", "workers": 1180591620717411303424,'
    b' "indexes": [1180591620717411303424]}',
    b"[" * 100_000 + b"]" * 100_000,
    b'{"name": "\xff\xfe", "failures": [{"index": "\xff"}]}',
    b'{"failures": {"index": 1}, "mode": 7, "name": ["x"], "indexes": "all", "reason": null}',
    b'"just a string"',
    b"",
]
POST_PATHS = [
    "/v1/datasets",
    "/v1/datasets/train/failures",
    "/v1/datasets/train/failures/clear",
    "/v1/datasets/train/scans",
    "/v1/scans/0123456789abcdef/cancel",
    "/login",
]


def test_no_input_however_odd_gives_a_500(open_service: Server) -> None:
    host = f"127.0.0.1:{open_service.port}"
    for path in POST_PATHS:
        for body in HOSTILE_BODIES:
            status, raw = _raw(open_service, _post(path, host, body))
            assert status < 500, (path, body[:80], raw[:300])
    for query in ("?state=caf%ED", "?state=%00", "?state=" + "x" * 10_000):
        assert open_service.request("GET", "/v1/scans" + query, token=None).status_code < 500
    for path in (
        "/v1/datasets/caf%ED",
        "/v1/datasets/%00/quarantine",
        "/v1/scans/%F0%9F%92%A9",
        "/v1/" + "x" * 9000,
    ):
        raw = f"GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode()
        assert _raw(open_service, raw)[0] < 500, path
    assert "Traceback" not in open_service.log.read_text()


def test_an_admin_clear_with_an_index_no_index_can_hold_is_a_422_naming_it(open_service: Server) -> None:
    for indexes in ([2**70], [-1], []):
        answer = open_service.request(
            "POST", "/v1/datasets/train/failures/clear", token=None, json={"indexes": indexes, "reason": "r"}
        )
        assert answer.status_code == 422, (indexes, answer.text)
        assert "indexes" in answer.text


def test_the_page_uses_a_bearer_token_and_the_sign_in_form_its_csrf_token(tmp_path: Path) -> None:
    server = Server(tmp_path, dataset_table("train")).start()
    try:
        page = httpx.get(server.base + "/", headers={"Authorization": f"Bearer {server.tokens['reader']}"})
        assert page.status_code == 200 and "datalint service" in page.text
        with httpx.Client(base_url=server.base) as browser:
            forged = browser.post("/login", data={"token": server.tokens["reader"]}, follow_redirects=False)
            assert forged.status_code == 403 and "datalint_token" not in forged.cookies
            form = browser.get("/login")
            csrf = form.text.split('name="csrf" value="', 1)[1].split('"', 1)[0]
            signed = browser.post(
                "/login", data={"token": server.tokens["reader"], "csrf": csrf}, follow_redirects=False
            )
            assert signed.status_code == 303 and "datalint_token" in signed.cookies
    finally:
        server.stop()
