"""A service that is safe to leave running: one per data directory, and its HTTP side bounded (slow
request headers closed, a cap on open connections, pipelined requests answered in order)."""

from __future__ import annotations

import importlib.util
import select
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from service_server import Server, environment

PARSERS = [
    pytest.param(name, marks=pytest.mark.skipif(not importlib.util.find_spec(name), reason="not installed"))
    for name in ("h11", "httptools")
]
# a slow connection must be closed well within this though the header timeout is 1 s: load may
# delay the service, never by this much
CLOSED_WITHIN_S = 15.0


@pytest.fixture(params=PARSERS)
def strict_service(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Server]:
    service = f'header-timeout = 1\nhttp = "{request.param}"'
    server = Server(tmp_path, "", tokens=False, service=service).start()
    try:
        yield server
    finally:
        server.stop()


def connect(server: Server) -> socket.socket:
    return socket.create_connection(("127.0.0.1", server.port), timeout=10)


def closed_by_the_server(sockets: list[socket.socket], trickle: bytes, within: float) -> list[socket.socket]:
    """Send `trickle` on each socket every half second until the server closes them all or `within`
    passes; the sockets still open then."""
    open_ = list(sockets)
    deadline = time.monotonic() + within
    while open_ and time.monotonic() < deadline:
        for sock in list(open_):
            try:
                sock.sendall(trickle)
            except OSError:  # reset or broken pipe: the server closed it
                open_.remove(sock)
        readable, _, _ = select.select(open_, [], [], 0.5)
        for sock in readable:
            try:
                if sock.recv(4096) == b"":
                    open_.remove(sock)
            except OSError:
                open_.remove(sock)
    return open_


def test_connections_slow_to_send_their_headers_are_closed_others_answered(strict_service: Server) -> None:
    slow = [connect(strict_service) for _ in range(50)]
    silent = [connect(strict_service) for _ in range(5)]  # connected, never a byte
    for sock in slow:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")
    try:
        assert httpx.get(strict_service.base + "/healthz", timeout=30).status_code == 200
        still_open = closed_by_the_server(slow, b"X-Slow: 1\r\n", CLOSED_WITHIN_S)
        assert not still_open, f"{len(still_open)} of 50 slow connections still open"
        assert not closed_by_the_server(silent, b"", 5.0), "a connection that sends nothing stays open"
        assert httpx.get(strict_service.base + "/healthz", timeout=30).status_code == 200
    finally:
        for sock in slow + silent:
            sock.close()


def read_responses(sock: socket.socket, count: int) -> list[tuple[int, bytes]]:
    """(status, body) of the first `count` responses on `sock`, in the order they came."""
    buffer, responses = b"", []
    while len(responses) < count:
        while b"\r\n\r\n" not in buffer:
            chunk = sock.recv(65536)
            assert chunk, f"the connection closed after {len(responses)} responses"
            buffer += chunk
        head, buffer = buffer.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        length = next(int(line.split(":")[1]) for line in lines if line.lower().startswith("content-length:"))
        while len(buffer) < length:
            chunk = sock.recv(65536)
            assert chunk, "the connection closed within a response"
            buffer += chunk
        responses.append((int(lines[0].split()[1]), buffer[:length]))
        buffer = buffer[length:]
    return responses


def test_pipelined_requests_are_answered_in_order_and_a_slow_third_one_is_closed(
    strict_service: Server,
) -> None:
    host = f"Host: 127.0.0.1:{strict_service.port}\r\n".encode()
    sock = connect(strict_service)
    try:
        sock.sendall(
            b"GET /healthz HTTP/1.1\r\n" + host + b"\r\n"
            b"GET /no-such-page HTTP/1.1\r\n" + host + b"\r\n"
            b"GET /healthz HTTP/1.1\r\n"  # the third one's headers then come a line at a time
        )
        (first, body), (second, _) = read_responses(sock, 2)
        assert (first, second) == (200, 404) and b'"status":"ok"' in body
        # a keep-alive connection cannot be held open by sending a request a byte at a time
        assert not closed_by_the_server([sock], b"X-Slow: 1\r\n", CLOSED_WITHIN_S)
    finally:
        sock.close()


def test_keep_alive_holds_an_idle_connection_as_long_as_configured(tmp_path: Path) -> None:
    server = Server(tmp_path, "", tokens=False, service='keep-alive = "60s"').start()
    sock = connect(server)
    try:
        request = f"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n\r\n".encode()
        sock.sendall(request)
        assert read_responses(sock, 1)[0][0] == 200
        time.sleep(7)  # past uvicorn's default of 5 s
        sock.sendall(request)
        assert read_responses(sock, 1)[0][0] == 200, "the idle connection was closed before keep-alive"
    finally:
        sock.close()
        server.stop()


def test_over_max_connections_a_request_is_answered_503(tmp_path: Path) -> None:
    server = Server(tmp_path, "", tokens=False, service="max-connections = 5\nheader-timeout = 60").start()
    idle = [connect(server) for _ in range(5)]
    try:

        def status() -> int:
            return httpx.get(server.base + "/healthz", timeout=30).status_code

        deadline = time.monotonic() + 60
        while status() != 503 and time.monotonic() < deadline:
            time.sleep(0.1)  # until the service has accepted the idle connections
        assert status() == 503, "a sixth connection was served with max-connections = 5"
        idle.pop().close()
        deadline = time.monotonic() + 60
        while status() != 200 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert status() == 200, "with one connection closed the service does not answer again"
    finally:
        for sock in idle:
            sock.close()
        server.stop()


def test_a_second_service_on_the_same_data_dir_exits_2_naming_the_first(tmp_path: Path) -> None:
    for name in ("first", "second"):
        (tmp_path / name).mkdir()
    first = Server(tmp_path / "first", "", tokens=False).start()
    try:
        state = str(tmp_path / "first" / "state")
        second = Server(tmp_path / "second", "", tokens=False, data_dir=state)
        command = [sys.executable, "-m", "datalint", "serve", "--config", str(second.config)]
        process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, env=environment())
        try:
            _, stderr = process.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            pytest.fail("a second service started on the same data directory")
        assert process.returncode == 2, stderr
        assert first.process is not None
        assert f"pid {first.process.pid} on host {socket.gethostname()}, since " in stderr, stderr
        assert state in stderr
        first.kill()  # the kernel drops its lock
        second.start()
        assert second.request("GET", "/healthz", token=None).status_code == 200
        second.stop()
    finally:
        first.stop()
