"""Tokens on a running service: listed, removed and expired from the command line, and the service
follows its token file (on change and on SIGHUP) without a restart."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import tomllib
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from service_server import Server, environment

from datalint.service.auth import Authenticator, TokenRecord, digest_of

# the file is looked at about twice a second: a change shows well within this, even on a busy machine
SEEN_WITHIN_S = 10.0


def token_command(*arguments: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "datalint", "serve", "token", *arguments],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=environment(),
        timeout=60,
    )


def eventually(check: Callable[[], bool], within: float = SEEN_WITHIN_S) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.1)
    return check()


@pytest.fixture
def service(tmp_path: Path) -> Iterator[Server]:
    server = Server(tmp_path, "").start()
    try:
        yield server
    finally:
        server.stop()


def status(server: Server, token: str) -> int:
    return server.request("GET", "/v1/datasets", token=token).status_code


def test_a_removed_token_is_refused_without_a_restart(service: Server) -> None:
    assert status(service, "reader") == 200
    pid = service.process.pid if service.process else None
    done = token_command("remove", "reader", "--tokens", "tokens.toml", cwd=service.folder)
    assert done.returncode == 0, done.stderr
    assert eventually(lambda: status(service, "reader") == 401), "the removed token still works"
    assert status(service, "admin") == 200, "the other tokens keep working"
    assert service.process is not None and service.process.pid == pid and service.process.poll() is None
    assert (service.folder / "tokens.toml").stat().st_mode & 0o777 == 0o600


def test_a_token_added_with_expires_works_until_then_and_is_refused_after(service: Server) -> None:
    done = token_command("add", "short", "--expires", "3s", "--tokens", "tokens.toml", cwd=service.folder)
    assert done.returncode == 0, done.stderr
    token = done.stdout.strip()
    assert eventually(lambda: status(service, token) == 200), "the new token is not accepted"
    assert eventually(lambda: status(service, token) == 401, within=30), "the expired token still works"
    listed = token_command("list", "--tokens", "tokens.toml", cwd=service.folder)
    assert "(expired)" in next(line for line in listed.stdout.splitlines() if line.startswith("short"))


def test_sighup_rereads_the_token_file(service: Server) -> None:
    # the reader's hash replaced in place by one of the same length, the file's mtime put back: its
    # stat says nothing changed, so only the signal makes the service read it again
    path = service.folder / "tokens.toml"
    before = path.stat()
    text = path.read_text()
    changed = text.replace(digest_of(service.tokens["reader"]), digest_of("dl_another"))
    with path.open("r+", encoding="utf-8") as handle:
        handle.write(changed)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert service.process is not None
    service.process.send_signal(signal.SIGHUP)
    assert eventually(lambda: status(service, "reader") == 401), "SIGHUP did not re-read the token file"
    assert service.process.poll() is None, "SIGHUP stopped the service"
    assert status(service, "admin") == 200


def test_a_token_file_broken_while_running_keeps_the_last_good_tokens(service: Server) -> None:
    path = service.folder / "tokens.toml"
    good = path.read_text()
    path.write_text(good + "\n[[tokens]\n")  # an editor saved half a line
    time.sleep(1.5)  # the service looks at least twice
    for _ in range(5):
        assert status(service, "admin") == 200 and status(service, "dl_guess") == 401
        time.sleep(0.3)
    errors = [line for line in service.log.read_text().splitlines() if " ERROR " in line]
    assert len(errors) == 1 and str(path) in errors[0], errors
    path.write_text(good.replace(digest_of(service.tokens["reader"]), digest_of("dl_another")))
    assert eventually(lambda: status(service, "reader") == 401), "the fixed file is not read"


def test_token_list_shows_names_scopes_and_dates_never_hashes(tmp_path: Path) -> None:
    for arguments in (("ci", "--scopes", "read,write", "--expires", "30d"), ("admin", "--scopes", "admin")):
        assert token_command("add", *arguments, "--tokens", "t.toml", cwd=tmp_path).returncode == 0
    listed = token_command("list", "--tokens", "t.toml", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert "sha256" not in listed.stdout and "dl_" not in listed.stdout
    header, ci, admin = listed.stdout.splitlines()
    assert header.split() == ["NAME", "SCOPES", "CREATED", "EXPIRES"]
    name, scopes, created, expires = ci.split()
    assert (name, scopes) == ("ci", "read,write")
    in_30_days = datetime.fromisoformat(created) + timedelta(days=30)
    assert datetime.fromisoformat(expires) == in_30_days
    assert admin.split()[0::3] == ["admin", "never"]
    stored = tomllib.loads((tmp_path / "t.toml").read_text())["tokens"][0]
    assert datetime.fromisoformat(stored["expires"]).utcoffset() == timedelta(0), "expires is UTC"


def test_removing_an_unknown_token_exits_2_naming_the_known_ones(tmp_path: Path) -> None:
    for name in ("ci", "trainer"):
        assert token_command("add", name, "--tokens", "t.toml", cwd=tmp_path).returncode == 0
    done = token_command("remove", "cl", "--tokens", "t.toml", cwd=tmp_path)
    assert done.returncode == 2
    assert "no token named 'cl'" in done.stderr and "ci, trainer" in done.stderr, done.stderr
    assert token_command("remove", "ci", "--tokens", "t.toml", cwd=tmp_path).returncode == 0
    listed = token_command("list", "--tokens", "t.toml", cwd=tmp_path).stdout
    assert [line.split()[0] for line in listed.splitlines()[1:]] == ["trainer"]
    assert (tmp_path / "t.toml").stat().st_mode & 0o777 == 0o600


def test_an_expired_tokens_refusal_says_it_expired() -> None:
    past = datetime.now(UTC) - timedelta(minutes=1)
    auth = Authenticator((TokenRecord("ci", digest_of("dl_ci"), frozenset({"read"}), None, past),))
    assert auth.allows("dl_ci", "read") is None
    assert "the token 'ci' expired at" in auth.refusal("dl_ci")
    assert "a valid token is required" in auth.refusal("dl_other")
