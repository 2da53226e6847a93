"""The service's API on a real server: tokens and scopes, lists with ETags, scans as jobs, metrics."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from service_data import bad_indices
from service_server import Server, environment

from datalint.index import store
from datalint.training.quarantine import load_quarantine

# Every endpoint that changes something, and the scope it needs.
WRITES = [
    ("POST", "/v1/datasets/train/failures", "write", {"failures": []}),
    ("POST", "/v1/datasets/train/scans", "admin", {"mode": "resume"}),
    ("POST", "/v1/datasets", "admin", {"name": "other", "dataset": "x:y"}),
    ("POST", "/v1/scans/0123456789abcdef/cancel", "admin", None),
]


@pytest.mark.parametrize(("method", "path", "scope", "body"), WRITES)
def test_write_and_admin_endpoints_refuse_a_missing_wrong_or_weaker_token(
    scanned_service: Server, method: str, path: str, scope: str, body: object
) -> None:
    for token in (None, "dl_not-a-token", scanned_service.tokens["admin"] + "x"):
        answer = scanned_service.request(method, path, token=token, json=body)
        assert answer.status_code == 401, (token, answer.text)
        assert answer.headers["www-authenticate"] == "Bearer"
    weaker = "reader" if scope == "write" else "writer"
    answer = scanned_service.request(method, path, token=weaker, json=body)
    assert answer.status_code == 403
    assert repr(scope) in answer.json()["detail"]


def test_read_endpoints_need_a_token_too_but_not_healthz(scanned_service: Server) -> None:
    for path in ("/v1/datasets", "/v1/datasets/train/quarantine", "/metrics", "/v1/scans"):
        assert scanned_service.request("GET", path, token=None).status_code == 401, path
        assert scanned_service.request("GET", path, token="reader").status_code == 200, path
    assert scanned_service.request("GET", "/healthz", token=None).json()["status"] == "ok"


def test_the_served_list_is_the_scans_list_in_todays_format_with_an_etag(scanned_service: Server) -> None:
    answer = scanned_service.request("GET", "/v1/datasets/train/quarantine", token="reader")
    assert answer.status_code == 200
    document = answer.json()
    assert document["format"] == "datalint-quarantine/1"
    assert [s["index"] for s in document["samples"]] == bad_indices()
    assert all(s["kinds"] == ["error"] for s in document["samples"])
    # the same entries the scan wrote to its quarantine.json, and load_quarantine(index.db) reads
    folder = scanned_service.folder / "state" / "datasets" / "train"
    on_disk = json.loads((folder / "quarantine.json").read_text())
    assert [s["index"] for s in on_disk["samples"]] == bad_indices()
    assert document["length"] == on_disk["length"] == 60
    assert list(load_quarantine(folder / "index.db")) == bad_indices()

    etag = answer.headers["etag"]
    again = scanned_service.request(
        "GET", "/v1/datasets/train/quarantine", token="reader", headers={"If-None-Match": etag}
    )
    assert again.status_code == 304 and again.content == b""
    stale = scanned_service.request(
        "GET", "/v1/datasets/train/quarantine", token="reader", headers={"If-None-Match": '"something-else"'}
    )
    assert stale.status_code == 200


def test_a_conditional_get_is_answered_only_for_a_token_that_may_read(scanned_service: Server) -> None:
    path = "/v1/datasets/train/quarantine"
    etag = scanned_service.request("GET", path, token="reader").headers["etag"]
    match = {"If-None-Match": etag}
    for token, status in ((None, 401), ("dl_wrong", 401), ("writer", 403), ("reader", 304), ("admin", 304)):
        answer = scanned_service.request("GET", path, token=token, headers=match)
        assert answer.status_code == status, (token, answer.status_code)
        if status == 304:
            assert answer.headers["etag"] == etag and answer.content == b""
    reader = scanned_service.tokens["reader"]
    cookie = {"Cookie": f"datalint_token={reader}", **match}
    assert scanned_service.request("GET", path, token=None, headers=cookie).status_code == 304
    other = scanned_service.request("GET", "/v1/datasets/nope/quarantine", token="reader", headers=match)
    assert other.status_code == 404


def test_the_cli_works_on_the_services_files(scanned_service: Server, tmp_path: Path) -> None:
    index = scanned_service.folder / "state" / "datasets" / "train" / "index.db"
    for command, expected in (
        (["quarantine", str(index), "--format", "txt"], 1),  # 1: the list holds samples
        (["report", str(index), "-o", str(tmp_path / "r.html")], 0),
    ):
        done = subprocess.run(
            [sys.executable, "-m", "datalint", *command],
            capture_output=True,
            text=True,
            env=environment(),
            timeout=120,
        )
        assert done.returncode == expected, done.stderr
    assert (tmp_path / "r.html").stat().st_size > 1000


def test_the_report_is_rendered_from_the_live_index_with_its_strict_csp(scanned_service: Server) -> None:
    answer = scanned_service.request("GET", "/v1/datasets/train/report", token="reader")
    assert answer.status_code == 200
    csp = answer.headers["content-security-policy"]
    assert csp.startswith("default-src 'none'") and "script-src 'sha256-" in csp
    assert "access-control-allow-origin" not in answer.headers  # CORS is off


def test_unknown_datasets_bad_names_and_bad_bodies_are_4xx(scanned_service: Server) -> None:
    assert scanned_service.request("GET", "/v1/datasets/nope/quarantine").status_code == 404
    assert scanned_service.request("GET", "/v1/datasets/..%2f..%2fetc/quarantine").status_code in (404, 422)
    bad_bodies: list[object] = [
        {"failures": [{"index": -1, "key": None, "error_type": "E", "message": "m"}]},
        {"failures": [{"index": 1, "error_type": "", "message": "m"}]},
        {"failures": [{"index": 1, "error_type": "E", "message": "m", "surprise": 1}]},
        {"failures": "many"},
        [],
    ]
    for body in bad_bodies:
        answer = scanned_service.request("POST", "/v1/datasets/train/failures", token="writer", json=body)
        assert answer.status_code == 422, (body, answer.text)
    broken = scanned_service.request(
        "POST",
        "/v1/datasets/train/failures",
        token="writer",
        content=b"{nope",
        headers={"Content-Type": "application/json"},
    )
    assert broken.status_code == 422
    huge = scanned_service.request(
        "POST",
        "/v1/datasets/train/failures",
        token="writer",
        content=b" " * (9 * 1024 * 1024),
        headers={"Content-Type": "application/json"},
    )
    assert huge.status_code == 413


def test_the_openapi_schema_is_published_to_readers(scanned_service: Server) -> None:
    assert scanned_service.request("GET", "/openapi.json", token=None).status_code == 401
    schema = scanned_service.request("GET", "/openapi.json", token="reader").json()
    assert {
        "/v1/datasets/{name}/quarantine",
        "/v1/datasets/{name}/failures",
        "/v1/datasets/{name}/scans",
        "/v1/scans/{job_id}",
        "/healthz",
        "/metrics",
    } <= set(schema["paths"])


def test_metrics_are_prometheus_text(scanned_service: Server) -> None:
    text = scanned_service.request("GET", "/metrics", token="reader").text
    assert "# TYPE datalint_scans_running gauge" in text
    assert 'datalint_quarantined_samples{dataset="train"} 6' in text


def test_one_log_line_per_request_and_per_job_event(scanned_service: Server) -> None:
    path = "/v1/datasets/train/quarantine"
    etag = scanned_service.request("GET", path, token="reader").headers["etag"]
    answer = scanned_service.request("GET", path, token="reader", headers={"If-None-Match": etag})
    assert answer.status_code == 304
    scanned_service.request("GET", "/healthz?probe=1", token=None)
    scanned_service.request("GET", "/v1/datasets/x%0Ay", token="reader")  # a newline in the path
    lines = wait_for_log(scanned_service, '"GET /v1/datasets/x\\ny HTTP/1.1" 422').splitlines()
    access = [line for line in lines if "datalint.service.access:" in line]
    assert any(f'"GET {path} HTTP/1.1" 304 ' in line for line in access)  # 304s are logged like the rest
    assert any('"GET /healthz?probe=1 HTTP/1.1" 200 ' in line and line.endswith(" ms") for line in access)
    assert not any(line.startswith("y HTTP/1.1") for line in lines)  # no line forged from the URL
    log = "\n".join(lines)
    assert "train (resume, api): started" in log and "train (resume, api): succeeded" in log


def wait_for_log(server: Server, text: str, timeout: float = 60) -> str:
    """The log once it holds `text` (access lines are written in batches, every 0.1 s; later under load)."""
    deadline = time.monotonic() + timeout
    while text not in (log := server.log.read_text()):
        assert time.monotonic() < deadline, f"{text!r} not logged:\n{log}"
        time.sleep(0.05)
    return log


def test_a_registered_dataset_is_validated_and_persisted(scanned_service: Server) -> None:
    for bad in (
        {"name": "../etc", "dataset": "x:y"},
        {"name": "ok-name"},
        {"name": ".hidden", "images": "/"},
    ):
        assert scanned_service.request("POST", "/v1/datasets", json=bad).status_code == 422, bad
    made = scanned_service.request("POST", "/v1/datasets", json={"name": "extra", "images": "/nonexistent"})
    assert made.status_code == 201, made.text
    assert (
        scanned_service.request("POST", "/v1/datasets", json={"name": "extra", "images": "/x"}).status_code
        == 409
    )
    saved = json.loads((scanned_service.folder / "state" / "datasets.json").read_text())
    assert [d["name"] for d in saved] == ["extra"]


def test_guard_rows_from_the_service_are_in_the_index_the_cli_reads(scanned_service: Server) -> None:
    failure = {"index": 7, "key": "k7", "error_type": "OSError", "message": "flaky mount", "host": "node-3"}
    answer = scanned_service.request(
        "POST", "/v1/datasets/train/failures", token="writer", json={"failures": [failure]}
    )
    assert answer.json() == {"accepted": 1, "committed": True, "refused": []}
    listed = scanned_service.request("GET", "/v1/datasets/train/quarantine", token="reader").json()
    assert 7 in [s["index"] for s in listed["samples"]]
    db = store.open_index(scanned_service.folder / "state" / "datasets" / "train" / "index.db", create=False)
    try:
        row = db.execute("SELECT status, error_type, info FROM samples WHERE idx = 7").fetchone()
    finally:
        db.close()
    assert row[0] == "error" and row[1] == "OSError" and json.loads(row[2])["host"] == "node-3"


def test_cors_is_off(scanned_service: Server) -> None:
    answer = httpx.options(
        scanned_service.base + "/v1/datasets",
        headers={"Origin": "https://evil.example", "Access-Control-Request-Method": "GET"},
    )
    assert "access-control-allow-origin" not in answer.headers


def loaded_libraries(server: Server) -> str:
    assert server.process is not None
    return Path(f"/proc/{server.process.pid}/maps").read_text()


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="reads /proc/PID/maps")
def test_the_c_parser_and_event_loop_serve_by_default_and_a_named_stack_is_used(
    scanned_service: Server, tmp_path: Path
) -> None:
    default = loaded_libraries(scanned_service)
    assert "httptools" in default and "uvloop" in default
    server = Server(tmp_path, "", service='http = "h11"\nloop = "asyncio"').start()
    try:
        assert server.request("GET", "/healthz", token=None).status_code == 200
        named = loaded_libraries(server)
        assert "httptools" not in named and "uvloop" not in named
        wait_for_log(server, '"GET /healthz HTTP/1.1" 200')
    finally:
        server.stop()
